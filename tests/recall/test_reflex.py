"""The recall reflex on a real store: where the block goes, what it holds, what is
eligible, and how the budget bounds it."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.recall import Budget, RecallResult, recall
from kredenc.recall.budget import MARKER, estimate_tokens
from kredenc.recall.conversation import SESSIONS, conversation_id, new_turns
from kredenc.retrieve.message_terms import recall_terms
from kredenc.storage.index.filters import Filters

from .blocks import parse

HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a helpful assistant. Be brief."},
    {"role": "user", "content": "Hi! Könnyű kérdés: mi újság? 👋"},
    {"role": "assistant", "content": "Hello, all good.", "name": "bot"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What tea do I like in the morning?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    },
]


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_one_system_message_appended_and_the_prefix_is_byte_identical(
    kb: Kredenc, session: str
) -> None:
    kb.remember("The user likes jasmine green tea in the morning.", kind="preference")
    before = json.dumps(HISTORY, ensure_ascii=False)
    result = recall(kb.store, kb.namespace, HISTORY, session_id=session)
    assert result.injected
    assert len(result.messages) == len(HISTORY) + 1
    assert json.dumps(result.messages[:-1], ensure_ascii=False) == before
    assert json.dumps(HISTORY, ensure_ascii=False) == before  # the input is not touched
    assert all(a is b for a, b in zip(result.messages, HISTORY, strict=False))
    tail = result.messages[-1]
    assert tail == {"role": "system", "content": result.block}
    systems = [i for i, m in enumerate(result.messages) if m["role"] == "system"]
    assert systems == [0, len(HISTORY)]  # the original system prompt and the tail only
    (item,) = parse(result.block)
    assert item["memory"] == "preference"
    assert item["text"] == "The user likes jasmine green tea in the morning."


def test_items_say_what_and_why(kb: Kredenc, session: str) -> None:
    tea = kb.remember("The user drinks jasmine tea every morning.", kind="preference")
    kb.remember("Deploys happen on Tuesdays after the standup.", kind="fact")
    kb.file_turns("earlier", [{"role": "user", "content": "I brewed jasmine tea for my guests."}])
    result = recall(
        kb.store, kb.namespace, ask("which jasmine tea do I drink?"), session_id=session
    )
    assert [i.n for i in result.items] == list(range(1, len(result.items) + 1))
    first = next(i for i in result.items if i.id == tea.id)
    assert (first.type, first.kind) == ("memory", "preference")
    assert set(first.legs) == {"lexical", "dense"}
    assert all(v.rank >= 1 for v in first.legs.values())
    assert first.score > 0
    assert first.line in result.block.split("\n")
    turn = next(i for i in result.items if i.type == "turn")
    assert turn.kind == "user"
    assert json.loads(turn.line) == {
        "n": turn.n,
        "turn": "user",
        "session": "s1",  # a label local to the block: the first session it shows
        "filed": time.strftime("%Y-%m-%d", time.gmtime(turn.created_at)),
        "text": "I brewed jasmine tea for my guests.",
    }
    assert [i["text"] for i in parse(result.block)] == [i.text for i in result.items]
    assert all(i.id not in result.block for i in result.items)
    assert "Deploys" not in result.block  # shares no word and no meaning
    assert result.terms == ["jasmine", "tea", "drink"]
    data = result.to_dict()
    assert data["items"][0]["legs"]["lexical"]["rank"] >= 1
    assert data["chars"] == len(result.block)
    json.dumps(data)


def test_only_records_filed_before_the_session_began(kb: Kredenc, session: str) -> None:
    old = kb.remember("The project codename is Heron.", kind="fact")
    first = recall(
        kb.store, kb.namespace, ask("what is the codename of the project?"), session_id=session
    )
    assert [i.id for i in first.items] == [old.id]
    # Filed during the session: neither the new memory nor the session's own turns.
    kb.remember("The project codename changed to Kestrel.", kind="fact")
    kb.file_turns(session, [{"role": "user", "content": "The project codename is Heron?"}])
    again = recall(
        kb.store, kb.namespace, ask("what is the codename of the project?"), session_id=session
    )
    assert [i.id for i in again.items] == [old.id]
    # A later session sees both memories; the turn that restates the first is a near
    # copy of it and is collapsed.
    later = recall(
        kb.store,
        kb.namespace,
        ask("what is the codename of the project?"),
        session_id=session + "-b",
    )
    assert len(later.items) == 2
    assert {i.type for i in later.items} == {"memory"}


def test_the_sessions_own_turns_are_never_recalled(kb: Kredenc, session: str) -> None:
    kb.file_turns(session, [{"role": "user", "content": "My locker code is 4417."}])
    kb.file_turns("other", [{"role": "user", "content": "The gym locker code was 9912."}])
    # Even when the caller says the session began after its turns were filed.
    result = recall(
        kb.store,
        kb.namespace,
        ask("what is my locker code?"),
        session_id=session,
        session_start=time.time() + 60,
    )
    assert [i.text for i in result.items] == ["The gym locker code was 9912."]


def test_session_start_registry(session: str) -> None:
    first = SESSIONS.start(session)
    assert SESSIONS.start(session) == first
    assert SESSIONS.start(session, at=123.0) == 123.0
    assert SESSIONS.start(session) == 123.0
    SESSIONS.forget(session)
    assert SESSIONS.start(session) > 123.0


def test_budget_limits_items(kb: Kredenc, session: str) -> None:
    cities = ("Lisbon", "Porto", "Braga", "Faro", "Evora", "Tomar", "Sintra", "Obidos", "Viseu")
    for city in cities:
        kb.remember(f"The user travelled by train to {city} in spring.", kind="event")
    result = recall(kb.store, kb.namespace, ask("train travel in spring"), session_id=session)
    assert len(result.items) == 8  # the default (short texts: the item count binds)
    two = recall(
        kb.store,
        kb.namespace,
        ask("train travel in spring"),
        session_id=session,
        budget=Budget(items=2),
    )
    assert len(two.items) == 2
    none = recall(
        kb.store,
        kb.namespace,
        ask("train travel in spring"),
        session_id=session,
        budget={"items": 0},
    )
    assert none.items == [] and not none.injected
    assert none.messages == ask("train travel in spring")


def long_text(topic: str, n: int = 300) -> str:
    # Each topic its own detail words: texts sharing them would be near copies.
    return f"{topic} " + " ".join(f"{topic.rsplit(maxsplit=1)[-1]}detail{i}" for i in range(n))


def check_cut(text: str, original: str) -> None:
    assert text.endswith(MARKER)
    kept = text[: -len(MARKER)]
    assert original.startswith(kept)
    assert original[len(kept)] == " "  # cut between words


def test_budget_cuts_each_item_and_the_whole_on_word_boundaries(kb: Kredenc, session: str) -> None:
    texts = [long_text(f"Orchard note {k}") for k in ("alpha", "beta", "gamma")]
    for t in texts:
        kb.remember(t, kind="note")
    result = recall(kb.store, kb.namespace, ask("orchard note"), session_id=session)
    assert len(result.items) == 3
    assert len(result.block) <= 1800
    for item in result.items:
        assert len(item.line) <= 600
        assert item.truncated
        assert json.loads(item.line)["text"] == item.text
        check_cut(item.text, next(t for t in texts if t.startswith(item.text[:18])))
    assert len(parse(result.block)) == 3
    small = recall(
        kb.store,
        kb.namespace,
        ask("orchard note"),
        session_id=session,
        budget=Budget(item_chars=300, total_chars=700),
    )
    assert len(small.block) <= 700
    assert all(len(i.line) <= 300 for i in small.items)
    assert len(small.items) == 2  # a third would keep under 40 characters
    assert len(parse(small.block)) == 2


def test_budget_in_tokens(kb: Kredenc, session: str) -> None:
    kb.remember(long_text("Orchard plan"), kind="note")
    kb.remember(long_text("Orchard budget"), kind="note")
    result = recall(
        kb.store,
        kb.namespace,
        ask("orchard plan and budget"),
        session_id=session,
        budget=Budget.in_tokens(items=3, item_tokens=60, total_tokens=200),
    )
    assert len(result.items) == 2  # (the envelope takes about 62 of the 200 tokens)
    assert estimate_tokens(result.block) <= 200
    assert all(estimate_tokens(i.line) <= 60 and i.truncated for i in result.items)


def test_relations_between_recalled_memories_are_shown(kb: Kredenc, session: str) -> None:
    tea = kb.remember("The user prefers green tea in the morning.", kind="preference")
    coffee = kb.remember("The user drinks black coffee in the morning.", kind="preference")
    other = kb.remember("The user once tried yerba mate.", kind="note")
    kb.relate(coffee.id, tea.id, "contradicts")
    kb.relate(coffee.id, other.id, "related_to")  # not recalled: not shown
    result = recall(
        kb.store, kb.namespace, ask("tea or coffee in the morning?"), session_id=session
    )
    by_id = {i.id: i for i in result.items}
    assert set(by_id) >= {tea.id, coffee.id}
    n_tea = by_id[tea.id].n
    assert by_id[coffee.id].relations == (f"contradicts #{n_tea}",)
    assert json.loads(by_id[coffee.id].line)["relations"] == [f"contradicts #{n_tea}"]
    assert "relations" not in json.loads(by_id[tea.id].line)
    assert by_id[tea.id].relations == ()
    if other.id not in by_id:
        assert "related_to" not in result.block


def test_hungarian_message_finds_inflected_words(kb: Kredenc, session: str) -> None:
    kb.file_turns("old", [{"role": "user", "content": "Tavaly Budapesten laktunk egy kis házban."}])
    result = recall(
        kb.store,
        kb.namespace,
        ask("Hol volt a ház, ahol Budapest mellett laktunk?"),
        session_id=session,
    )
    assert "lexical" in result.items[0].legs
    assert "Budapesten" in result.block


def test_nothing_found_leaves_the_messages_alone(kb: Kredenc, session: str) -> None:
    kb.remember("Deploys happen on Tuesdays.", kind="fact")
    messages = ask("zebra xylophone quokka")
    result = recall(kb.store, kb.namespace, messages, session_id=session)
    assert result == RecallResult(
        messages=messages,
        dry_run=False,
        terms=["zebra", "xylophone", "quokka"],
        session_start=result.session_start,
        elapsed_ms=result.elapsed_ms,
        timings_ms=result.timings_ms,
    )


def test_no_user_message(kb: Kredenc, session: str) -> None:
    kb.remember("Deploys happen on Tuesdays.", kind="fact")
    messages = [{"role": "system", "content": "Deploys?"}]
    result = recall(kb.store, kb.namespace, messages, session_id=session)
    assert result.messages == messages and result.skipped == "no user message"


def test_lexical_and_dense_modes(kb: Kredenc, session: str) -> None:
    kb.remember("The user drinks jasmine tea every morning.", kind="preference")
    lexical = recall(kb.store, kb.namespace, ask("jasmine tea"), session_id=session, mode="lexical")
    dense = recall(kb.store, kb.namespace, ask("jasmine tea"), session_id=session, mode="dense")
    assert set(lexical.items[0].legs) == {"lexical"}
    assert set(dense.items[0].legs) == {"dense"}


def test_new_turns_and_conversation_id() -> None:
    assert new_turns(HISTORY) == [{"role": "user", "content": "What tea do I like in the morning?"}]
    assert new_turns([*HISTORY, {"role": "assistant", "content": "x"}]) == []
    cid = conversation_id(HISTORY)
    assert cid.startswith("conv-")
    assert conversation_id([*HISTORY, {"role": "user", "content": "more"}]) == cid
    assert conversation_id([*HISTORY[:1], {"role": "user", "content": "other"}]) != cid


# -- fusion: the store's setting, as search fuses -----------------------------------------

TOPICS = ("tea", "coffee", "garden", "train", "budget", "kestrel", "river", "morning")


def fill_topics(kb: Kredenc) -> None:
    rng = random.Random(11)
    kb.remember_many(
        [{"text": " ".join(rng.choices(TOPICS, k=rng.randint(2, 6)))} for _ in range(120)]
    )


def recall_legs(kb: Kredenc, query: str, start: float) -> dict[str, dict[int, float]]:
    """Each recall leg alone, as the index returns it (20 deep, eligible records)."""
    filters = Filters(types=("memory", "turn"), older_than=start)
    ns = kb.namespace
    lexical = kb.index.lexical(ns, recall_terms(query), 20, filters)
    dense = kb.index.dense(ns, kb.embed_query(query), 20, filters)
    return {"lexical": dict(lexical), "dense": dict(dense)}


def rowid_of(kb: Kredenc, record_id: str) -> int:
    (rowid,) = kb.index.rowids_for(kb.namespace, [record_id], Filters()).values()
    return rowid


def test_recall_fuses_by_min_max_by_default(kb: Kredenc, session: str) -> None:
    fill_topics(kb)
    query = "tea in the garden on a river morning"
    result = recall(kb.store, kb.namespace, ask(query), session_id=session, budget=Budget(items=8))
    assert len(result.items) == 8
    assert result.session_start is not None
    legs = recall_legs(kb, query, result.session_start)
    bounds = {name: (min(leg.values()), max(leg.values())) for name, leg in legs.items()}
    for item in result.items:
        expected = 0.0
        for name, weight in (("lexical", 0.6), ("dense", 0.4)):
            if name in item.legs:
                lo, hi = bounds[name]
                assert item.legs[name].score == pytest.approx(legs[name][rowid_of(kb, item.id)])
                expected += weight * (item.legs[name].score - lo) / (hi - lo)
        assert item.score == pytest.approx(expected, rel=1e-9)
        assert 0.0 <= item.score <= 1.0  # not RRF's 1/(60 + rank) scale
    scores = [i.score for i in result.items]
    assert scores == sorted(scores, reverse=True)


def test_recall_fuses_by_rrf_when_the_store_says_so(
    open_store: Callable[..., Kredenc], session: str
) -> None:
    with open_store(fusion="rrf", rrf_k=10, weight_dense=3, weight_lexical=1) as kb:
        fill_topics(kb)
        result = recall(
            kb.store, kb.namespace, ask("tea garden river"), session_id=session, budget={"items": 6}
        )
    assert any(len(i.legs) == 2 for i in result.items)
    for item in result.items:
        want = sum(
            w / (10 + item.legs[name].rank)
            for name, w in (("lexical", 0.25), ("dense", 0.75))
            if name in item.legs
        )
        assert item.score == pytest.approx(want, rel=1e-12)


def test_trace_says_where_every_candidate_ended(kb: Kredenc, session: str) -> None:
    from kredenc.recall.reflex import STAGES, Fate

    kb.remember("The kestrel review went well on Monday.")
    kb.remember("The kestrel review went well on Monday!")  # a near copy of the first
    for topic in ("budget", "hiring", "roadmap", "security", "pricing"):
        kb.remember(f"The {topic} review was moved to next week.")
    trace: list[Fate] = []
    result = recall(
        kb.store,
        kb.namespace,
        ask("How did the kestrel review go?"),
        session_id=session,
        budget={"items": 3, "item_chars": 600, "total_chars": 1800},
        trace=trace,
        mode="lexical",
    )
    stages = {f.id: f.stage for f in trace}
    assert all(s in STAGES for s in stages.values())
    assert {i.id for i in result.items} == {k for k, s in stages.items() if s == "injected"}
    assert len(result.items) == 3
    assert "near copy" in stages.values()
    assert list(stages.values()).count("items") == 7 - 3 - 1
    assert sorted(f.rank for f in trace) == list(range(1, 8))
    # Without a trace the same items come back.
    plain = recall(
        kb.store,
        kb.namespace,
        ask("How did the kestrel review go?"),
        session_id=session,
        budget={"items": 3, "item_chars": 600, "total_chars": 1800},
        mode="lexical",
    )
    assert [i.id for i in plain.items] == [i.id for i in result.items]


def test_snippets_fit_more_items_in_the_same_characters(kb: Kredenc, session: str) -> None:
    rng = random.Random(7)

    def filler() -> str:  # words of no language, other in every record (no near copies)
        words = ["".join(rng.choices("bcdfghklmnprstvz", k=7)) for _ in range(120)]
        return " ".join(" ".join(words[i : i + 6]) + "." for i in range(0, 120, 6))

    for city in ("Lisbon", "Porto", "Braga", "Faro", "Coimbra"):
        kb.remember(f"{filler()} The ferry to {city} leaves at noon. {filler()}")
    question = ask("When does the ferry leave?")
    budget = {"items": 5, "item_chars": 600, "total_chars": 1800}
    whole = recall(kb.store, kb.namespace, question, session_id=session, budget=budget)
    snipped = recall(
        kb.store,
        kb.namespace,
        question,
        session_id=session,
        budget={**budget, "snippet_chars": 160},
    )
    assert len(whole.items) < 5 and len(snipped.items) == 5
    assert len(snipped.block) <= 1800
    assert all("ferry" in i.text and i.truncated for i in snipped.items)
    assert all("ferry" not in i.text for i in whole.items)  # the head is filler


def test_a_damaged_record_costs_its_item_not_the_recall(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A flipped byte in one candidate's log record: recall leaves that one out (a
    WARNING that names salvage) and recalls the others, instead of recalling nothing."""
    import re

    from kredenc.testing.embedders import HashEmbedder

    home = tmp_path / "store"
    with Kredenc.open(home, embedder=HashEmbedder(), durability="none") as kb:
        for i in range(4):
            kb.remember(f"note {i}: the garden has {i + 2} roses")
    log_file = home / "haystack.log"
    data = bytearray(log_file.read_bytes())
    offsets = [m.start() for m in re.finditer(b"KRD1", bytes(data))]
    data[offsets[2] + 40] ^= 0xFF  # the third note
    log_file.write_bytes(bytes(data))
    with Kredenc.open(home, embedder=HashEmbedder(), read_only=True) as kb:
        result = kb.recall(ask("how many roses are in the garden?"), session_id="s", dry_run=True)
    assert result.error is None
    assert len(result.items) == 3
    assert "note 2:" not in result.block
    assert "salvage" in caplog.text


