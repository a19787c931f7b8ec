"""The house as intended, held against the code's imports (read with ``ast``, nothing imported).

Four floors: ``eventlog`` imports nothing of ours; ``projections`` only the log; ``replay`` the
two below; ``hmem`` (the facade and its layers) stands on all three, and its core never imports
a screen (CLI, MCP, demo, plots, export). No import circle anywhere, benchmarks included; no
module reaches into another's underscore names; every module can be read in one sitting. The
drawing of the house (docs/architecture.json: its parts, the PostgreSQL backend among them, and
what must never import what) is held here too: every library module is on a part, and no part
reaches one it must never reach.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = ("eventlog", "projections", "replay", "hmem", "bench", "tests")
LIBRARY = ("eventlog", "projections", "replay", "hmem")
MAX_LINES = 500

ADAPTERS = {
    "hmem.adapters.cli", "hmem.adapters.cli_commands", "hmem.adapters.cli_format",
    "hmem.adapters.mcp_tools", "hmem.adapters.demo", "hmem.notebook.timeline",
    "hmem.adapters.usage", "hmem.adapters.progress", "hmem.__main__",
    "hmem.adapters.mcp_stdio", "hmem.adapters.cli_parsers", "hmem.adapters.mcp_http",
    "hmem.adapters.cli_serve", "hmem.adapters.audit_page", "hmem.adapters.cli_ui",
    "hmem.adapters.listening",
}
EMBEDDERS_MAY_IMPORT = ("hmem.errors", "hmem.embedders", "hmem.http_failures")
# Private names of the standard library and of namedtuples that code may use.
FOREIGN_PRIVATE = {
    "_fields", "_asdict", "_replace", "_make", "_actions", "_SubParsersAction",
    "_check_value",  # argparse's hook for a bad choice (hmem/adapters/cli.py suggests near ones)
    "_bm25_encoder", "_has_bm25_slot",  # Mem0's vector store, set up by bench/peers_mem0.py
}


def _files(*packages: str) -> Iterator[Path]:
    for package in packages:
        yield from sorted((ROOT / package).rglob("*.py"))


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


ALL_MODULES = {_module(p): p for p in _files(*OURS)}


def _imports(path: Path) -> set[str]:
    """Every module of ours that ``path`` imports, at module level, lazily or for typing."""
    found: set[str] = set()
    own = _module(path)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from hmem import errors` imports the module hmem.errors, not the package alone.
            names = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in ALL_MODULES else node.module
                for alias in node.names
            ]
        else:
            continue
        found.update(n for n in names if n.split(".")[0] in OURS and n != own)
    return found


GRAPH = {name: _imports(path) for name, path in ALL_MODULES.items()}


def _floor(module: str) -> str:
    return module.split(".")[0]


def test_each_floor_imports_only_the_floors_below_it():
    allowed = {
        "eventlog": {"eventlog"},
        "projections": {"eventlog", "projections"},
        "replay": {"eventlog", "projections", "replay"},
        "hmem": {"eventlog", "projections", "replay", "hmem"},
    }
    wrong = [
        f"{module} imports {target}"
        for module, targets in GRAPH.items() if _floor(module) in allowed
        for target in targets if _floor(target) not in allowed[_floor(module)]
    ]
    assert not wrong, wrong


def test_the_library_knows_no_screen_and_an_embedder_is_a_plug_in():
    wrong = []
    for module, targets in GRAPH.items():
        if _floor(module) != "hmem":
            continue
        if module not in ADAPTERS:
            wrong += [f"{module} imports the adapter {t}" for t in targets if t in ADAPTERS]
        if module.startswith(("hmem.embedders", "hmem.http_failures")):
            wrong += [
                f"embedder module {module} imports {t}"
                for t in targets if t.startswith("hmem") and not t.startswith(EMBEDDERS_MAY_IMPORT)
            ]
    assert not wrong, wrong


def test_no_import_circle_anywhere():
    """Strongly connected components of the import graph (Tarjan) must all be single modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w not in GRAPH:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in GRAPH:
        if module not in index:
            visit(module)
    assert not circles, circles


