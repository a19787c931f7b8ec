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


def test_a_small_reader_is_compared_with_a_reference_store_in_the_same_run(tmp_path, capsys):
    """A larger size's small readers alternate with readers of a 10k store built in its own run
    (here two tiny stores): the verdict takes that ratio, not one across runs minutes apart."""
    from bench.scale_batch import bench_small_reader, write_workload
    from bench.scale_report import _batch_verdicts

    big, small = tmp_path / "big", tmp_path / "small"
    write_workload(big, 2_000)
    write_workload(small, 1_000)
    got = bench_small_reader(big, "order ticket", runs=1, reference=small)
    ratios = got["vs_reference"]
    assert ratios["open_recall_s"] == got["open_recall_s"] / got["reference"]["open_recall_s"]
    assert ratios["peak_rss_mib"] == got["peak_rss_mib"] / got["reference"]["peak_rss_mib"]
    capsys.readouterr()
    checked: list[tuple[str, float]] = []
    size = {"label": "2k", "facts": 2_000, "batch": {
        "bulk": {"facts_per_s": 1.0}, "copy": {"events_per_s": 1.0}, "small_reader": got}}
    _batch_verdicts(size, size, lambda name, value, *rest: checked.append((name, value)))
    for what, key in (("open + first recall", "open_recall_s"), ("RSS", "peak_rss_mib")):
        assert (f"... its {what} over the same at 10k, alternating in one run (x100)",
                100 * ratios[key]) in checked
    # a result saved before readers alternated: the ratio to the 10k size's run, said so
    older = {**size, "batch": {**size["batch"], "small_reader": {
        k: v for k, v in got.items() if k not in ("vs_reference", "reference")}}}
    first = {"label": "10k", "facts": 10_000, "batch": {"small_reader": got["reference"]}}
    checked.clear()
    _batch_verdicts(older, first, lambda name, value, *rest: checked.append((name, value)))
    assert ("... its open + first recall over the same at 10k, in the 10k size's run (x100)",
            100 * ratios["open_recall_s"]) in checked
