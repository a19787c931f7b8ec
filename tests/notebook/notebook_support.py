"""Run the example notebook the way CI does, and keep the committed copy executed.

``python -m tests.notebook.notebook_support`` executes examples/audit.ipynb in a fresh kernel (no
embedder, the inline matplotlib backend, its store under a temporary directory) and writes it
back with its outputs, so it can be read on a code host; tests/notebook/test_notebook.py runs it
again and checks the committed outputs are the ones it gives now.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any
from unittest.mock import patch

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "examples" / "audit.ipynb"
_TMP_STORE = re.compile(r"\S*/hmem-audit-\w+")


def execute(tmp: Path) -> Any:
    """The notebook executed with its store under ``tmp``; raises on any failing cell."""
    import nbclient
    import nbformat

    env = {"HMEM_EMBEDDER": "none", "MPLBACKEND": "module://matplotlib_inline.backend_inline",
           "TMPDIR": str(tmp), "PYTHONPATH": os.pathsep.join(
               filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    with patch.dict(os.environ, env):  # the kernel inherits them
        nb = nbformat.read(NOTEBOOK, as_version=4)
        nbclient.NotebookClient(
            nb, timeout=600, startup_timeout=120, kernel_name="python3",
            resources={"metadata": {"path": str(tmp)}},
        ).execute()
    for cell in nb.cells:
        cell.get("metadata", {}).pop("execution", None)  # run timestamps: noise in a diff
    return nb


def cell_text(cell: Any) -> str:
    """What a code cell printed to stdout and the plain text of what it displayed."""
    parts = []
    for o in cell.get("outputs", []):
        if o["output_type"] == "stream" and o.get("name") == "stdout":
            parts.append(o["text"])
        elif o["output_type"] in ("execute_result", "display_data"):
            parts.append(o["data"].get("text/plain", ""))
    return "".join(parts)


def text_outputs(nb: Any) -> list[str]:
    """Each code cell's text output, with the temporary store's path written as <tmp>."""
    return [_TMP_STORE.sub("<tmp>/hmem-audit", cell_text(cell))
            for cell in nb.cells if cell.cell_type == "code"]


def main() -> int:
    import nbformat

    with tempfile.TemporaryDirectory() as tmp:
        nb = execute(Path(tmp))
    for cell in nb.cells:  # the store's path as a reader's machine would show it
        for o in cell.get("outputs", []):
            if o["output_type"] == "stream":
                o["text"] = _TMP_STORE.sub("/tmp/hmem-audit-example", o["text"])
    nbformat.write(nb, NOTEBOOK)
    print(f"wrote {NOTEBOOK.relative_to(REPO)} with its outputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
