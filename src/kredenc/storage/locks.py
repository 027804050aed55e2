"""The lock seam: one named lock where several workers need one (a lifecycle job must
not run twice at once, nor a rebuild), local or in Redis, chosen by ``redis_url``.

- :class:`LocalLock`: a ``threading.Lock`` per name in this process (two handles of
  one store in one process share it). Enough for one process; on the file backend
  the store's writer lock already keeps a second process from writing.
- :class:`RedisLock`: ``SET name token NX PX ttl``; the token is 128 random bits and
  only its holder releases (a Lua compare-and-delete) or renews it (compare-and-
  ``PEXPIRE``, every third of ``lock_ttl_s`` on a daemon thread while it is held).
  A holder that dies stops renewing, and the lock frees itself after ``lock_ttl_s``.
  A Redis that does not answer is :class:`~kredenc.errors.StoreError`: exclusion that
  cannot be checked is not assumed.

:meth:`Lock.held` raises :class:`~kredenc.errors.StoreLocked` when another holder
has it (after waiting ``wait`` seconds), naming what it protects.

A lock keeps two runs apart; :func:`claim` keeps a period to one run: the first caller
claims a name for ``ttl_s`` seconds (``SET NX PX`` in Redis, else in this process) and
every other caller is told how long the claim has left. Nobody releases a claim: it
ends with its TTL, so a claimant killed mid-run holds the period it had and no more.
The scheduler takes both (``memory/scheduler.py``): the lock for the run, the claim
for the period.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from kredenc.errors import StoreError, StoreLocked
from kredenc.storage.redis_client import redacted, shared_client

POLL_S = 0.05

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
_CLAIM = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
local left = redis.call('PTTL', KEYS[1])
if left < 1 then return 1 end
return left
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

__all__ = ["LocalLock", "Lock", "RedisLock", "claim", "held", "lock_for"]


class Lock(Protocol):
    name: str

    def acquire(self, wait: float = 0.0) -> bool:
        """Take the lock, waiting up to ``wait`` seconds; whether it was taken."""
        ...

    def release(self) -> None:
        """Let go (only the holder's release does anything)."""
        ...


@contextmanager
def held(lock: Lock, what: str, *, wait: float = 0.0) -> Iterator[None]:
    """Hold ``lock`` for the block; :class:`StoreLocked` naming ``what`` if another
    holder has it after ``wait`` seconds."""
    if not lock.acquire(wait):
        raise StoreLocked(
            f"{what} is running elsewhere (lock {lock.name!r} is held)",
            "wait for it to finish and try again",
        )
    try:
        yield
    finally:
        lock.release()


_LOCAL: dict[str, threading.Lock] = {}
_LOCAL_GUARD = threading.Lock()


class LocalLock:
    """A process-wide ``threading.Lock`` by name."""

    def __init__(self, name: str) -> None:
        self.name = name
        with _LOCAL_GUARD:
            self._lock = _LOCAL.setdefault(name, threading.Lock())
        self._mine = False

    def acquire(self, wait: float = 0.0) -> bool:
        got = self._lock.acquire(timeout=wait) if wait > 0 else self._lock.acquire(False)
        self._mine = got
        return got

    def release(self) -> None:
        if self._mine:
            self._mine = False
            self._lock.release()


class RedisLock:
    """A Redis lock with a token and a TTL, renewed while held, released by its holder."""

    def __init__(self, url: str, name: str, *, ttl_s: float = 30.0, client: Any = None) -> None:
        self.name = name
        self.where = redacted(url)
        self.ttl_ms = max(1, int(ttl_s * 1000))
        self.token: str | None = None
        self._client = client if client is not None else shared_client(url)
        self._release = self._client.register_script(_RELEASE)
        self._renew = self._client.register_script(_RENEW)
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def acquire(self, wait: float = 0.0) -> bool:
        token = secrets.token_hex(16)
        deadline = time.monotonic() + wait
        while True:
            if self._call(self._client.set, self.name, token, nx=True, px=self.ttl_ms):
                self.token = token
                self._stop.clear()
                self._renewer = threading.Thread(
                    target=self._keep, args=(token,), name=f"lock {self.name}", daemon=True
                )
                self._renewer.start()
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)

    def release(self) -> None:
        token, self.token = self.token, None
        if token is None:
            return
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        self._call(self._release, keys=[self.name], args=[token])

    def holder(self) -> str | None:
        """The token holding the lock now (None: free)."""
        raw = self._call(self._client.get, self.name)
        return None if raw is None else bytes(raw).decode()

    def _keep(self, token: str) -> None:
        while not self._stop.wait(self.ttl_ms / 3000):
            try:
                if not self._renew(keys=[self.name], args=[token, self.ttl_ms]):
                    return  # no longer ours (it expired and another took it)
            except Exception:  # noqa: BLE001 - a missed renewal; the next one may land
                continue

    def _call(self, fn: Any, *args: Any, **kw: Any) -> Any:
        return _redis_call(f"lock {self.name!r}", self.where, fn, *args, **kw)


def _redis_call(what: str, where: str, fn: Any, *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except Exception as exc:  # noqa: BLE001 - redis-py raises RedisError and OSError
        raise StoreError(
            f"{what}: Redis at {where} does not answer "
            f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]})",
            "start Redis (redis_url), or unset redis_url to use in-process locks",
        ) from None


_CLAIMS: dict[str, float] = {}  # name -> when its claim ends (time.monotonic)


def claim(url: str, name: str, ttl_s: float, *, client: Any = None) -> float:
    """Claim ``name`` for ``ttl_s`` seconds: ``0.0`` when this call took it, else the
    seconds the current claim has left (then it may be claimed again). In Redis when
    ``url`` is set (every process sharing it sees the claim), else in this process."""
    ttl_ms = max(1, int(ttl_s * 1000))
    if not url:
        now = time.monotonic()
        with _LOCAL_GUARD:
            ends = _CLAIMS.get(name, 0.0)
            if ends > now:
                return ends - now
            _CLAIMS[name] = now + ttl_ms / 1000
            return 0.0
    redis = client if client is not None else shared_client(url)
    script = redis.register_script(_CLAIM)
    where = redacted(url)
    left = _redis_call(f"claim {name!r}", where, script, keys=[name], args=["1", ttl_ms])
    return int(left) / 1000


def lock_for(url: str, name: str, *, ttl_s: float = 30.0) -> Lock:
    """A :class:`RedisLock` named ``name`` when ``url`` is set, else a :class:`LocalLock`."""
    return RedisLock(url, name, ttl_s=ttl_s) if url else LocalLock(name)
