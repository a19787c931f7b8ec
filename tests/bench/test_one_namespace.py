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


def test_the_one_namespace_bench_measures_a_reader_folding_a_tail(tmp_path, capsys):
    """``--tail``: facts logged after the part and left unpublished are folded by each
    reader, which still answers (the tail's facts are in the namespace it recalls from)."""
    root = tmp_path / "store"
    assert main(["--facts", "2k", "--root", str(root), "--rounds", "1", "--tail", "3"]) == 0
    out = capsys.readouterr().out
    assert "logged 3 facts after the part, unpublished" in out and "10 hits" in out
    parts = [p.name for p in root.glob("checkpoint.columns.*.part")]
    assert parts and all("-2000-" in name for name in parts)  # published before the tail only
    from hmem import Memory

    with Memory(root, namespace="big", read_only=True, embedder=None) as r:
        assert r.store.log.last_seq == 2003
        assert len(r.recall("garden hose ticket", limit=50).hits) >= 3
