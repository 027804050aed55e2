"""The scheduler: only due jobs run, an idle tick touches nothing, failures are contained."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, StoreError
from kredenc.memory.lifecycle import JobReport
from kredenc.memory.scheduler import JOBS, Scheduler, default_jobs, job_intervals, run_jobs
from kredenc.storage.locks import LocalLock


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Untouchable:
    """A store stand-in that fails on any use but its job locks (a due job runs
    holding one, in the process here): proves an idle tick does no I/O."""

    read_only = False

    def lock(self, name: str) -> LocalLock:
        return LocalLock(f"test-scheduler:{id(self)}:{name}")

    def claim(self, name: str, ttl_s: float, *, ns: str = "") -> float:
        return 0.0  # one scheduler on this stand-in: every period is its own

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the scheduler touched the store ({name})")


class FailureClassifier(Untouchable):
    """Untouchable but for the index's error classes, which the scheduler reads to
    tell a backend's query error (a warning) from a bug (a traceback)."""

    index = SimpleNamespace(errors=(LookupError,))


class Counting:
    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0
        self.ran = threading.Event()

    def __call__(self, store: Any, ns: str) -> JobReport:
        self.calls += 1
        self.ran.set()
        return JobReport(self.name).done()


def test_only_due_jobs_run_and_idle_ticks_do_nothing() -> None:
    clock = FakeClock()
    fast, slow = Counting("fast"), Counting("slow")
    sched = Scheduler(Untouchable(), "ns", {"fast": (10, fast), "slow": (60, slow)}, clock=clock)  # type: ignore[arg-type]
    assert sched.tick() == ["fast", "slow"]  # both are due at start
    for step in (1, 5, 9.9):
        clock.t = 1000 + step
        assert sched.tick() == []
    clock.t = 1010
    assert sched.tick() == ["fast"]
    clock.t = 1061
    assert sched.tick() == ["fast", "slow"]
    assert (fast.calls, slow.calls) == (3, 2)
    assert sched.seconds_until_due() == pytest.approx(10)
    assert set(sched.last_reports) == {"fast", "slow"}


def test_initial_delay() -> None:
    clock = FakeClock()
    job = Counting("j")
    sched = Scheduler(Untouchable(), "ns", {"j": (10, job)}, clock=clock, initial_delay_s=30)  # type: ignore[arg-type]
    assert sched.tick() == []
    clock.t += 30
    assert sched.tick() == ["j"]


def test_a_failing_job_is_logged_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    good = Counting("good")
    attempts = {"n": 0}

    def broken(store: Any, ns: str) -> JobReport:
        attempts["n"] += 1
        raise StoreError("disk is full", "free some space")

    def buggy(store: Any, ns: str) -> JobReport:
        raise RuntimeError("a bug")

    jobs = {"broken": (5, broken), "buggy": (5, buggy), "good": (5, good)}
    sched = Scheduler(FailureClassifier(), "ns", jobs, clock=clock)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="kredenc.memory.scheduler"):
        assert sched.tick() == ["broken", "buggy", "good"]
    assert good.calls == 1
    warning = next(r for r in caplog.records if r.levelno == logging.WARNING)
    assert "broken" in warning.getMessage() and "disk is full" in warning.getMessage()
    assert any(r.levelno == logging.ERROR and r.exc_info for r in caplog.records)
    clock.t += 5
    sched.tick()
    assert attempts["n"] == 2 and good.calls == 2
    assert sched.failures == {"broken": 2, "buggy": 2, "good": 0}


def test_background_thread_starts_and_stops() -> None:
    job = Counting("j")
    with Scheduler(Untouchable(), "ns", {"j": (3600, job)}) as sched:  # type: ignore[arg-type]
        sched.start(throttle_s=0.01)
        assert job.ran.wait(5)
    assert sched._thread is None and job.calls == 1


def test_bad_intervals_and_throttle() -> None:
    with pytest.raises(InvalidInput):
        Scheduler(Untouchable(), "ns", {"j": (0, Counting("j"))})  # type: ignore[arg-type]
    sched = Scheduler(Untouchable(), "ns", {"j": (1, Counting("j"))})  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        sched.start(throttle_s=0)


def test_default_jobs_on_a_real_store(kb: Kredenc) -> None:
    jobs = default_jobs({"decay": 60})
    assert list(jobs) == list(JOBS) and jobs["decay"][0] == 60
    for text in ("one note", "two notes", "three notes"):
        kb.remember(text)
    clock = FakeClock()
    sched = Scheduler(kb.store, kb.namespace, jobs, clock=clock)
    assert sched.tick() == list(JOBS)
    assert sched.failures == dict.fromkeys(JOBS, 0)
    assert sched.last_reports["episodes"].changed == 3
    assert sched.last_reports["reflect"].changed == 1  # episodes ran first
    clock.t += 59
    assert sched.tick() == []


def test_run_jobs_by_name(kb: Kredenc) -> None:
    assert [r.job for r in run_jobs(kb.store, kb.namespace)] == [
        "episodes",
        "contradictions",
        "reflect",
        "decay",
    ]
    assert [r.job for r in run_jobs(kb.store, kb.namespace, ["decay", "episodes"])] == [
        "episodes",
        "decay",
    ]
    with pytest.raises(InvalidInput, match="unknown job"):
        run_jobs(kb.store, kb.namespace, ["sleep"])


def test_a_backend_query_error_is_a_warning_not_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def querying(store: Any, ns: str) -> JobReport:
        raise LookupError("database is locked")  # the stand-in index's own error class

    sched = Scheduler(FailureClassifier(), "ns", {"q": (5, querying)}, clock=FakeClock())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="kredenc.memory.scheduler"):
        sched.tick()
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert "database is locked" in record.getMessage()
    assert sched.failures["q"] == 1


class Lockless(Untouchable):
    """Untouchable, its locks too: a scheduler whose jobs take their own lock."""

    def lock(self, name: str) -> LocalLock:
        raise AssertionError(f"the scheduler took the lock {name}")


def test_a_scheduler_whose_jobs_lock_themselves_only_claims() -> None:
    job = Counting("job")
    sched = Scheduler(Lockless(), "ns", {"job": (10, job)}, locked=False)  # type: ignore[arg-type]
    assert sched.tick() == ["job"] and job.calls == 1


def test_a_read_only_store_never_schedules(open_store: Any) -> None:
    open_store().close()
    with open_store(read_only=True) as kb, pytest.raises(InvalidInput, match="read-only"):
        Scheduler(kb.store, kb.namespace)


def test_intervals_override_the_defaults_and_unknown_jobs_are_refused() -> None:
    assert job_intervals({"decay": 5})["decay"] == 5
    assert job_intervals()["episodes"] == 600
    with pytest.raises(InvalidInput, match="nope"):
        job_intervals({"nope": 1})


def test_stop_says_whether_a_running_job_let_it_stop_in_time() -> None:
    release = threading.Event()
    started = threading.Event()

    def slow(store: Any, ns: str) -> JobReport:
        started.set()
        release.wait(30)
        return JobReport("slow").done()

    sched = Scheduler(Untouchable(), "ns", {"slow": (60, slow)})  # type: ignore[arg-type]
    sched.start(throttle_s=0.01)
    assert started.wait(10) and sched.running
    assert sched.stop(timeout=0.2) is False  # still running: not waited for past the timeout
    release.set()