def test_a_time_the_message_names_puts_what_was_filed_since_first(
    kb: Kredenc, session: str
) -> None:
    """ "two months ago": turns filed before that time cannot tell of it, so the ones
    filed since go first (each group in its own order); without the phrase, or asked
    when both were filed since, the order is the search's."""
    day = 86_400.0
    asked = 1_700_000_000.0
    (old,) = kb.file_turns(
        "old",
        [{"role": "user", "content": "The museum trip: a museum of science, a museum day.",
          "at": asked - 150 * day}],
    )  # fmt: skip
    (recent,) = kb.file_turns(
        "recent",
        [{"role": "user", "content": "I saw a museum alone.", "at": asked - 58 * day}],
    )

    def order(question: str, at: float = asked) -> list[str]:
        result = recall(
            kb.store, kb.namespace, ask(question), session_id=f"{session}-{question}-{at}",
            session_start=at,
        )  # fmt: skip
        return [i.id for i in result.items]

    plain = order("Which museum trip?")
    assert plain == [old, recent]
    assert order("Which museum trip two months ago?") == plain  # off by default: words
    kb.store.settings.recall_time_phrases = True
    assert order("Which museum trip two months ago?") == [recent, old]
    assert order("Which museum trip last week?") == [old, recent]  # neither since: as found
    # asked long after: both were filed since the time named; the search's order
    assert order("Which museum trip two years ago?", asked + 400 * day) == plain
    # the record keeps when it was said
    result = recall(
        kb.store, kb.namespace, ask("museum alone"), session_id=f"{session}-x",
        session_start=asked,
    )  # fmt: skip
    assert {i.id: i.created_at for i in result.items}[recent] == asked - 58 * day


