"""The example notebook runs end to end (so it cannot rot), in a fresh kernel and a temp dir, and
the committed copy holds the outputs it gives now (``python -m tests.notebook.notebook_support``
writes them), so it can be read on a code host.

Skipped only when the ``notebook`` or ``plot`` extra is missing, and never in CI (``$CI`` set):
``.ci/run`` installs both, so there a missing one fails the test instead of hiding it."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import pytest


def _require(name: str) -> ModuleType:
    if os.environ.get("CI"):
        return importlib.import_module(name)
    return pytest.importorskip(name)


nbformat = _require("nbformat")
nbclient = _require("nbclient")
_require("ipykernel")

from tests.notebook.notebook_support import NOTEBOOK, cell_text, execute, text_outputs  # noqa: E402


def _tagged(nb: dict, tag: str) -> dict:
    cells = [c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, tag
    return cells[0]


def test_committed_notebook_is_executed() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    for cell in code:
        assert all(o["output_type"] != "error" for o in cell.outputs), cell.source[:60]
    assert sum(bool(c.outputs) for c in code) >= len(code) - 2  # all but the set-up and close


def test_audit_notebook_runs(tmp_path: Path) -> None:
    _require("matplotlib")
    _require("pandas")
    nb = execute(tmp_path)  # raises CellExecutionError, with the cell and traceback, on any error
    committed = nbformat.read(NOTEBOOK, as_version=4)
    assert text_outputs(nb) == text_outputs(committed), (
        "the committed notebook's outputs are stale: run "
        "`python -m tests.notebook.notebook_support`"
    )
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error", cell.source[:80]
    then = cell_text(_tagged(nb, "believed-then"))
    assert "Wednesday evening  'where is the team offsite'  The team offsite is in Lisbon" in then
    assert "now  'where is the team offsite'  The team offsite is in Porto" in then
    diff = cell_text(_tagged(nb, "diff"))
    assert '"Maya lives in London" -> #10 "Maya lives in Paris" (world change)' in diff
    assert "(correction)" in diff and 'forgotten  #3 "Maya is vegetarian" (user asked)' in diff
    why = cell_text(_tagged(nb, "why"))
    assert "revision chain, oldest first:" in why and "world change after #1" in why
    churn = cell_text(_tagged(nb, "churn"))
    assert "chat" in churn and "planner" in churn and "0.75" in churn
    timeline = _tagged(nb, "timeline")
    assert any("image/png" in out.get("data", {}) for out in timeline.outputs)
    export = cell_text(_tagged(nb, "export"))
    assert "'events': 13" in export and "Maya lives in Paris" in export
    assert list(tmp_path.glob("hmem-audit-*/timeline.png"))
    assert list(tmp_path.glob("hmem-audit-*/export/fact_versions.parquet"))
