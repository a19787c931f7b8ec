"""The summary of ``bench.scale``: the table across sizes with growth factors, the verdicts
against the targets, and the 200M-fact cost story from the measured bytes per fact (also run on
a saved result by ``python -m bench.scale --report FILE``)."""

from __future__ import annotations

from typing import Any

from bench.report import fmt_ms, fmt_rate, section
from bench.scale_workload import BIG, PER_USER, POLICIES

__all__ = ["TARGETS", "cost_story", "markdown", "metrics", "report", "verdicts"]

# Issue 13's targets (the 1M recall target was 25 ms before it), and issue 32's: the batch
# paths, and a process serving one small namespace paying for it, not for the store.
TARGETS = {"hybrid_p95_ms_100k": 10.0, "hybrid_p95_ms_1M": 30.0,
           "replay_events_per_s": 200_000.0, "as_of_p95_ms_1M": 20.0,
           "reader_open_recall_s_1M": 1.0, "rss_mib_1M": 600.0,
           "bulk_facts_per_s": 50_000.0, "copy_events_per_s": 50_000.0,
           "small_open_recall_ms": 150.0, "small_rss_mib": 150.0, "small_growth_vs_10k": 1.25,
           "erase_namespace_s_1M": 5.0}


def metrics(s: dict[str, Any]) -> list[tuple[str, float | None, str]]:
    """(name, value, kind) per metric of one size; kind is "rate", "ms", "bytes" or "mib"."""
    lg, rp, tt, rc = s["log"], s["replay"], s["time_travel"], s["recall"]
    lat = rc["latency"]
    rows: list[tuple[str, float | None, str]] = [
        (f"append_many, fsync={p} (events/s)", lg[p]["events_per_s"], "rate") for p in POLICIES
    ]
    rows += [
        ("log bytes per fact, text only", lg["log_bytes_per_fact"], "bytes"),
        ("projection bytes per fact, text only", s["projection_bytes_per_fact"], "bytes"),
        ("log bytes per fact, with 384-d f32 vector", rc.get("bytes_per_fact", {}).get("log"),
         "bytes"),
        ("projection bytes per fact, with vector",
         rc.get("bytes_per_fact", {}).get("projection"), "bytes"),
        ("log open: scan + verify (events/s)", rp["events"] / rp["log_open_s"], "rate"),
        ("log read + decode (events/s)", rp["events"] / rp["log_decode_s"], "rate"),
        ("replay: rebuild_projection (events/s)",
         rp["rebuild_events_per_s"], "rate"),
        ("replay: reopen without the checkpoint (events/s)", rp["reopen_events_per_s"],
         "rate"),
        ("RSS, store open + recall indexes (text only)", tt["rss_mib"], "mib"),
    ]
    if "reader" in s:  # runs from before the reader row have none
        rd = s["reader"]
        rows += [("read-only open from the checkpoint, fresh process (ms)",
                  1000 * rd["open_s"], "ms"),
                 ("... then its first recall (ms)", 1000 * rd["first_recall_s"], "ms"),
                 ("RSS of that reader (text only)", rd["rss_mib"], "mib")]
    if "writer" in s:
        wr = s["writer"]
        rows += [("writer open, fresh process (ms)", 1000 * wr["open_s"], "ms"),
                 ("... then its first recall (ms)", 1000 * wr["first_recall_s"], "ms"),
                 ("RSS of that writer (text only)", wr["rss_mib"], "mib")]
    if "batch" in s:
        b = s["batch"]
        rows += [("remember_many, dedup off (facts/s)", b["bulk_no_dedup"]["facts_per_s"], "rate"),
                 ("remember_many, dedup on (facts/s)", b["bulk"]["facts_per_s"], "rate"),
                 ("hmem copy into a new directory (events/s)", b["copy"]["events_per_s"],
                  "rate"),
                 (f"one {PER_USER}-fact namespace, fresh process: open + first recall (ms)",
                  1000 * b["small_reader"]["open_recall_s"], "ms"),
                 ("... its peak RSS", b["small_reader"]["peak_rss_mib"], "mib"),
                 ("erase of that namespace (ms)", 1000 * b["erase"]["seconds"], "ms")]
        big = b.get("one_namespace")  # runs from before the row have none
        rows += [("one namespace of N facts: remember_many, dedup off (facts/s)",
                  big and big["build_facts_per_s"], "rate"),
                 ("... fresh process, after imports: open + first recall (ms)",
                  big and 1000 * big["open_recall_s"], "ms"),
                 ("... its peak RSS", big and big["peak_rss_mib"], "mib")]
    for key, name in (("as_of_big", f"Memory.as_of, namespace {BIG}"),
                      ("as_of_user", f"Memory.as_of, one {PER_USER}-fact namespace"),
                      ("recall_as_of", f"Memory.recall(as_of), {BIG}, BM25")):
        rows += [(f"{name} p50 (ms)", tt[key]["p50_ms"], "ms"),
                 (f"{name} p95 (ms)", tt[key]["p95_ms"], "ms")]
    via = "Memory" if rc["via"] == "Memory" else "index layer"
    for key, name in (("bm25", "BM25-only"), ("hybrid", "hybrid f32"),
                      ("hybrid_exact", "hybrid f32, exact dense scan"),
                      ("hybrid_int8", "hybrid int8"), ("hybrid_as_of", "hybrid f32, as_of"),
                      ("hybrid_as_of_int8", "hybrid int8, as_of"),
                      ("dense_scan", "dense scan alone, f32"),
                      ("dense_codes", "dense codes + re-rank alone"),
                      ("dense_scan_int8", "dense scan alone, int8"),
                      ("dense_scan_f16", "dense scan alone, f16 blocks")):
        if key not in lat:  # a run from before the row existed
            continue
        rows += [(f"recall 1 ns: {name} p50 (ms)", lat[key]["p50_ms"], "ms"),
                 (f"recall 1 ns: {name} p95 (ms)", lat[key]["p95_ms"], "ms")]
    rows += [(f"recall 1 ns: RSS, index ({via})", rc["rss_mib"], "mib"),
             ("recall 1 ns: hits shared f32 / int8", rc["int8"]["hit_overlap"], "ratio"),
             ("recall 1 ns: hits shared, default / exact dense scan",
              rc.get("codes_hit_overlap"), "ratio")]
    return rows


