"""The CLI's bound on what a process's loaded namespaces take (``--memory-mb``, globally or
after ``mcp`` / ``serve``; ``$HMEM_MEMORY_MB``) reaches the store it opens."""

from __future__ import annotations

from pathlib import Path

import pytest

from hmem.adapters.cli import build_parser
from hmem.adapters.cli_commands import open_memory


def _bound(argv: list[str]) -> int | None:
    args = build_parser().parse_args(argv)
    args.embedder = "none"
    with open_memory(args, read_only=False) as m:
        return m.store.memory_mb


def test_the_memory_bound_reaches_the_store_from_a_flag_or_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = str(tmp_path / "s")
    monkeypatch.delenv("HMEM_MEMORY_MB", raising=False)
    assert _bound(["--path", store, "stats"]) is None
    assert _bound(["--memory-mb", "64", "--path", store, "stats"]) == 64
    assert _bound(["--path", store, "mcp", "--memory-mb", "8"]) == 8
    assert _bound(["--path", store, "serve", "--memory-mb", "16"]) == 16
    monkeypatch.setenv("HMEM_MEMORY_MB", "32")
    assert _bound(["--path", store, "stats"]) == 32
    assert _bound(["--path", store, "mcp", "--memory-mb", "8"]) == 8


@pytest.mark.parametrize("value", ["0", "lots", "-5", "1.5"])
def test_a_memory_bound_that_is_not_a_whole_number_of_mib_is_refused(
        value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HMEM_MEMORY_MB", value)
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(["stats"])
    assert stop.value.code == 2 and "--memory-mb" in capsys.readouterr().err
