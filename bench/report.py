"""What the benchmarks share to measure and print: latency summaries and timers, CPU used by
other processes, RSS, the machine, and the number formats and lines of their reports."""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

import duckdb
import msgspec
import numpy as np

__all__ = [
    "OtherLoad", "child_json", "cpu_seconds", "fmt_ms", "fmt_rate", "lat_summary", "line",
    "machine_info", "ms", "parse_size", "pct",
    "peak_rss_mib", "rss_mib", "section", "size_label", "store_bytes", "time_calls",
    "timed",
]

# ---------------------------------------------------------------------------------- measuring


def ms(seconds: float) -> float:
    return seconds * 1000.0


def pct(samples: Sequence[float], *qs: float) -> list[float]:
    arr = np.asarray(samples, dtype=np.float64)
    return [float(np.percentile(arr, q)) for q in qs]


def lat_summary(samples_s: Sequence[float]) -> dict[str, float]:
    """Latency summary in milliseconds."""
    p50, p95, p99 = pct([ms(s) for s in samples_s], 50, 95, 99)
    return {
        "n": len(samples_s),
        "p50_ms": p50,
        "p95_ms": p95,
        "p99_ms": p99,
        "max_ms": ms(max(samples_s)),
        "mean_ms": ms(statistics.fmean(samples_s)),
    }


def timed(fn: Callable[[], Any], samples: list[float]) -> Any:
    t0 = time.perf_counter()
    result = fn()
    samples.append(time.perf_counter() - t0)
    return result


def time_calls(fn: Callable[[Any], Any], args: list[Any], warm: int) -> list[float]:
    for a in args[:warm]:
        fn(a)
    samples = []
    pc = time.perf_counter
    for a in args[warm:]:
        t0 = pc()
        fn(a)
        samples.append(pc() - t0)
    return samples


def rss_mib() -> float:
    """Resident set size of this process now (Linux), MiB; 0 if unknown."""
    return _status_mib("VmRSS")


def peak_rss_mib() -> float:
    """This process's peak resident set size (Linux VmHWM), MiB; 0 if unknown. Not
    ``ru_maxrss``: Linux carries that over exec, so a child started by a large parent reports
    the parent's peak."""
    return _status_mib("VmHWM")


def _status_mib(field: str) -> float:
    try:
        for raw in Path("/proc/self/status").read_text().splitlines():
            if raw.startswith(f"{field}:"):
                return int(raw.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def child_json(code: str, args: list[str], mark: str) -> dict[str, Any]:
    """Run ``code`` in a fresh Python process (this checkout importable) with ``args`` and
    return the JSON object it printed after ``mark`` (stdout may hold progress output too)."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    found = re.search(rf"{mark} (\{{.*\}})", done.stdout)
    if found is None:
        raise RuntimeError(f"the child printed no result: {done.stdout[-500:]!r}")
    out: dict[str, Any] = json.loads(found.group(1))
    return out


def store_bytes(root: Path, n_facts: int) -> dict[str, float]:
    """Log and derived-state (checkpoint) bytes per fact of the closed store at ``root``."""
    log = sum(f.stat().st_size for f in (root / "log").rglob("*") if f.is_file())
    proj = sum(f.stat().st_size for f in root.glob("checkpoint.columns"))
    return {"log": log / n_facts, "projection": proj / n_facts}


class OtherLoad:
    """CPU time used by other processes while a block runs (Linux /proc/stat), so that numbers
    taken on a shared machine say so."""

    def __enter__(self) -> Self:
        self.t0, self.busy0, self.own0 = time.perf_counter(), _busy(), cpu_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self.t0
        other = (_busy() - self.busy0) - (cpu_seconds() - self.own0)
        self.cores = max(0.0, other / wall) if wall > 0 else 0.0


def _busy() -> float:
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]
    except OSError:
        return 0.0
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def cpu_seconds() -> float:
    """CPU seconds (user + system, all threads) this process has used so far."""
    t = os.times()
    return t.user + t.system


def machine_info(tmp: Path) -> dict[str, Any]:
    cpu = "unknown"
    try:
        for raw in Path("/proc/cpuinfo").read_text().splitlines():
            if raw.lower().startswith("model name"):
                cpu = raw.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for raw in Path("/proc/meminfo").read_text().splitlines():
            if raw.startswith("MemTotal:"):
                mem_gib = round(int(raw.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    fs = "unknown"
    try:
        best = ""
        for raw in Path("/proc/mounts").read_text().splitlines():
            parts = raw.split()
            mnt, kind = parts[1], parts[2]
            if str(tmp).startswith(mnt) and len(mnt) > len(best):
                best, fs = mnt, f"{kind} ({mnt})"
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "mem_gib": mem_gib,
        "tmp_fs": fs,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "numpy": np.__version__,
        "msgspec": msgspec.__version__,
    }


# ---------------------------------------------------------------------------------- printing


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def fmt_ms(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.3f}"


def size_label(n: int) -> str:
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def parse_size(text: str) -> int:
    """'10k', '1M', '2.5k', '100_000' -> a number of facts."""
    t = text.strip().lower().replace("_", "")
    mult = 1
    if t.endswith("k"):
        t, mult = t[:-1], 1_000
    elif t.endswith("m"):
        t, mult = t[:-1], 1_000_000
    return int(float(t) * mult)


def section(title: str) -> None:
    print(f"\n== {title}", flush=True)


def line(label: str, value: str) -> None:
    print(f"  {label:<58} {value}", flush=True)
