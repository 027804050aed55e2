"""Sessions of the answer loop: a session's messages are its turns in the store.

Each ask in a session files the question and the answer as two ``turn`` records
through the facade's turn filing (:class:`~kredenc.memory.turns.TurnFiler`), so
memory and recall see them like any other conversation; the history the loop reads
is the last ``ask_session_turns`` (20) of them, read back from the index
(``Index.session_turns``) and the log. So a session survives restarts, and sessions
are apart by id and namespace.

With ``redis_url`` set, a session's last messages are also kept hot in Redis
(``storage/redis_sessions.py``, ``Store.session_cache``), so several server processes
read a session without a store query; the store's writes invalidate the copy (a
turn filed or forgotten), and when Redis is down history comes from the store.

:func:`clear` forgets every turn of the session (a tombstone each, as ``forget``
does): the history is empty afterwards, and the turns are gone from search and
recall too. Their text stays in the log until ``kredenc compact --purge``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kredenc.checks import check_name
from kredenc.memory import writes
from kredenc.memory.turns import TurnFiler
from kredenc.records import random_hex

if TYPE_CHECKING:
    from kredenc.loop.answer import Answer
    from kredenc.storage.store import Store

#: Where the loop files its turns (the drawer ``file_turns`` uses too).
DRAWER = "turns"
#: Turns forgotten per round of :func:`clear`.
_CLEAR_BATCH = 500


def check_session(session_id: object) -> str:
    return check_name("session id", session_id)


def one_off_session() -> str:
    """A session id for an ask without one: its turns are filed, never read back."""
    return f"ask-{random_hex(6)}"


def history(store: Store, ns: str, session_id: str, limit: int = 20) -> list[dict[str, str]]:
    """The session's last ``limit`` messages, oldest first: ``{"role", "content"}``."""
    check_session(session_id)
    cache = store.session_cache()
    if cache is None:
        return _from_store(store, ns, session_id, limit)
    found, token = cache.get(ns, session_id, limit)
    if found is not None:
        return found
    depth = max(limit, cache.depth)
    messages = _from_store(store, ns, session_id, depth)
    if token is not None:
        cache.put(ns, session_id, token, messages, complete=len(messages) < depth)
    return messages[-limit:] if limit > 0 else []


def _from_store(store: Store, ns: str, session_id: str, limit: int) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for _rid, offset in reversed(store.index.session_turns(ns, session_id, limit)):
        payload = store.haystack.read(offset)
        meta = payload.get("meta") or {}
        role = "assistant" if meta.get("role") == "assistant" else "user"
        out.append({"role": role, "content": str(payload.get("text") or "")})
    return out


def turns_of(question: str, answer: Answer) -> list[dict[str, Any]]:
    """The question and the answer as the two turns :func:`record` files (an answer
    without text is no turn)."""
    meta: dict[str, Any] = {"source": "ask", "agent": str(answer.meta.get("agent", ""))}
    if answer.evaluation is not None:
        meta["confidence"] = answer.evaluation.confidence_score
    if answer.citations:
        meta["cites"] = [c.id for c in answer.citations][:20]
    turns = [{"role": "user", "content": question, "meta": {"source": "ask"}}]
    if answer.text.strip():
        turns.append({"role": "assistant", "content": answer.text, "meta": meta})
    return turns


def record(
    filer: TurnFiler, store: Store, ns: str, session_id: str, question: str, answer: Answer
) -> list[str]:
    """File the question and the answer as the session's next two turns; their ids."""
    return filer.file(store, ns, session_id, turns_of(question, answer), drawer=DRAWER)


def clear(store: Store, ns: str, session_id: str, filer: TurnFiler | None = None) -> int:
    """Forget every turn of the session (tombstones); how many were forgotten."""
    check_session(session_id)
    store.check_writable()
    forgotten = 0
    while True:
        turns = store.index.session_turns(ns, session_id, _CLEAR_BATCH)
        if not turns:
            break
        for rid, _ in turns:
            writes.forget(store, ns, rid)
            forgotten += 1
    if filer is not None:
        filer.forget_session(ns, session_id)
    return forgotten


__all__ = ["DRAWER", "check_session", "clear", "history", "one_off_session", "record"]
