"""Sessions' hot history in Redis: each session's last messages, so that several server
processes read a session without a store query.

The truth stays in the store (a session's messages are its ``turn`` records:
``loop/sessions.py``); this is a copy of the last ``depth`` of them, kept correct by
a version per session:

- ``<prefix>session:<store>:<session hash>:v`` is the session's version (a counter),
  ``...:h`` the copy, JSON ``{"v": version, "n": depth, "complete": bool, "messages"}``.
  A copy is used only when its ``v`` is the version read with it (one MGET).
- A writer that filed or forgot a session's turns bumps the version *after* the write
  is applied to the index (:meth:`SessionCache.invalidate`), so no copy read before
  it is used again.
- A reader that missed reads the store and puts its copy back only if the version is
  still the one it read before the store (a Lua compare-and-set): a copy made from a
  read that raced with a filing is never stored.
- Every key has a TTL (``session_cache_ttl_s``), renewed on use: idle sessions vanish.
  The version key is renewed with every copy, so it never expires before its copy.
- Redis down: reads go to the store (one WARNING, one INFO when it is back:
  :class:`~kredenc.storage.outage.Outage`); invalidations that could not be sent are
  kept and sent before this process uses the cache again. A process that dies with
  unsent invalidations leaves copies that the TTL ends (docs/redis.md says so).
- A rebuild or purge deletes every copy of the store and bumps every version
  (:meth:`SessionCache.clear`); so does Redis coming back when more than
  :data:`PENDING_MAX` invalidations were owed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kredenc.config import Settings
from kredenc.errors import MissingExtra
from kredenc.storage.outage import Outage
from kredenc.storage.redis_client import glob_escape, redacted, shared_client, shared_id

log = logging.getLogger(__name__)

RETRY_S = 5.0
CLEAR_BATCH = 500
#: The most unsent invalidations kept while Redis is down; past it every copy of the
#: store is deleted when Redis answers again.
PENDING_MAX = 10_000

# KEYS: version, copy. ARGV: the version the reader saw before its store read, the
# copy's JSON, the TTL. Stores the copy only if the version is unchanged.
_PUT_IF_SAME = """
local now = redis.call('GET', KEYS[1]) or '0'
if now ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return 1
"""

Messages = list[dict[str, str]]

__all__ = ["SessionCache", "for_store", "touched"]


class SessionCache:
    """One store's sessions in Redis (thread-safe)."""

    def __init__(
        self,
        url: str,
        *,
        store: str,
        prefix: str = "kredenc:",
        ttl_s: int = 86400,
        depth: int = 20,
        client: Any = None,
    ) -> None:
        self.where = redacted(url)
        self.ttl_s = ttl_s
        self.depth = max(1, depth)
        self._base = f"{prefix}session:{store}:"
        self._client = client if client is not None else shared_client(url)
        self._put = self._client.register_script(_PUT_IF_SAME)
        self._outage = Outage(
            f"Redis at {self.where}",
            what="session history",
            then="sessions are read from the store",
            log=log,
            retry_s=RETRY_S,
        )
        self._lock = threading.Lock()
        self._pending: set[tuple[str, str]] = set()
        self._overflow = False

    def _keys(self, ns: str, session: str) -> tuple[str, str]:
        part = hashlib.sha256(f"{ns}\0{session}".encode()).hexdigest()[:32]
        return f"{self._base}{part}:v", f"{self._base}{part}:h"

    # -- reading ----------------------------------------------------------------
    def get(self, ns: str, session: str, limit: int) -> tuple[Messages | None, str | None]:
        """(the last ``limit`` messages, oldest first, or None on a miss; the version
        token to hand :meth:`put` after reading the store, None when Redis is not used)."""
        if not self._ready():
            return None, None
        ver, hist = self._keys(ns, session)
        try:
            version, raw = self._client.mget(ver, hist)
        except Exception as exc:  # noqa: BLE001 - redis-py raises RedisError and OSError
            self._outage.failed(exc)
            return None, None
        self._outage.up()
        token = "0" if version is None else bytes(version).decode()
        if raw is None:
            return None, token
        try:
            copy = json.loads(bytes(raw).decode("utf-8"))
            fresh = str(copy["v"]) == token
            enough = limit <= int(copy["n"]) or bool(copy["complete"])
            messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in copy["m"]]
        except (ValueError, KeyError, TypeError):
            log.warning("%s: an unreadable session copy is a miss", self.where)
            return None, token
        if not (fresh and enough):
            return None, token
        return (messages[-limit:] if limit > 0 else []), token

    def put(self, ns: str, session: str, token: str, messages: Messages, *, complete: bool) -> None:
        """Keep ``messages`` (the session's last ones, oldest first, as the store gave
        them after :meth:`get` returned ``token``) unless the session changed since."""
        if not self._ready():
            return
        ver, hist = self._keys(ns, session)
        kept = messages[-self.depth :]
        body = json.dumps(
            {"v": token, "n": self.depth, "complete": complete and len(kept) == len(messages),
             "m": kept},
            ensure_ascii=False,
            separators=(",", ":"),
        )  # fmt: skip
        try:
            self._put(keys=[ver, hist], args=[token, body, max(1, self.ttl_s)])
        except Exception as exc:  # noqa: BLE001 - see get
            self._outage.failed(exc)
            return
        self._outage.up()

    # -- writing ----------------------------------------------------------------
    def invalidate(self, sessions: Iterable[tuple[str, str]]) -> None:
        """The turns of these (namespace, session) pairs changed (call it after the
        write is applied): no copy made before is used again."""
        with self._lock:
            for pair in sessions:
                if len(self._pending) >= PENDING_MAX:
                    self._overflow = True
                    break
                self._pending.add(pair)
        self._ready()

    def clear(self) -> None:
        """Delete every copy of this store (a rebuild or a purge)."""
        with self._lock:
            self._pending.clear()
            self._overflow = True
        self._ready()

    def _ready(self) -> bool:
        """Whether Redis may be used now: it answers, and the invalidations this process
        owes are sent (a copy they concern must not be read first)."""
        if not self._outage.usable():
            return False
        with self._lock:
            pending, self._pending = self._pending, set()
            overflow, self._overflow = self._overflow, False
        if not pending and not overflow:
            return True
        try:
            if overflow:
                self._delete_all()
            else:
                pipe = self._client.pipeline(transaction=False)
                for ns, session in pending:
                    ver, hist = self._keys(ns, session)
                    pipe.incr(ver)
                    pipe.expire(ver, max(1, self.ttl_s))
                    pipe.unlink(hist)
                pipe.execute()
        except Exception as exc:  # noqa: BLE001 - see get
            with self._lock:
                self._pending |= pending
                self._overflow = self._overflow or overflow
            self._outage.failed(exc)
            return False
        self._outage.up()
        return True

    def _delete_all(self) -> None:
        # Copies go; versions are bumped, never deleted: a version that went back to
        # '0' would let a reader that read '0' before the change store its stale copy.
        found = list(self._client.scan_iter(match=glob_escape(self._base) + "*", count=CLEAR_BATCH))
        for start in range(0, len(found), CLEAR_BATCH):
            pipe = self._client.pipeline(transaction=False)
            for name in found[start : start + CLEAR_BATCH]:
                if bytes(name).endswith(b":v"):
                    pipe.incr(name)
                    pipe.expire(name, max(1, self.ttl_s))
                else:
                    pipe.unlink(name)
            pipe.execute()


