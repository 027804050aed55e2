"""The server's lifecycle clock (``server/schedule.py``): with ``scheduler`` on, a job with
a tiny interval runs on its own and ``GET /jobs`` shows its last run, in every served
namespace; off, none runs; requests are answered while a scheduled job runs; a
shutdown while one runs does not wait for it past ``STOP_WAIT_S``; a read-only server
never schedules."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from kredenc.engine import Kredenc
from kredenc.interfaces.auth import KeyRing
from kredenc.interfaces.server import schedule
from kredenc.interfaces.server.run import ServerThread
from kredenc.interfaces.server.state import ServerConfig
from kredenc.memory import scheduler
from kredenc.memory.lifecycle import JobReport
from kredenc.testing.embedders import HashEmbedder

FAST = {"scheduler_intervals": {"decay": 0.3}, "scheduler_throttle_s": 0.05}
ON = ServerConfig(mcp=False, web=False, scheduler=True)


def _client(url: str, key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=url, timeout=30, headers=headers)


def _jobs(client: httpx.Client) -> dict[str, dict[str, Any]]:
    return {j["name"]: j for j in client.get("/jobs").json()["items"]}


def _wait_runs(client: httpx.Client, job: str, runs: int, timeout_s: float = 30) -> list[float]:
    """The distinct last-run times seen for ``job`` until there are ``runs`` of them."""
    seen: list[float] = []
    deadline = time.monotonic() + timeout_s
    while len(seen) < runs and time.monotonic() < deadline:
        last = _jobs(client)[job]["last_run"]
        if last is not None and last not in seen:
            seen.append(last)
        time.sleep(0.05)
    return seen


def test_a_scheduled_job_runs_by_itself_and_shows_its_last_run(tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none", **FAST) as kb:
        kb.remember("the kettle is in the second cupboard")
        keys = KeyRing(kb.home)
        mine, team = keys.add(kb.namespace)[0], keys.add("team")[0]
        with ServerThread(kb, ON) as url, _client(url, mine) as own, _client(url, team) as other:
            jobs = _jobs(own)
            assert jobs["decay"]["interval_s"] == 0.3 and jobs["episodes"]["interval_s"] == 600
            seen = _wait_runs(own, "decay", 3)
            assert len(seen) == 3, seen  # it came round again, every 0.3 s
            result = _jobs(own)["decay"]["last_result"]
            assert result["job"] == "decay" and result["examined"] >= 1
            # The key's namespace has a scheduler of its own.
            assert _wait_runs(other, "decay", 1), "no scheduled run in the key's namespace"


def test_with_the_scheduler_off_nothing_runs_by_itself(tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none", **FAST) as kb:
        config = ServerConfig(mcp=False, web=False)  # a server made in code: off
        with ServerThread(kb, config) as url, _client(url) as client:
            time.sleep(1.0)
            assert all(j["last_run"] is None for j in _jobs(client).values())


def test_requests_are_answered_while_a_job_runs_and_shutdown_does_not_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = threading.Event(), threading.Event()

    def stuck(store: Any, ns: str, *, now: float | None = None) -> JobReport:
        started.set()
        release.wait(60)
        return JobReport("decay").done()

    monkeypatch.setitem(scheduler.JOBS, "decay", stuck)
    monkeypatch.setattr(schedule, "STOP_WAIT_S", 0.5)
    kb = Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none", **FAST)
    try:
        server = ServerThread(kb, ON)
        with server as url:
            assert started.wait(30), "the scheduled job did not start"
            t0 = time.monotonic()
            health = httpx.get(url + "/health", timeout=10)
            stats = httpx.get(url + "/stats", timeout=10)
            assert health.status_code == stats.status_code == 200
            assert time.monotonic() - t0 < 5  # not held up by the running job
            t0 = time.monotonic()
        stopped_in = time.monotonic() - t0
        assert server._thread is not None and not server._thread.is_alive()
        assert stopped_in < 10, stopped_in  # the stuck job was not waited for
        assert not release.is_set()
    finally:
        release.set()
        kb.close()


def test_a_read_only_server_never_schedules(tmp_path: Path) -> None:
    home = tmp_path / "s"
    Kredenc.open(home, embedder=HashEmbedder(), durability="none").close()
    kb = Kredenc.open(home, embedder=HashEmbedder(), read_only=True, **FAST)
    with kb, ServerThread(kb, ON) as url, _client(url) as client:
        assert kb.read_only
        time.sleep(0.5)
        assert all(j["last_run"] is None for j in _jobs(client).values())