def test_no_module_imports_another_modules_private_names():
    wrong = []
    for path in _files(*OURS):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[0] not in OURS:
                    continue
                wrong += [
                    f"{path.relative_to(ROOT)}: from {node.module} import {a.name}"
                    for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not wrong, wrong


@pytest.mark.parametrize("package", [*LIBRARY, "bench"])
def test_no_module_reaches_into_another_objects_private_attributes(package):
    """``obj._name`` only on ``self`` / ``cls`` (tests may poke their own fakes)."""
    wrong = []
    for path in _files(package):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute):
                continue
            name = node.attr
            if not name.startswith("_") or name.startswith("__") or name in FOREIGN_PRIVATE:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not wrong, wrong


def test_every_module_can_be_read_in_one_sitting():
    long = {
        str(path.relative_to(ROOT)): n
        for path in _files(*OURS)
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines: {long}"


def test_the_lineage_fields_are_the_same_everywhere():
    """The fold writes the lineage out by name (it runs once per fact in replay): every place
    that carries it must name the same fields."""
    from eventlog.events import LINEAGE_FIELDS, FactRemembered, FactRevised
    from projections.records import Fact
    from replay.views import FactView

    for holder in (FactRemembered, FactRevised, Fact, FactView):
        assert set(LINEAGE_FIELDS) <= set(holder.__struct_fields__), holder


DRAWING = json.loads((ROOT / "docs" / "architecture.json").read_text(encoding="utf-8"))


def _part_of(module: str) -> str | None:
    """The drawing's part a module is on: the part naming the longest path that holds it."""
    path = str(ALL_MODULES[module].relative_to(ROOT))
    best, length = None, -1
    for part, spec in DRAWING["parts"].items():
        for given in spec["is"]:
            if (path == given or (given.endswith("/") and path.startswith(given))) and (
                len(given) > length
            ):
                best, length = part, len(given)
    return best


PARTS = {module: _part_of(module) for module in ALL_MODULES if _floor(module) != "tests"}


def test_every_library_module_is_on_a_part_of_the_drawing():
    assert not DRAWING.get("ideas"), "every part of the drawing is built"
    missing = sorted(m for m, part in PARTS.items() if part is None)
    assert not missing, f"on no part of docs/architecture.json: {missing}"


@pytest.mark.parametrize("never", DRAWING["never"], ids=lambda n: f"{n[0]}-not-{n[1]}")
def test_a_part_never_imports_what_the_drawing_forbids(never):
    """No module of part A imports one of part B, directly or through modules on no part."""
    source, target, why = never
    wrong = []
    for module, part in PARTS.items():
        if part != source:
            continue
        seen, todo = set(), list(GRAPH[module])
        while todo:
            other = todo.pop()
            if other in seen or other not in PARTS:
                continue
            seen.add(other)
            if PARTS[other] == target:
                wrong.append(f"{module} -> {other}")
            elif PARTS[other] is None:
                todo.extend(GRAPH[other])
    assert not wrong, f"{source} must never import {target} ({why}): {wrong}"


# The modules that may know which backend a store is on: the backends and the one that picks.
BACKEND_MODULES = {"eventlog.pg_log", "hmem.storage.server_backend", "hmem.storage.file_backend",
                   "hmem.storage.targets"}
LOG_CLASSES = {"EventLog", "PgLog"}


def test_no_module_casts_between_logs_or_asks_which_backend_it_is_on():
    """A store holds a Backend and a Log (hmem/storage/backend.py, eventlog/protocol.py): no
    module but the backends' own casts a log to another log class, reads a ``url``, asks
    whether a target is a server URL or builds a log class itself (outside eventlog/)."""
    wrong = []
    for module, path in ALL_MODULES.items():
        if _floor(module) not in LIBRARY or module in BACKEND_MODULES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "cast":
                named = {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)}
                if named & LOG_CLASSES:
                    wrong.append(f"{module}:{node.lineno}: casts to {named & LOG_CLASSES}")
            elif isinstance(node, ast.Attribute) and node.attr == "url":
                wrong.append(f"{module}:{node.lineno}: reads .url")
            elif isinstance(node, ast.Name) and node.id == "is_server_url":
                wrong.append(f"{module}:{node.lineno}: asks is_server_url")
            elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) in LOG_CLASSES
                  and _floor(module) == "hmem"):
                wrong.append(f"{module}:{node.lineno}: opens a {node.func.id} itself")  # type: ignore[attr-defined]
    assert not wrong, wrong
