"""TurnFiler: turns are filed on a background thread, in order, never blocking the caller.

The store is real; its embedder is the test HashEmbedder behind a gate, so a test can
hold a filing in the middle of its embedding and see what the caller sees meanwhile.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.memory.turns import TurnFiler as Cards
from kredenc.recall.filing import TurnFiler
from kredenc.records import new_id
from recall.gated_embedder import WAIT, GatedEmbedder


@pytest.fixture
def embedder() -> GatedEmbedder:
    return GatedEmbedder()


@pytest.fixture
def gated_kb(open_store: Callable[..., Kredenc], embedder: GatedEmbedder) -> Iterator[Kredenc]:
    store = open_store(embedder=embedder)
    try:
        yield store
    finally:
        embedder.gate.set()
        store.close()


def filed(kb: Kredenc, session: str) -> list[tuple[str, str]]:
    """(role, text) of the session's turns, in the order they were filed."""
    hits = kb.search("session", k=100, types=["turn"], mode="lexical")
    hits = [h for h in hits if h.meta.get("session") == session]
    hits.sort(key=lambda h: h.offset)
    return [(str(h.meta["role"]), h.text) for h in hits]


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_submit_returns_while_the_filing_is_held(
    gated_kb: Kredenc, embedder: GatedEmbedder, session: str
) -> None:
    filer = TurnFiler(gated_kb)
    assert filer.submit(session, user("GATED first turn"), "a reply turn")
    assert embedder.entered.wait(WAIT)
    assert filer.submit(session, user("second turn"), lambda: "another reply turn")
    assert not filer.flush(timeout=0.1)  # still held
    assert filed(gated_kb, session) == []
    embedder.gate.set()
    assert filer.flush(timeout=WAIT)
    assert filed(gated_kb, session) == [
        ("user", "GATED first turn"),
        ("assistant", "a reply turn"),
        ("user", "second turn"),
        ("assistant", "another reply turn"),
    ]
    assert filer.close()


def test_turns_of_a_session_are_filed_in_the_order_submitted(kb: Kredenc, session: str) -> None:
    filer = TurnFiler(kb)
    for i in range(20):
        filer.submit(session, user(f"turn number {i}"), None)
    assert filer.close()
    assert filed(kb, session) == [("user", f"turn number {i}") for i in range(20)]


def test_close_files_what_is_waiting(
    gated_kb: Kredenc, embedder: GatedEmbedder, session: str
) -> None:
    filer = TurnFiler(gated_kb)
    filer.submit(session, user("GATED turn one"), None)
    filer.submit(session, user("turn two"), None)
    threading.Timer(0.2, embedder.gate.set).start()
    assert filer.close(timeout=WAIT)
    assert [text for _, text in filed(gated_kb, session)] == ["GATED turn one", "turn two"]


