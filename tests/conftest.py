"""Hypothesis profiles: ``dev`` (default, quick), ``ci`` (HYPOTHESIS_PROFILE=ci, thorough) and
``mutation`` (dev sizes, derandomized)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci",
    max_examples=500,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# For mutation testing (docs/mutation.md): the dev sizes, the same examples on every run, so a
# mutant is judged by the same cases as the clean code; no shrinking (a failure is the verdict).
settings.register_profile(
    "mutation", max_examples=50, deadline=None, derandomize=True, database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
settings.load_profile(PROFILE)


def examples(*, dev: int, ci: int) -> int:
    """Per-test example counts for the two profiles."""
    return ci if PROFILE == "ci" else dev

# A store on PostgreSQL keeps its process's projection in a cache directory, and a server
# store's keys in a key directory: the tests' own, made once (pytest-xdist's workers inherit
# them) and removed when the process that made them ends.
for _name, _prefix in (("HMEM_CACHE", "hmem-test-cache-"), ("HMEM_KEYS", "hmem-test-keys-")):
    if _name not in os.environ:
        os.environ[_name] = tempfile.mkdtemp(prefix=_prefix)
        atexit.register(shutil.rmtree, os.environ[_name], ignore_errors=True)

# Tests choose their embedder explicitly; "auto" must not pick up an installed local model.
os.environ.setdefault("HMEM_EMBEDDER", "none")