def fmt_value(v: float | None, kind: str) -> str:
    if v is None:
        return "-"
    if kind == "rate":
        return fmt_rate(v)
    if kind == "ms":
        return fmt_ms(v)
    if kind == "ratio":
        return f"{v:.3f}"
    return f"{v:,.0f}"


def markdown(res: dict[str, Any]) -> str:
    sizes = res["sizes"]
    m = res["machine"]
    head = (
        f"{res['date']}. Machine: {m['cpu']}, {m['cores']} cores, {m['mem_gib']} GiB, "
        f"{m['tmp_fs']}; Python {m['python']}, DuckDB {m['duckdb']}, NumPy {m['numpy']}, "
        f"BLAS threads {res.get('blas_threads') or 'default'}. "
        f"Command: `{res['command']}`. Growth = value at this size / value at the previous "
        "size (10x the facts). Recall rows: one namespace of N facts, built via "
        + ", ".join(f"{s['label']} {s['recall']['via']}" for s in sizes)
        + "; CPU used by other processes while timing recall (cores): "
        + ", ".join(f"{s['label']} {s['recall']['other_load_cores']:.2f}" for s in sizes)
        + "; during the whole size: "
        + ", ".join(f"{s['label']} {s.get('other_load_cores_all', 0):.2f}" for s in sizes)
        + ". CPU/wall of the benchmark process (1.0 = it never waited for a core; DuckDB "
        "threads can push it above 1): "
        + "; ".join(f"{s['label']} " + ", ".join(f"{k} {v['share']:.2f}"
                                                  for k, v in s.get("cpu", {}).items())
                    for s in sizes)
        + ".\n\n"
    )
    cols = []
    for i, s in enumerate(sizes):
        cols.append(s["label"])
        if i:
            cols.append("growth")
    table = ["| metric | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    per_size = [metrics(s) for s in sizes]
    for r, (name, _, kind) in enumerate(per_size[0]):
        cells = []
        for i, rows in enumerate(per_size):
            v = rows[r][1]
            cells.append(fmt_value(v, kind))
            if i:
                prev = per_size[i - 1][r][1]
                cells.append(f"{v / prev:.2f}x" if v and prev else "-")
        table.append(f"| {name} | " + " | ".join(cells) + " |")
    return head + "\n".join(table)


def verdicts(res: dict[str, Any]) -> list[str]:
    out = []

    def check(what: str, value: float, target: float, higher: bool, unit: str) -> None:
        ok = value >= target if higher else value < target
        out.append(f"{what}: {value:,.1f} {unit} vs {'>=' if higher else '<'} {target:,.0f} "
                   f"{unit}: {'ok' if ok else 'MISS'}")

    for s in res["sizes"]:
        lat, label = s["recall"]["latency"], s["label"]
        if s["facts"] in (100_000, 1_000_000):
            key = "hybrid_p95_ms_100k" if s["facts"] == 100_000 else "hybrid_p95_ms_1M"
            for k, name in (("hybrid", "f32"), ("hybrid_int8", "int8")):
                check(f"hybrid recall p95 ({name}, {s['recall']['via']}) at {label}",
                      lat[k]["p95_ms"], TARGETS[key], False, "ms")
        rp = s["replay"]
        check(f"replay (rebuild_projection) at {label}", rp["rebuild_events_per_s"],
              TARGETS["replay_events_per_s"], True, "events/s")
        if "batch" in s:
            _batch_verdicts(s, res["sizes"][0], check)
        if s["facts"] >= 1_000_000:
            check(f"recall as_of p95 (hybrid f32, index layer) at {label}",
                  lat["hybrid_as_of"]["p95_ms"], TARGETS["as_of_p95_ms_1M"], False, "ms")
            tt = s["time_travel"]
            check(f"Memory.recall(as_of) p95 (BM25, {BIG} = N/2) at {label}",
                  tt["recall_as_of"]["p95_ms"], TARGETS["as_of_p95_ms_1M"], False, "ms")
            check(f"Memory.as_of p95, one {PER_USER}-fact namespace, at {label}",
                  tt["as_of_user"]["p95_ms"], TARGETS["as_of_p95_ms_1M"], False, "ms")
            rss = s["writer"]["rss_mib"] if "writer" in s else tt["rss_mib"]
            check(f"RSS, writer open with its recall index, fresh process, at {label}", rss,
                  TARGETS["rss_mib_1M"], False, "MiB")
            if "reader" in s:
                rd = s["reader"]
                check(f"read-only open of {BIG} (N/2 facts) + first recall, fresh process, "
                      f"imports included, at {label}",
                      rd["open_s"] + rd["first_recall_s"], TARGETS["reader_open_recall_s_1M"],
                      False, "s")
    return out


def _batch_verdicts(s: dict[str, Any], first: dict[str, Any], check: Any) -> None:
    b, label = s["batch"], s["label"]
    check(f"remember_many (dedup on) at {label}", b["bulk"]["facts_per_s"],
          TARGETS["bulk_facts_per_s"], True, "facts/s")
    check(f"hmem copy, embedded to embedded, at {label}", b["copy"]["events_per_s"],
          TARGETS["copy_events_per_s"], True, "events/s")
    small = b["small_reader"]
    check(f"one {PER_USER}-fact namespace in a store of {label}: open + first recall",
          1000 * small["open_recall_s"], TARGETS["small_open_recall_ms"], False, "ms")
    check("... its peak RSS", small["peak_rss_mib"], TARGETS["small_rss_mib"], False, "MiB")
    ratios = small.get("vs_reference")  # against a 10k store in this size's own run
    how = "alternating in one run"
    if ratios is None and first is not s and first["facts"] == 10_000 and "batch" in first:
        base = first["batch"]["small_reader"]  # a result saved before there was one
        ratios = {key: small[key] / base[key] for key in ("open_recall_s", "peak_rss_mib")}
        how = "in the 10k size's run"
    for key, what in (("open_recall_s", "open + first recall"), ("peak_rss_mib", "RSS")):
        if ratios is not None:
            check(f"... its {what} over the same at 10k, {how} (x100)",
                  100 * ratios[key], 100 * TARGETS["small_growth_vs_10k"], False, "%")
    if s["facts"] >= 1_000_000:
        check(f"erase of one {PER_USER}-fact namespace at {label}", b["erase"]["seconds"],
              TARGETS["erase_namespace_s_1M"], False, "s")
    if "one_namespace" in b:  # the 1M targets, beside the figure at every size
        big = b["one_namespace"]
        check(f"one namespace of {label} facts, fresh process: open + first recall",
              big["open_recall_s"], TARGETS["reader_open_recall_s_1M"], False, "s")
        check("... its peak RSS", big["peak_rss_mib"], TARGETS["rss_mib_1M"], False, "MiB")


# ---------------------------------------------------------------------------------- cost story

USERS, PER_USER_FACTS = 1_000_000, 200  # the seed's scale story: 200M facts
VECTOR_BYTES = {"float32": 384 * 4, "int8": 384 + 4, "3.5-bit": 168}  # RAM per vector
MACHINE_RAM_GB = 64  # one commodity box; half of it for hmem's hot state (the rest: OS, cache)


def cost_story(res: dict[str, Any]) -> list[str]:
    """The 200M-fact arithmetic from the measured bytes per fact (largest sizes measured)."""
    by_size = sorted(res["sizes"], key=lambda s: s["facts"])
    big = by_size[-1]
    with_vec = [s for s in by_size if s["recall"].get("bytes_per_fact")]
    if not with_vec or len(by_size) < 2:
        return ["(needs two sizes and a Memory-built recall store)"]
    vec = with_vec[-1]["recall"]["bytes_per_fact"]
    log_text = big["log"]["log_bytes_per_fact"]
    proj_text = big["projection_bytes_per_fact"]
    a, b = by_size[-2], by_size[-1]
    ram_fact = (b["time_travel"]["rss_mib"] - a["time_travel"]["rss_mib"]) * 2**20 / (
        b["facts"] - a["facts"])
    rate = big["replay"]["rebuild_events_per_s"]
    n = USERS * PER_USER_FACTS
    events = 2 * n  # a FactRemembered and an EmbeddingRecorded per fact
    gb = 1e9
    disk = n * (vec["log"] + vec["projection"]) / gb
    out = [
        f"Inputs (measured): log {log_text:,.0f} B/fact text only, {vec['log']:,.0f} B/fact "
        f"with a 384-d float32 vector ({with_vec[-1]['label']}); projection {proj_text:,.0f} / "
        f"{vec['projection']:,.0f} B/fact; RAM per fact without vector (RSS slope "
        f"{a['label']} -> {b['label']}, store open) {ram_fact:,.0f} B; replay "
        f"{rate:,.0f} events/s ({big['label']}).",
        f"Facts: {USERS:,} users x {PER_USER_FACTS} = {n / 1e6:,.0f}M; events "
        f"{events / 1e6:,.0f}M.",
        f"Disk (log + projection, vectors stored float32 in both): {n / 1e6:,.0f}M x "
        f"({vec['log']:,.0f} + {vec['projection']:,.0f}) B = {disk:,.0f} GB.",
        f"Replay of everything: {events / 1e6:,.0f}M / {rate:,.0f} per s = "
        f"{events / rate / 3600:,.1f} h (at the 200,000/s target: "
        f"{events / 200_000 / 60:,.0f} min).",
        "",
        "| vectors in RAM | B/vector | RAM, one machine (state + vectors) "
        f"| {MACHINE_RAM_GB} GB machines (half for hmem) | per shard: facts, RAM, replay |",
        "|---|---|---|---|---|",
    ]
    for name, vb in VECTOR_BYTES.items():
        ram = n * (ram_fact + vb) / gb
        machines = max(1, -(-ram // (MACHINE_RAM_GB / 2)))
        per = n / machines
        out.append(
            f"| {name} | {vb} | {n / 1e6:,.0f}M x ({ram_fact:,.0f} + {vb}) B = {ram:,.0f} GB "
            f"| {machines:,.0f} | {per / 1e6:,.1f}M facts, {per * (ram_fact + vb) / gb:,.1f} GB, "
            f"{2 * per / rate / 60:,.0f} min |"
        )
    return out


def report(res: dict[str, Any]) -> None:
    section(f"Summary (total {res.get('total_s', 0):.0f} s)")
    print()
    print(markdown(res))
    print()
    for v in verdicts(res):
        print(f"- {v}")
    print()
    for row in cost_story(res):
        print(row)
    emb = res.get("embed")
    if emb:
        print(f"- query embedding (local MiniLM, not included above): p50 "
              f"{fmt_ms(emb['p50_ms'])} ms, p95 {fmt_ms(emb['p95_ms'])} ms")
    rem = res.get("remember")
    if rem:
        ok = rem["p50_ms"] <= 1.0 and rem["p95_ms"] <= 5.0
        print(f"- remember, local MiniLM in the background, fsync always: p50 "
              f"{fmt_ms(rem['p50_ms'])} ms, p95 {fmt_ms(rem['p95_ms'])} ms vs <= 1 / 5 ms: "
              + ("ok" if ok else "MISS"))
