"""Many agents on one memory: N real stdio MCP clients (each its own ``hmem mcp`` server, as the
README's one-line config starts it) on one store at once, each remembering and recalling.

Usage::

    python -m bench.shared_clients                  # 1, 4 and 8 clients, 50 rounds each
    python -m bench.shared_clients --clients 1 4 --rounds 100

Each client runs ``rounds`` rounds of one ``remember`` and one ``recall`` (of a word the write
just stored), timed one call each on the client's side; all clients start together. Prints the
total writes per second (all clients' writes over the wall time) and recall p50 / p95 per client
count, against 1 client alone. Needs the ``mcp`` extra. Prints numbers; never asserts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.report import lat_summary, line, section

REPO = Path(__file__).resolve().parents[1]


async def client(store: Path, name: str, rounds: int, start: anyio.Event,
                 out: dict[str, Any]) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "hmem", "mcp", "--path", str(store)],
        env={"HMEM_EMBEDDER": "none"}, cwd=str(REPO),
    )
    writes: list[float] = []
    reads: list[float] = []
    with open(store.parent / f"{name}.err", "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                out["ready"] += 1
                await start.wait()
                for i in range(rounds):
                    t0 = time.perf_counter()
                    r = await session.call_tool(
                        "remember", {"subject": name, "text": f"{name} note w{i}x{name}"})
                    writes.append(time.perf_counter() - t0)
                    assert not r.is_error, r
                    t0 = time.perf_counter()
                    r = await session.call_tool("recall", {"query": f"w{i}x{name}"})
                    reads.append(time.perf_counter() - t0)
                    assert not r.is_error, r
    out["writes"] += writes
    out["reads"] += reads


async def run(n: int, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {"ready": 0, "writes": [], "reads": []}
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        start = anyio.Event()
        async with anyio.create_task_group() as tg:
            for k in range(n):
                tg.start_soon(client, store, f"c{k}", rounds, start, out)
            while out["ready"] < n:
                await anyio.sleep(0.01)
            t0 = time.perf_counter()
            start.set()
        wall = time.perf_counter() - t0
    return {"clients": n, "wall_s": wall, "writes_per_s": n * rounds / wall,
            "remember": lat_summary(out["writes"]), "recall": lat_summary(out["reads"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--rounds", type=int, default=50)
    args = ap.parse_args()
    results = [anyio.run(run, n, args.rounds) for n in args.clients]
    section(f"Shared store: N stdio MCP clients, {args.rounds} rounds of remember + recall each")
    base = results[0]
    for r in results:
        rem, rec = r["remember"], r["recall"]
        line(f"{r['clients']} client(s): writes/s (all), x vs {base['clients']}",
             f"{r['writes_per_s']:.0f} ({r['writes_per_s'] / base['writes_per_s']:.2f}x)")
        line(f"{r['clients']} client(s): remember p50 / p95",
             f"{rem['p50_ms']:.1f} / {rem['p95_ms']:.1f} ms")
        line(f"{r['clients']} client(s): recall p50 / p95",
             f"{rec['p50_ms']:.1f} / {rec['p95_ms']:.1f} ms")


if __name__ == "__main__":
    main()
