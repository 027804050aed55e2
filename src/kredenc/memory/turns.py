"""Index cards for conversation turns: what words find a turn by.

A turn alone is often not enough to find it ("Yes, the blue one!"): its card's
context column carries the turns just before it in the same conversation, the
speaker and the session, weighted below the turn's own words (see
``SqliteIndex.lexical``). Only *preceding* turns are used, because a turn is filed
when it happens and records are never rewritten. Its tags name the session, the
speaker and the terms the recall reflex would extract from it (:func:`turn_tags`).

Measured on LoCoMo dev (turn-level recall@10, lexical leg): the turn alone 0.624,
with the 3 preceding turns as context 0.732.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kredenc.checks import check_name
from kredenc.errors import InvalidInput
from kredenc.fields import parse_time
from kredenc.ingest.passages import passage_payloads, write_payloads
from kredenc.retrieve.message_terms import recall_terms

if TYPE_CHECKING:
    from kredenc.storage.store import Store

CONTEXT_TURNS = 3
SESSIONS_KEPT = 1024  # sessions whose last turns a TurnFiler remembers


def turn_context(
    texts: Sequence[str], index: int, *, window: int = CONTEXT_TURNS, header: str = ""
) -> str:
    """The context for ``texts[index]``: ``header`` and up to ``window`` turns before it."""
    before = [t for t in texts[max(0, index - window) : index] if t]
    return " ".join([header, *before]).strip() if header else " ".join(before)


def turn_tags(session_id: str, role: str, text: str) -> list[str]:
    """A turn's tags: ``session:<id>``, ``speaker:<role>`` and the terms the recall
    reflex extracts from the text (stopwords dropped, lightly stemmed, at most 8)."""
    terms = [t.text for t in recall_terms(text)]
    return [f"session:{session_id}", f"speaker:{role}", *dict.fromkeys(terms)]


#: A conversation: its namespace, session id and scope ids (user, agent, run). The
#: context of its turns is its own: a card carries it, so it must not cross a tenant.
Conversation = tuple[str, str, str | None, str | None, str | None]


def conversation(
    ns: str, session_id: str, scope: Mapping[str, str | None] | None = None
) -> Conversation:
    given = scope or {}
    return (ns, session_id, given.get("user_id"), given.get("agent_id"), given.get("run_id"))


class TurnFiler:
    """Files conversation turns as ``turn`` records, remembering the last turns filed
    per conversation (namespace, session and scope; in this process) as context for
    the next ones."""

    def __init__(self) -> None:
        self._recent: dict[Conversation, list[str]] = {}

    def seed(
        self,
        ns: str,
        session_id: str,
        texts: Sequence[str],
        scope: Mapping[str, str | None] | None = None,
    ) -> None:
        """Take ``texts`` (the session's last turns, oldest first, read back from the
        store) as the context of its next turns, unless this filer has filed in the
        session already: so a session continued after a restart keeps its context."""
        key = conversation(ns, session_id, scope)
        if key not in self._recent:
            self._recent[key] = [t for t in texts if t][-CONTEXT_TURNS:]

    def forget_session(self, ns: str, session_id: str) -> None:
        """Drop the turns remembered for ``session_id`` of ``ns`` (any scope): after its
        turns are forgotten, the next turn must not carry them as context."""
        for key in [k for k in self._recent if k[:2] == (ns, session_id)]:
            del self._recent[key]

    def file(
        self,
        store: Store,
        ns: str,
        session_id: str,
        turns: Sequence[Mapping[str, Any]],
        *,
        drawer: str = "turns",
        ids: Sequence[str] | None = None,
        scope: Mapping[str, str | None] | None = None,
    ) -> list[str]:
        """File the turns (``role``, ``content``) of a session as one batch.

        Each turn's card carries the session, the speaker and the turns just before it
        as context, and tags naming the session, the speaker and its terms
        (:func:`turn_tags`). ``scope`` (``user_id``, ``agent_id``, ``run_id``) is filed
        with every turn. Turns without text are skipped. Returns the new ids
        (``ids``: made in advance, one per turn; a skipped turn's is dropped).
        """
        payloads = self.prepare(store, ns, session_id, turns, drawer=drawer, ids=ids, scope=scope)
        if not payloads:
            return []
        write_payloads(store, payloads)
        return [str(p["id"]) for p in payloads]

    def prepare(
        self,
        store: Store,
        ns: str,
        session_id: str,
        turns: Sequence[Mapping[str, Any]],
        *,
        drawer: str = "turns",
        ids: Sequence[str] | None = None,
        scope: Mapping[str, str | None] | None = None,
    ) -> list[dict[str, Any]]:
        """What :meth:`file` writes, as log payloads not yet written (the session's
        context moves on as if they were): for a caller that writes several sessions'
        turns in one batch (``ingest.passages.write_payloads``)."""
        items, kept = self._items(ns, session_id, turns, ids, scope)
        if not items:
            return []
        return passage_payloads(store, ns, items, drawer=drawer, record_type="turn", ids=kept)

    def _items(
        self,
        ns: str,
        session_id: str,
        turns: Sequence[Mapping[str, Any]],
        ids: Sequence[str] | None,
        scope: Mapping[str, str | None] | None,
    ) -> tuple[list[dict[str, Any]], list[str] | None]:
        """The passages of the turns, and the ids of those kept (None: none given)."""
        check_name("session_id", session_id)
        if ids is not None and len(ids) != len(turns):
            raise InvalidInput("ids must be one per turn", "leave ids out to have them made")
        key = conversation(ns, session_id, scope)
        recent = self._recent.pop(key, [])
        self._recent[key] = recent  # most recently used last
        while len(self._recent) > SESSIONS_KEPT:
            del self._recent[next(iter(self._recent))]
        items = []
        kept: list[str] = []
        for n, turn in enumerate(turns):
            role = str(turn.get("role", "user"))
            text = turn.get("content")
            if not isinstance(text, str) or not text.strip():
                continue
            if ids is not None:
                kept.append(ids[n])
            header = f"session {session_id} {role}"
            item: dict[str, Any] = {
                "text": text,
                "context": turn_context([*recent, text], len(recent), header=header),
                "tags": turn_tags(session_id, role, text),
                "meta": {"session": session_id, "role": role, **dict(turn.get("meta") or {})},
                **{k: v for k, v in (scope or {}).items() if v is not None},
            }
            said = parse_time(turn.get("at"), "a turn's 'at'")
            if said is not None:  # when it was said (an imported conversation): its time
                item["ts"] = said
            items.append(item)
            recent.append(text)
            del recent[:-CONTEXT_TURNS]
        return items, kept if ids is not None else None
