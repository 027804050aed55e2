"""Small helpers every benchmark shares: time things, print a table, write JSON results."""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0-100) of ``values``, linear between ranks."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    rank = (len(ordered) - 1) * pct / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def now() -> float:
    return time.perf_counter()


def _status_mb(key: str) -> float | None:
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return None


def peak_rss_mb() -> float:
    """High-water mark of this process's resident memory, MiB: ``VmHWM``, which starts
    again at exec. Not ``ru_maxrss``: Linux carries it across exec, so a process that a
    5 GB parent started reported the parent's 5 GB (seen in bench_capacity)."""
    peak = _status_mb("VmHWM")
    if peak is None:  # not Linux: ru_maxrss (KiB on Linux, bytes on macOS; close enough)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return peak


def rss_mb() -> float:
    """This process's resident memory now, MiB (``VmRSS`` of /proc/self/status)."""
    now = _status_mb("VmRSS")
    return float("nan") if now is None else now


def machine() -> dict[str, Any]:
    """Where a result was measured."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def print_table(title: str, rows: Sequence[dict[str, Any]]) -> None:
    """Print ``rows`` (dicts with the same keys) as an aligned text table."""
    print(f"\n{title}")
    if not rows:
        print("  (no rows)")
        return
    columns = list(rows[0])
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    print("  " + "  ".join("-" * w for w in widths))
    for r in cells:
        print("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))


def write_results(name: str, results: dict[str, Any]) -> Path:
    """Write ``results`` plus :func:`machine` and the command to ``results/NAME.json``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        "benchmark": name,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": machine(),
        **results,
    }
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {path}")
    return path


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return "" if value is None else str(value)