def test_a_turns_time_that_is_not_a_time_files_nothing(kb: Kredenc, session: str) -> None:
    from kredenc.errors import InvalidInput

    with pytest.raises(InvalidInput, match="a turn's 'at'"):
        kb.file_turns(
            "s",
            [
                {"role": "user", "content": "the kestrel budget"},
                {"role": "user", "content": "second", "at": "last Tuesday"},
            ],
        )
    assert not kb.search("kestrel budget")


def test_recall_spelling_recalls_what_a_misspelt_word_names(kb: Kredenc, session: str) -> None:
    kestrel = kb.remember("The kestrel project ships its release on Friday.").id
    falcon = kb.remember("The falcon project ships its release on Monday.").id

    def first(question: str) -> str:
        result = recall(kb.store, kb.namespace, ask(question), session_id=f"{session}-{question}")
        return result.items[0].id if result.items else ""

    assert first("When does the kestrel project ship?") == kestrel
    assert first("When does the falcon project ship?") == falcon
    # On by default: "kestral" is held by no memory, and is searched as "kestrel".
    asked = "When does the kestral project ship?"
    assert kb.store.settings.recall_spelling
    assert first(asked) == kestrel
    assert first("When does the falcn project ship?") == falcon
    # Off, nothing tells the two apart.
    kb.store.settings.recall_spelling = False
    off = recall(kb.store, kb.namespace, ask(asked), session_id=f"{session}-off")
    assert {i.id for i in off.items} in ({kestrel, falcon}, set())
