"""The lock seam: in-process locks, and Redis locks (the real Redis on loopback, a key
prefix per test) held by another process: refused while it holds them, freed after
their TTL when it is killed, renewed while held, released only by their holder; the
lifecycle jobs and the rebuild take them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import StoreError, StoreLocked
from kredenc.memory.scheduler import Scheduler, default_jobs, run_jobs
from kredenc.storage.locks import LocalLock, RedisLock, claim, held, lock_for
from kredenc.testing.redis import closed_port_url

OpenStore = Callable[..., Kredenc]

HOLDER = textwrap.dedent(
    """
    import sys
    from kredenc.storage.locks import RedisLock
    lock = RedisLock(sys.argv[1], sys.argv[2], ttl_s=float(sys.argv[3]))
    assert lock.acquire(5.0)
    print("held", flush=True)
    sys.stdin.read()  # hold until the test closes stdin (or kills this process)
    lock.release()
    """
)


class Holder:
    """Another process holding a Redis lock."""

    def __init__(self, url: str, name: str, ttl_s: float = 30.0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, url, name, str(ttl_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "held"

    def let_go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(30) == 0
        self._close()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)
        self._close()

    def _close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


def test_local_locks_exclude_within_the_process_and_only_the_holder_releases() -> None:
    a, b = LocalLock("t:one"), LocalLock("t:one")
    assert a.acquire() and not b.acquire()
    b.release()  # not the holder: nothing happens
    assert not b.acquire(wait=0.05)
    a.release()
    assert b.acquire()
    b.release()
    assert isinstance(lock_for("", "t:x"), LocalLock)
    with (
        held(a, "the thing"),
        pytest.raises(StoreLocked, match="the thing is running"),
        held(b, "the thing"),
    ):
        pass


@pytest.mark.integration
def test_a_lock_another_process_holds_is_refused_until_it_lets_go(
    redis_url: str, redis_prefix: str
) -> None:
    name = redis_prefix + "lock"
    holder = Holder(redis_url, name)
    mine = RedisLock(redis_url, name)
    try:
        assert not mine.acquire()
        assert not mine.acquire(wait=0.3)
        mine.release()  # not the holder: the other process keeps it
        assert mine.holder() is not None
    finally:
        holder.let_go()
    assert mine.acquire(wait=1.0)
    mine.release()
    assert mine.holder() is None


@pytest.mark.integration
def test_a_killed_holders_lock_frees_itself_after_its_ttl(
    redis_url: str, redis_prefix: str
) -> None:
    name = redis_prefix + "lock"
    holder = Holder(redis_url, name, ttl_s=1.0)
    mine = RedisLock(redis_url, name)
    time.sleep(1.5)  # past one TTL: the holder's renewals keep it
    assert not mine.acquire()
    holder.kill()
    started = time.monotonic()
    assert mine.acquire(wait=5.0)
    assert time.monotonic() - started <= 1.5
    mine.release()


@pytest.mark.integration
def test_a_lock_is_released_only_with_its_token(redis_url: str, redis_prefix: str) -> None:
    a = RedisLock(redis_url, redis_prefix + "lock", ttl_s=5)
    assert a.acquire()
    token = a.token
    b = RedisLock(redis_url, redis_prefix + "lock", ttl_s=5)
    b.token = "not-the-holders"
    b.release()
    assert a.holder() == token
    a.release()
    assert a.holder() is None


def test_a_redis_that_does_not_answer_is_no_lock() -> None:
    lock = RedisLock(closed_port_url(), "k")
    with pytest.raises(StoreError, match="does not answer"):
        lock.acquire()


@pytest.mark.integration
def test_jobs_and_the_rebuild_refuse_while_another_process_holds_their_lock(
    open_store: OpenStore, redis_url: str, redis_prefix: str
) -> None:
    with open_store(redis_url=redis_url, redis_prefix=redis_prefix) as kb:
        kb.remember("The user drinks green tea.")
        job = kb.store.lock("job:default:decay").name
        holder = Holder(redis_url, job)
        try:
            with pytest.raises(StoreLocked, match="lifecycle job decay"):
                run_jobs(kb.store, "default", ["decay"])
            assert [r.job for r in run_jobs(kb.store, "default", ["episodes"])] == ["episodes"]
            jobs = {k: v for k, v in default_jobs().items() if k in ("decay", "episodes")}
            scheduler = Scheduler(kb.store, "default", jobs)
            assert scheduler.tick() == ["episodes", "decay"]
            assert "decay" not in scheduler.last_reports and scheduler.failures["decay"] == 0
            assert "episodes" in scheduler.last_reports
        finally:
            holder.let_go()
        assert [r.job for r in run_jobs(kb.store, "default", ["decay"])] == ["decay"]
        holder = Holder(redis_url, kb.store.lock("rebuild").name)
        try:
            with pytest.raises(StoreLocked, match="a rebuild of this store"):
                kb.rebuild()
        finally:
            holder.let_go()
        assert kb.rebuild()["records"] == 1


def test_a_local_claim_is_the_first_callers_until_its_ttl_ends() -> None:
    name = f"t:claim:{time.monotonic_ns()}"
    assert claim("", name, 0.2) == 0.0
    left = claim("", name, 0.2)
    assert 0.0 < left <= 0.2
    time.sleep(left + 0.01)
    assert claim("", name, 0.2) == 0.0


@pytest.mark.integration
def test_a_redis_claim_is_seen_by_another_process_and_ends_with_its_ttl(
    redis_url: str, redis_prefix: str
) -> None:
    name = redis_prefix + "claim"
    taker = "import sys; from kredenc.storage.locks import claim; print(claim(*sys.argv[1:3], 1.0))"
    took = subprocess.run(
        [sys.executable, "-c", taker, redis_url, name], capture_output=True, text=True, check=True
    )
    assert float(took.stdout) == 0.0
    left = claim(redis_url, name, 1.0)
    assert 0.0 < left <= 1.0  # the other process's claim, with what it has left
    time.sleep(left + 0.05)
    assert claim(redis_url, name, 1.0) == 0.0
    assert 0.0 < claim(redis_url, name, 1.0) <= 1.0


def test_a_claim_in_a_redis_that_does_not_answer_says_so() -> None:
    with pytest.raises(StoreError, match=r"claim 'k'.*does not answer"):
        claim(closed_port_url(), "k", 1.0)
