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


def test_a_small_reader_is_compared_with_a_reference_store_in_the_same_run(tmp_path):
    """A larger size's small readers alternate with readers of a 10k store built in its own run
    (here two tiny stores): the ratio of the medians is the one the verdict takes."""
    from bench.scale_batch import bench_small_reader, write_workload

    big, small = tmp_path / "big", tmp_path / "small"
    write_workload(big, 2_000)
    write_workload(small, 1_000)
    got = bench_small_reader(big, "order ticket", runs=2, reference=small)
    assert len(got["runs_s"]) == len(got["reference"]["runs_s"]) == 2
    ratios = got["vs_reference"]
    assert ratios["open_recall_s"] == got["open_recall_s"] / got["reference"]["open_recall_s"]
    assert ratios["peak_rss_mib"] == got["peak_rss_mib"] / got["reference"]["peak_rss_mib"]


def test_the_small_readers_verdict_says_which_ratio_it_took():
    """The saved run of 2026-12-07 (night) holds each size's ratio to a 10k store in its own
    run; a result saved before that is judged by the ratio to the 10k size's run, said so."""
    from pathlib import Path

    from bench.scale_report import verdicts

    saved = json.loads((Path(__file__).parents[2] / "docs" /
                        "scale-results-2026-12-07-night.json").read_text())
    small = {s["label"]: s["batch"]["small_reader"] for s in saved["sizes"]}
    said = "\n".join(verdicts(saved))
    for what, key in (("open + first recall", "open_recall_s"), ("RSS", "peak_rss_mib")):
        value = 100 * small["1M"]["vs_reference"][key]
        assert (f"... its {what} over the same at 10k, alternating in one run (x100): "
                f"{value:,.1f} %") in said
    for size in saved["sizes"]:
        size["batch"]["small_reader"].pop("vs_reference", None)
    said = "\n".join(verdicts(saved))
    value = 100 * small["1M"]["open_recall_s"] / small["10k"]["open_recall_s"]
    assert (f"... its open + first recall over the same at 10k, in the 10k size's run (x100): "
            f"{value:,.1f} %") in said
    assert "alternating in one run" not in said