def test_a_turn_is_dropped_with_a_warning_only_when_the_queue_stays_full(
    gated_kb: Kredenc,
    embedder: GatedEmbedder,
    session: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Only when the queue stays full for ``wait_s`` (the filing is stuck)."""
    filer = TurnFiler(gated_kb, max_pending=2, wait_s=0.2)
    assert filer.submit(session, user("GATED held turn"), None)
    assert embedder.entered.wait(WAIT)  # taken off the queue, held in its embedding
    assert filer.submit(session, user("waiting one"), None)
    assert filer.submit(session, user("waiting two"), None)
    with caplog.at_level(logging.WARNING, "kredenc.recall"):
        assert not filer.submit(session, user("one too many"), None)
    assert filer.dropped == 1
    assert "2 turns are already waiting to be filed (waited 0.2 s for room)" in caplog.text
    embedder.gate.set()
    assert filer.close(timeout=WAIT)
    texts = [text for _, text in filed(gated_kb, session)]
    assert texts == ["GATED held turn", "waiting one", "waiting two"]


def test_after_close_nothing_is_taken(
    kb: Kredenc, session: str, caplog: pytest.LogCaptureFixture
) -> None:
    filer = TurnFiler(kb)
    assert filer.close()
    with caplog.at_level(logging.WARNING, "kredenc.recall"):
        assert not filer.submit(session, user("too late"), None)
    assert "the filer is closed" in caplog.text
    assert filer.flush(timeout=1)
    assert filed(kb, session) == []


def test_a_reply_that_cannot_be_read_still_files_the_user_turn(
    kb: Kredenc, session: str, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> str:
        raise ValueError("stream state lost")

    filer = TurnFiler(kb)
    with caplog.at_level(logging.WARNING, "kredenc.recall"):
        filer.submit(session, user("what I said"), broken)
        assert filer.close()
    assert filed(kb, session) == [("user", "what I said")]
    assert "stream state lost" in caplog.text


def test_a_turn_card_carries_session_speaker_and_terms(open_store: Callable[..., Kredenc]) -> None:
    """The issue's card: context (session, speaker, turns before) and tags (session,
    speaker, the terms recall extracts), so a turn is found by what it is about."""
    with open_store() as kb:
        first, second = kb.file_turns(
            "s-42",
            [
                {"role": "user", "content": "When is Lena's birthday?"},
                {
                    "role": "assistant",
                    "content": "Lena Petrov's birthday is on 16 May; she likes sushi.",
                },
            ],
        )
        turn = kb.get(second)
        assert turn.tags[:2] == ("session:s-42", "speaker:assistant")
        assert {"lena", "petrov", "birthday", "sushi"} <= set(turn.tags[2:])
        assert "the" not in turn.tags and len(turn.tags) <= 2 + 8
        assert kb.get(first).tags[:2] == ("session:s-42", "speaker:user")
        # The tags are in the card: a word only the tags hold finds the turn.
        hits = kb.search("speaker", k=5, types=["turn"], mode="lexical")
        assert {h.id for h in hits} == {first, second}


def test_a_prepared_job_runs_in_order_and_one_that_raises_is_a_warning(
    gated_kb: Kredenc, embedder: GatedEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    embedder.gate.set()
    filer = TurnFiler(gated_kb)
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("disk on fire")

    assert filer.submit_call("first job", lambda: ran.append("first"))
    with caplog.at_level(logging.WARNING, logger="kredenc.recall"):
        assert filer.submit_call("broken job", broken)
        assert filer.submit_call("last job", lambda: ran.append("last"))
        assert filer.flush(timeout=30)
    assert ran == ["first", "last"]
    assert "broken job not filed: RuntimeError: disk on fire" in caplog.text
    filer.close()
    assert not filer.submit_call("late job", lambda: ran.append("late"))
    assert filer.dropped == 1 and ran == ["first", "last"]


def turns_in(kb: Kredenc) -> int:
    """How many turn records the facade counts in the store."""
    drawers = kb.stats()["drawers"]
    return sum(d["records"] for d in drawers if d.get("type") == "turn")


def test_more_filings_back_to_back_than_max_pending_are_all_filed(kb: Kredenc) -> None:
    """Issue 14: 2,000 asks in a row used to overflow the 1,000 waiting turns and lose
    the rest with a WARNING. A full queue now makes the caller wait for room."""
    filer = TurnFiler(kb)
    n = 2 * filer.max_pending
    accepted = [
        filer.submit(f"burst-{i % 7}", user(f"burst turn number {i}"), None) for i in range(n)
    ]
    assert filer.flush(timeout=120)
    assert all(accepted) and filer.dropped == 0
    assert turns_in(kb) == n
    assert filer.close()


def test_a_full_queue_makes_submit_wait_for_room_and_then_files_it(
    gated_kb: Kredenc, embedder: GatedEmbedder, session: str
) -> None:
    filer = TurnFiler(gated_kb, max_pending=2, wait_s=WAIT)
    assert filer.submit(session, user("GATED held turn"), None)
    assert embedder.entered.wait(WAIT)
    assert filer.submit(session, user("waiting one"), None)
    assert filer.submit(session, user("waiting two"), None)
    threading.Timer(0.3, embedder.gate.set).start()
    started = time.monotonic()
    assert filer.submit(session, user("the one that waited"), None)
    assert time.monotonic() - started >= 0.2  # it waited for the held filing
    assert filer.close(timeout=WAIT)
    assert filer.dropped == 0
    texts = [text for _, text in filed(gated_kb, session)]
    assert texts == ["GATED held turn", "waiting one", "waiting two", "the one that waited"]


def ask_job(kb: Kredenc, cards: Cards, session: str, text: str) -> Callable[[], object]:
    """What an ask hands the filer: its turns' payloads, made on the filing thread."""
    ids = [new_id("turn")]
    return lambda: cards.prepare(kb.store, kb.namespace, session, user(text), ids=ids)


