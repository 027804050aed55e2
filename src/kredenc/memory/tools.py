"""Memory tools for agents: plain functions with typed arguments that return text.

Each takes the open :class:`~kredenc.storage.store.Store` and the namespace ``ns``
first, positional only (the caller binds them); the agent supplies the rest.

Each returns one message for the agent and never raises for a bad call: an
invalid argument, an unknown id or relation, a read-only memory all come back as
``error: <what was wrong> (<what to do>)``. Only kredenc's own errors and bad
argument values are turned into messages; anything else is a bug and propagates.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any, ParamSpec

from kredenc.errors import InvalidInput, KredencError
from kredenc.memory import writes
from kredenc.memory.reflect import run_reflect
from kredenc.retrieve.query import search

if TYPE_CHECKING:
    from kredenc.storage.store import Store

__all__ = ["memory_reflect", "memory_relate", "memory_score", "memory_search"]

P = ParamSpec("P")


def _as_message(fn: Callable[P, str]) -> Callable[P, str]:
    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> str:
        try:
            return fn(*args, **kwargs)
        except KredencError as exc:
            return f"error: {exc}"
        except (ValueError, TypeError) as exc:
            return f"error: {exc}"

    return wrapper


def _need_text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{what} must be non-empty text, not {value!r}")
    return value


def _flat(text: str, width: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@_as_message
def memory_search(store: Store, ns: str, /, query: str, k: int = 5) -> str:
    """Search memories by words and meaning; one line per memory, best first."""
    _need_text(query, "query")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 50:
        raise InvalidInput(f"k must be a whole number from 1 to 50, not {k!r}")
    hits = search(store, ns, query, k=k, types=("memory",))
    if not hits:
        return f"no memories match {query!r}"
    lines = [f"{len(hits)} memories for {query!r}:"]
    for n, hit in enumerate(hits, 1):
        found = store.index.lookup(ns, hit.id)
        state = found.state if found is not None else {}
        status = state.get("status", "unvalidated")
        extra = "" if status == "unvalidated" else f", {status}"
        importance = float(state.get("importance", 0.5))
        lines.append(f"{n}. [{hit.id}] ({hit.kind}, importance {importance:.2f}{extra}) ")
        lines[-1] += _flat(hit.text)
    return "\n".join(lines)


@_as_message
def memory_relate(
    store: Store,
    ns: str,
    /,
    src: str,
    dst: str,
    rel: str,
    weight: float = 1.0,
    remove: bool = False,
) -> str:
    """Relate two memories with a typed edge (supports, contradicts, depends_on, …)."""
    for value, what in ((src, "src"), (dst, "dst"), (rel, "rel")):
        _need_text(value, what)
    writes.relate(store, ns, src, dst, rel, weight=weight, remove=remove)
    if remove:
        return f"removed {src} -[{rel}]-> {dst}"
    return f"related {src} -[{rel} {float(weight):g}]-> {dst}"


@_as_message
def memory_score(
    store: Store,
    ns: str,
    /,
    id: str,
    importance: float | None = None,
    confidence: float | None = None,
    stability: float | None = None,
    status: str | None = None,
    task_status: str | None = None,
    valid_from: str | float | None = None,
    valid_to: str | float | None = None,
    reason: str | None = None,
    **unknown: Any,
) -> str:
    """Change a memory's scores or state; only the fields given change."""
    _need_text(id, "id")
    if unknown:
        names = ", ".join(sorted(unknown))
        raise InvalidInput(
            f"unknown field(s): {names}",
            "use importance, confidence, stability, status, task_status, valid_from, valid_to",
        )
    given = {
        "importance": importance,
        "confidence": confidence,
        "stability": stability,
        "status": status,
        "task_status": task_status,
        "valid_from": valid_from,
        "valid_to": valid_to,
    }
    fields = {k: v for k, v in given.items() if v is not None}
    if reason is not None and not isinstance(reason, str):
        raise InvalidInput("reason must be text")
    mem = writes.score(store, ns, id, reason=reason or None, **fields)
    changed = ", ".join(f"{k} {getattr(mem, k)}" for k in fields)
    return f"{mem.id}: {changed}"


@_as_message
def memory_reflect(store: Store, ns: str, /, episode_id: str | None = None) -> str:
    """Summarise an episode (or every episode that needs it) into a concept memory."""
    if episode_id is not None:
        _need_text(episode_id, "episode_id")
    report = run_reflect(store, ns, episode_id=episode_id)
    if not report.details:
        scope = f"episode {episode_id}" if episode_id else f"{report.examined} episode(s)"
        return f"nothing to reflect: {scope} already up to date"
    parts = []
    for d in report.details:
        note = f" (supersedes {', '.join(d['superseded'])})" if d["superseded"] else ""
        parts.append(f"{d['episode_id']} -> {d['id']} from {d['sources']} memories{note}")
    return "reflected " + "; ".join(parts)
