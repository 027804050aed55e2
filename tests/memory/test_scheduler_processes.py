"""The scheduler across processes: several servers and workers on one PostgreSQL store,
each running a scheduler, run a job once per period (the store's Redis lock and period
claim, or without Redis the claim in PostgreSQL's ``claims``), and a holder killed
mid-run holds no claim past its TTL: the next period runs.

Real processes (``SCHEDULER`` below) on the PostgreSQL of ``kredenc.testing.postgres``
and the Redis on loopback (a key prefix per test)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.memory.lifecycle import JobReport
from kredenc.memory.scheduler import Scheduler
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.redis import key_prefix, redis_url_or_skip

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

#: A process with a scheduler of one job, ``tick``, every INTERVAL seconds, for SECONDS
#: from the line "go" on its stdin: each run appends "pid time" to RUNS; with HANG 1 a
#: run never ends (to be killed).
SCHEDULER = textwrap.dedent(
    """
    import os, sys, time
    from kredenc.engine import Kredenc
    from kredenc.memory.lifecycle import JobReport
    from kredenc.memory.scheduler import Scheduler
    from kredenc.testing.embedders import HashEmbedder

    home, runs, interval, seconds, hang = sys.argv[1:6]

    def tick(store, ns):
        with open(runs, "a") as out:
            out.write(f"{os.getpid()} {time.time()}\\n")
        if hang == "1":
            print("running", flush=True)
            time.sleep(3600)
        return JobReport("tick").done()

    with Kredenc.open(home, embedder=HashEmbedder()) as kb:
        scheduler = Scheduler(kb.store, "default", {"tick": (float(interval), tick)})
        print("ready", flush=True)
        sys.stdin.readline()
        scheduler.start(throttle_s=0.02)
        time.sleep(float(seconds))
        scheduler.stop()
    """
)


@pytest.fixture(params=["redis", "postgres"])
def settings(postgres_dsn: str, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """The store on PostgreSQL; the claims in Redis, or (no Redis) in the database."""
    pg = {
        "backend": "postgres",
        "postgres_dsn": postgres_dsn,
        "postgres_schema": "t_sched_" + uuid.uuid4().hex[:12],
        "durability": "none",
    }
    if request.param == "postgres":
        yield pg
        return
    url = redis_url_or_skip()
    with key_prefix(url) as prefix:
        yield {**pg, "redis_url": url, "redis_prefix": prefix, "lock_ttl_s": 1.0}


def _start(
    settings: dict[str, Any], home: Path, runs: Path, interval: float, seconds: float, hang: str
) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KREDENC_")}
    env.update({f"KREDENC_{k.upper()}": str(v) for k, v in settings.items()})
    proc = subprocess.Popen(
        [sys.executable, "-c", SCHEDULER, str(home), str(runs), str(interval), str(seconds), hang],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    return proc


def _ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"


def _go(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


def _runs(path: Path) -> list[tuple[int, float]]:
    if not path.exists():
        return []
    rows = [line.split() for line in path.read_text().splitlines()]
    return sorted(((int(pid), float(at)) for pid, at in rows), key=lambda r: r[1])


def test_two_processes_run_a_scheduled_job_once_per_period(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    Kredenc.open(tmp_path / "made", embedder=HashEmbedder(), **settings).close()
    runs = tmp_path / "runs.txt"
    interval, seconds = 1.0, 5.0
    procs = [_start(settings, tmp_path / f"p{n}", runs, interval, seconds, "0") for n in (0, 1)]
    for proc in procs:
        _ready(proc)
    for proc in procs:  # both schedulers start together, for the same 5 s
        _go(proc)
    for proc in procs:
        proc.communicate(timeout=60)
        assert proc.returncode == 0
    found = _runs(runs)
    times = [at for _, at in found]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # Each process alone runs it about every second: together, without the period's
    # claim, ~10 runs with gaps near 0. Once per period: ~5, at least an interval apart.
    assert 4 <= len(found) <= 7, found
    assert min(gaps) >= interval * 0.97, gaps


def test_a_holder_killed_mid_run_frees_the_job_for_the_next_period(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    runs = tmp_path / "runs.txt"
    interval = 2.0
    with Kredenc.open(tmp_path / "mine", embedder=HashEmbedder(), **settings) as kb:
        holder = _start(settings, tmp_path / "holder", runs, interval, 60, "1")
        _ready(holder)
        _go(holder)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "running"
        mine: list[float] = []

        def tick(store: Any, ns: str) -> JobReport:
            mine.append(time.time())
            return JobReport("tick").done()

        scheduler = Scheduler(kb.store, "default", {"tick": (interval, tick)})
        assert scheduler.tick() == ["tick"] and mine == []  # the holder has it: skipped
        holder.kill()
        holder.communicate(timeout=30)
        [(_, started)] = _runs(runs)
        deadline = time.monotonic() + 10
        while not mine and time.monotonic() < deadline:
            scheduler.tick()
            time.sleep(0.02)
        # The dead holder's lock (TTL 1 s; in-process without Redis: it died with it) and
        # its period's claim (2 s) ran out: the next period ran here, once, and no sooner
        # than a period after the killed run began.
        assert len(mine) == 1 and mine[0] - started >= interval * 0.97, (mine, started)
        assert scheduler.failures == {"tick": 0}
