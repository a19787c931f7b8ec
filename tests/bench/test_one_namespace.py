"""bench.one_namespace end to end on a tiny store: it builds the store once, and every fresh
reader it starts finds the namespace and answers from it."""

from __future__ import annotations

from bench.one_namespace import main


def test_the_one_namespace_bench_builds_once_and_measures_fresh_readers(tmp_path, capsys):
    root = tmp_path / "store"
    assert main(["--facts", "2k", "--root", str(root), "--rounds", "1"]) == 0
    first = capsys.readouterr().out
    assert "building 2,000 facts in one namespace" in first
    assert "10 hits" in first and "target 1 s" in first
    assert main(["--facts", "2k", "--root", str(root), "--rounds", "2"]) == 0
    again = capsys.readouterr().out
    assert "building" not in again and again.count("10 hits") == 2