def for_store(settings: Settings, log_id: str, home: Path) -> SessionCache | None:
    """The store's session cache (``redis_url`` set and ``session_cache_ttl_s`` > 0),
    or None (with one WARNING when redis-py is missing)."""
    url = settings.redis_url.get_secret_value()
    if not url or settings.session_cache_ttl_s <= 0:
        return None
    try:
        return SessionCache(
            url,
            store=shared_id(log_id, home, backend=settings.backend),
            prefix=settings.redis_prefix,
            ttl_s=settings.session_cache_ttl_s,
            depth=settings.ask_session_turns,
        )
    except MissingExtra:
        log.warning(
            "redis_url is set but redis-py is not installed; sessions are read from the "
            "store (pip install 'kredenc[redis]')"
        )
        return None


def touched(
    payloads: Iterable[dict[str, Any]], lookup: Callable[[str, str], dict[str, Any] | None]
) -> set[tuple[str, str]]:
    """The (namespace, session) pairs whose messages ``payloads`` (just written) change:
    each turn put, and each tombstone of a turn (``lookup(ns, id)`` gives the forgotten
    record's payload, or None; it is asked only for tombstones)."""
    out: set[tuple[str, str]] = set()
    for p in payloads:
        op, ns = p.get("op"), str(p.get("ns", ""))
        if op == "put":
            found: dict[str, Any] | None = p
        elif op == "tombstone":
            found = lookup(ns, str(p.get("id", "")))
        else:
            continue
        if found is None or found.get("type") != "turn":
            continue
        session = (found.get("meta") or {}).get("session")
        if isinstance(session, str):
            out.add((ns, session))
    return out
