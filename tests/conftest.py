"""Hypothesis profiles: ``dev`` (default, quick) and ``ci`` (HYPOTHESIS_PROFILE=ci, thorough)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

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
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
settings.load_profile(PROFILE)


def examples(*, dev: int, ci: int) -> int:
    """Per-test example counts for the two profiles."""
    return ci if PROFILE == "ci" else dev

# Tests choose their embedder explicitly; "auto" must not pick up an installed local model.
os.environ.setdefault("HMEM_EMBEDDER", "none")
