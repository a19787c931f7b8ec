"""bench.scale end to end on a tiny store: every part runs (a broken part stopped the whole
bench only when someone ran it at full size) and its summary names every target."""

from __future__ import annotations

import json

from bench.scale import main


def test_the_scale_bench_runs_every_part_at_a_tiny_size(tmp_path, capsys):
    out = tmp_path / "scale.json"
    assert main(["--sizes", "2k", "--no-embed", "--queries", "5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    (size,) = result["sizes"]
    assert size["replay"]["rebuild_events_per_s"] > 0  # the log read back through its sealer
    for target in ("replay (rebuild_projection)", "remember_many", "hmem copy",
                   "one 200-fact namespace", "one namespace of 2k facts"):
        assert f"- {target}" in printed
    assert size["batch"]["one_namespace"]["open_recall_s"] > 0


def test_the_recall_bench_runs_at_the_index_layer(tmp_path, capsys):
    """Sizes above ``--memory-max`` rank over the index layer alone (a stand-in for the
    projector): every row runs there too."""
    from bench.recall_speed import main as recall_main

    out = tmp_path / "recall.json"
    assert recall_main(["--sizes", "2k", "--memory-max", "1k", "--no-embed", "--queries", "5",
                        "--out", str(out)]) == 0
    (size,) = json.loads(out.read_text())["sizes"]
    assert size["via"] == "index"
    assert size["latency"]["hybrid"]["p95_ms"] > 0
    assert "rank, hybrid" in capsys.readouterr().out
