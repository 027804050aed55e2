"""Reflection: an episode condensed into one ``concept`` memory.

For each episode with at least ``min_members`` live memories, a
:class:`~kredenc.memory.detectors.Summariser` (the configured LLM's,
:mod:`kredenc.memory.llm_summary`, else extractive with no model; neither merges
contradicting memories)
writes a summary of at most ``max_chars`` characters; it is filed as a ``concept``
memory (importance 0.8, stability 0.9, source ``reflection``, the episode's id)
with a ``derived_from`` edge to each source memory.

At most one live reflection per episode: reflecting again deprecates the previous
one (a ``score`` record with the reason) in the same atomic batch that files the
new one, so a crash cannot leave two. An episode whose reflection already derives
from exactly its current members is left alone (unless ``force``). When a source is
forgotten, ``forget`` marks the reflection ``disputed``; the next run supersedes it.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from kredenc.errors import InvalidInput, NotFound
from kredenc.memory.detectors import Summariser
from kredenc.memory.lifecycle import JobReport, MemoryRow, live_memories, score_payload
from kredenc.memory.llm_summary import LLMSummariser, summariser_for
from kredenc.memory.relations import edge_payloads
from kredenc.memory.writes import memory_payload
from kredenc.records import now as wall_clock

if TYPE_CHECKING:
    from kredenc.storage.store import Store

MIN_MEMBERS = 3
MAX_CHARS = 400
REFLECTION_FIELDS: dict[str, Any] = {
    "importance": 0.8,
    "stability": 0.9,
    "source": "reflection",
}


def _members(store: Store, ns: str, episode_id: str | None) -> dict[str, list[MemoryRow]]:
    out: dict[str, list[MemoryRow]] = {}
    rows = live_memories(
        store,
        ns,
        in_episode=True,
        not_status="deprecated",
        reflections=False,
        episode_id=episode_id,
    )
    for row in rows:
        assert row.episode_id is not None
        out.setdefault(row.episode_id, []).append(row)
    return out


def _live_reflections(store: Store, ns: str, episode_id: str) -> list[MemoryRow]:
    return live_memories(
        store, ns, reflections=True, episode_id=episode_id, not_status="deprecated"
    )


def reflect_episode(
    store: Store,
    ns: str,
    episode_id: str,
    members: list[MemoryRow],
    *,
    summariser: Summariser,
    max_chars: int = MAX_CHARS,
    force: bool = False,
) -> dict[str, Any] | None:
    """File (or refresh) the reflection of one episode; None when it is up to date."""
    previous = _live_reflections(store, ns, episode_id)
    sources = {m.id for m in members}
    if (
        not force
        and len(previous) == 1
        and previous[0].status != "disputed"
        and store.index.targets_of(ns, previous[0].id, "derived_from") == sources
    ):
        return None
    texts = [str(store.haystack.read(m.offset).get("text", "")) for m in members]
    summary = summariser.summarise(texts, max_chars=max_chars).strip()
    if not summary:
        return None
    drawer = Counter(m.drawer for m in members).most_common(1)[0][0]
    payload = memory_payload(
        store,
        ns,
        summary,
        "concept",
        drawer,
        ["reflection"],
        {"episode_id": episode_id, "sources": len(members)},
        {**REFLECTION_FIELDS, "episode_id": episode_id},
        strict=True,
    )
    ts = wall_clock()
    batch: list[dict[str, Any]] = [payload]
    for member in members:
        edges = edge_payloads(ns, payload["id"], member.id, "derived_from", 1.0, ts)
        batch.extend({**e, "by": "reflect"} for e in edges)
    for old in previous:
        if not old.read_only:
            batch.append(
                score_payload(
                    ns,
                    old.id,
                    {"status": "deprecated"},
                    reason=f"superseded by {payload['id']}",
                    by="reflect",
                )
            )
    store.write(batch, batch=True)
    return {
        "episode_id": episode_id,
        "id": payload["id"],
        "sources": len(members),
        "superseded": [old.id for old in previous],
        "records": len(batch),
        "text": summary,
    }


def run_reflect(
    store: Store,
    ns: str,
    *,
    now: float | None = None,
    episode_id: str | None = None,
    summariser: Summariser | None = None,
    min_members: int = MIN_MEMBERS,
    max_chars: int = MAX_CHARS,
    force: bool = False,
) -> JobReport:
    """Reflect every episode (or one, ``episode_id``) that needs it.

    ``now`` is accepted for a uniform job signature; the records carry wall time.
    Naming an episode that does not exist, or that has too few live memories, is an
    error; over all episodes, such episodes are simply skipped.
    """
    if min_members < 1 or max_chars < 40:
        raise InvalidInput("min_members must be at least 1 and max_chars at least 40")
    summarise = summariser or summariser_for(store.settings)
    try:
        return _reflect_all(store, ns, episode_id, summarise, min_members, max_chars, force)
    finally:
        if summariser is None and isinstance(summarise, LLMSummariser):
            summarise.close()  # an LLM this run made


def _reflect_all(
    store: Store,
    ns: str,
    episode_id: str | None,
    summarise: Summariser,
    min_members: int,
    max_chars: int,
    force: bool,
) -> JobReport:
    report = JobReport("reflect")
    episodes = _members(store, ns, episode_id)
    if episode_id is not None:
        count = len(episodes.get(episode_id, []))
        if count == 0:
            raise NotFound(f"no episode {episode_id!r} with live memories")
        if count < min_members:
            raise InvalidInput(
                f"episode {episode_id!r} has {count} live memories;"
                f" a reflection needs at least {min_members}"
            )
    for eid in sorted(episodes):
        members = episodes[eid]
        if len(members) < min_members:
            continue
        report.examined += 1
        done = reflect_episode(
            store, ns, eid, members, summariser=summarise, max_chars=max_chars, force=force
        )
        if done is not None:
            report.changed += 1
            report.records += int(done["records"])
            report.note(done)
    return report.done()