def test_jobs_waiting_together_are_written_as_one_batch_in_order(
    gated_kb: Kredenc, embedder: GatedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    write = gated_kb.store.write

    def counted(payloads: list[dict[str, Any]], **kw: Any) -> Any:
        writes.append(len(payloads))
        return write(payloads, **kw)

    monkeypatch.setattr(gated_kb.store, "write", counted)
    filer, cards = TurnFiler(gated_kb, linger_s=0), Cards()
    assert filer.submit_call("held", ask_job(gated_kb, cards, "g-a", "GATED"), into=gated_kb.store)
    assert embedder.entered.wait(WAIT)  # the first batch (of one) is held in its embedding
    for i in range(30):
        job = ask_job(gated_kb, cards, f"g-{'abc'[i % 3]}", f"grouped turn {i}")
        assert filer.submit_call(f"job {i}", job, into=gated_kb.store)
    assert filer.pending == 31
    embedder.gate.set()
    assert filer.flush(timeout=WAIT)
    assert filer.pending == 0
    assert writes == [1, 30]  # everything that waited: one write, one embedding call
    for s, first in (("g-a", 0), ("g-b", 1), ("g-c", 2)):
        expected = [f"grouped turn {i}" for i in range(first, 30, 3)]
        assert [t for _, t in filed(gated_kb, s) if t != "GATED"] == expected
    assert turns_in(gated_kb) == 31
    assert filer.close()


def test_a_job_of_a_batch_that_fails_is_left_out_and_the_rest_filed(
    kb: Kredenc, session: str, caplog: pytest.LogCaptureFixture
) -> None:
    filer, cards = TurnFiler(kb, linger_s=WAIT), Cards()

    def broken() -> object:
        raise ValueError("no payload today")

    with caplog.at_level(logging.WARNING, "kredenc.recall"):
        filer.submit_call("first", ask_job(kb, cards, session, "kept turn one"), into=kb.store)
        filer.submit_call("broken one", broken, into=kb.store)
        filer.submit_call("last", ask_job(kb, cards, session, "kept turn two"), into=kb.store)
        assert filer.flush(timeout=WAIT)  # a flush ends the linger at once
    assert "broken one not filed: ValueError: no payload today" in caplog.text
    assert [t for _, t in filed(kb, session)] == ["kept turn one", "kept turn two"]
    assert filer.close()


def test_a_forked_child_makes_other_ids_than_its_parent() -> None:
    """Ask filings make their ids in advance: a forked server worker must not repeat
    its parent's (the random part comes from the OS, drawn ahead into a pool that the
    child must not reuse)."""
    new_id("turn")  # the parent's pool now holds bytes that a child would repeat
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ids to the parent, then out without cleanup
        os.close(read)
        os.write(write, " ".join(new_id("turn") for _ in range(50)).encode())
        os._exit(0)
    os.close(write)
    mine = [new_id("turn") for _ in range(50)]
    with os.fdopen(read, "rb") as pipe:
        theirs = pipe.read().decode().split()
    os.waitpid(pid, 0)
    assert len(theirs) == 50
    assert not {i[13:] for i in mine} & {i[13:] for i in theirs}  # the random parts


def test_a_lone_filing_is_done_after_a_quiet_gap_not_the_whole_linger(
    kb: Kredenc, session: str
) -> None:
    """The thread lingers for more jobs only while they keep coming: a caller that
    pauses (a user reading the answer) has its turn filed in the pause."""
    filer = TurnFiler(kb, linger_s=WAIT, quiet_s=0.05)
    assert filer.submit(session, user("a lone turn"), None)
    deadline = time.monotonic() + WAIT / 2
    while filer.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert filer.pending == 0  # filed without a flush, well before linger_s
    assert filed(kb, session) == [("user", "a lone turn")]
    assert filer.close()


class OneAtATime:
    """The facade as a sink that can only file (no ``prepare_turns``): each turn is
    filed by itself, as the filer did before it batched the proxy's turns."""

    def __init__(self, kb: Kredenc) -> None:
        self.kb = kb

    def file_turns(self, session_id: str, turns: Sequence[Mapping[str, Any]]) -> list[str]:
        return self.kb.file_turns(session_id, turns)


def cards_of(kb: Kredenc) -> list[tuple[Any, ...]]:
    """Every turn's index card (its words and its context column), text and tags, in
    filing order."""
    conn = kb.store.index.reader()
    cards = dict(conn.execute("SELECT rowid, card || ' | ' || context FROM cards").fetchall())
    rowids = conn.execute("SELECT id, rowid FROM records WHERE type = 'turn' ORDER BY rowid")
    out = []
    for rid, rowid in rowids.fetchall():
        record = kb.get(rid)
        out.append((record.meta["session"], record.text, record.tags, cards[rowid]))
    return out


def test_submitted_turns_waiting_together_are_embedded_and_written_as_one_batch(
    gated_kb: Kredenc, embedder: GatedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy's turns (``submit``) are prepared in order and written in one batch:
    one model call for all their texts, one write, each session's turns in order."""
    writes: list[int] = []
    embedded: list[int] = []
    write, embed = gated_kb.store.write, embedder.embed

    def counted_write(payloads: list[dict[str, Any]], **kw: Any) -> Any:
        writes.append(len(payloads))
        return write(payloads, **kw)

    def counted_embed(texts: Sequence[str]) -> Any:
        embedded.append(len(texts))
        return embed(texts)

    monkeypatch.setattr(gated_kb.store, "write", counted_write)
    monkeypatch.setattr(embedder, "embed", counted_embed)
    filer = TurnFiler(gated_kb, linger_s=0)
    assert filer.submit("b-a", user("GATED held question"), "held answer")
    assert embedder.entered.wait(WAIT)
    for i in range(12):
        assert filer.submit(f"b-{'abc'[i % 3]}", user(f"batched question {i}"), f"answer {i}")
    embedder.gate.set()
    assert filer.flush(timeout=WAIT)
    assert writes == [2, 24] and embedded == [2, 24]
    for s, first in (("b-a", 0), ("b-b", 1), ("b-c", 2)):
        said = [(r, t) for r, t in filed(gated_kb, s) if "held" not in t]
        expected = [
            pair
            for i in range(first, 12, 3)
            for pair in (("user", f"batched question {i}"), ("assistant", f"answer {i}"))
        ]
        assert said == expected
    assert filer.close()


def test_batched_turns_file_the_same_cards_as_one_at_a_time(
    open_store: Callable[..., Kredenc], tmp_path: Path
) -> None:
    """Batching changes how many writes there are, not what is filed: the same texts,
    contexts (the turns before, across the batch) and tags, in the same order."""
    said = [(f"s-{i % 2}", f"question number {i} about deploys", f"reply {i}") for i in range(8)]
    filed_cards = []
    for batched in (False, True):
        with open_store(tmp_path / f"batched-{batched}") as kb:
            filer = TurnFiler(kb if batched else OneAtATime(kb), linger_s=WAIT)
            for s, question, reply in said:
                assert filer.submit(s, user(question), reply)
            assert filer.close()
            filed_cards.append(cards_of(kb))
    assert len(filed_cards[0]) == 16
    assert filed_cards[0] == filed_cards[1]
