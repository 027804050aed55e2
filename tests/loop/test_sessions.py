"""Sessions: the last 20 messages kept in the store (a real reopen), clear, and
isolation between sessions and namespaces."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kredenc.errors import InvalidInput
from kredenc.recall.filing import TurnFiler

from ._tools import agent_file
from .conftest import Open


def test_history_is_the_last_20_messages_oldest_first_and_survives_a_reopen(
    open_loop: Open,
) -> None:
    with open_loop() as kb:
        for n in range(11):
            kb.ask(f"question {n} about the needle", agent="finder", session_id="s1", k=4)
        history = kb.session_history("s1")
    assert len(history) == 20
    # 22 messages were filed; the first question and its answer fell off.
    assert history[0] == {"role": "user", "content": "question 1 about the needle"}
    assert [m["role"] for m in history] == ["user", "assistant"] * 10
    assert history[-2]["content"] == "question 10 about the needle"
    with open_loop() as kb:  # a new process would see the same: it is all in the store
        assert kb.session_history("s1") == history
        assert kb.session_history("s1", limit=2) == history[-2:]


def test_the_agent_sees_the_history(open_loop: Open, folders: tuple[Path, Path]) -> None:
    _, agents = folders
    counter = agent_file("counter", ["decide", "retrieve", "generate", "count"])
    (agents / "counter.md").write_text(counter, encoding="utf-8")
    with open_loop() as kb:
        first = kb.ask("where was the needle found", agent="counter", session_id="s1", k=4)
        assert first.trace[-1].note == "0 messages, last: "
        got = kb.ask("and the heron?", agent="counter", session_id="s1", k=4)
        assert got.trace[-1].note == f"2 messages, last: {first.text}"
        fresh = kb.ask("and the heron?", agent="counter", session_id="s2", k=4)
        assert fresh.trace[-1].note == "0 messages, last: "
        alone = kb.ask("and the heron?", agent="counter", k=4)  # no session: no history
        assert alone.trace[-1].note == "0 messages, last: "
        assert alone.meta["filed"]["session"].startswith("ask-")


def test_sessions_are_apart_by_id_and_namespace(open_loop: Open) -> None:
    with open_loop() as kb:
        kb.ask("where was the needle found", agent="finder", session_id="s1", k=4)
        kb.ask("where does the heron nest", agent="finder", session_id="s2", k=4)
        other = kb.scoped("elsewhere")
        other.add_passages([{"text": "The needle is in the other namespace too."}])
        other.ask("where is the needle", agent="finder", session_id="s1", k=4)
        assert kb.session_history("s1")[0]["content"] == "where was the needle found"
        assert kb.session_history("s2")[0]["content"] == "where does the heron nest"
        assert other.session_history("s1")[0]["content"] == "where is the needle"
        assert other.session_history("s2") == []


def test_clear_forgets_the_session_everywhere_and_only_it(open_loop: Open) -> None:
    with open_loop() as kb:
        first = kb.ask("where was the needle found", agent="finder", session_id="s1", k=4)
        kb.ask("where does the heron nest", agent="finder", session_id="s2", k=4)
        other = kb.scoped("elsewhere")
        other.add_passages([{"text": "The needle is in the other namespace too."}])
        other.ask("where is the needle", agent="finder", session_id="s1", k=4)
        assert kb.clear_session("s1") == 2
        assert kb.session_history("s1") == []
        assert len(kb.session_history("s2")) == 2
        assert len(other.session_history("s1")) == 2
        # Forgotten (tombstones): search and recall no longer find the turns.
        ids = set(first.meta["filed"]["ids"])
        assert not ids & {h.id for h in kb.search("needle", k=50, drawer="turns")}
        assert kb.clear_session("s1") == 0
        # A new turn in the cleared session does not carry the old ones as context.
        kb.ask("and now?", agent="finder", session_id="s1", k=4)
        assert len(kb.session_history("s1")) == 2
    with open_loop() as kb:
        assert len(kb.session_history("s1")) == 2


def test_a_bad_session_id_is_refused_in_one_line(open_loop: Open) -> None:
    with open_loop() as kb:
        for bad in ("", "a\nb", "x" * 201):
            with pytest.raises(InvalidInput, match="session id must"):
                kb.ask("where", agent="finder", session_id=bad)
            with pytest.raises(InvalidInput, match="session id must"):
                kb.session_history(bad)


def test_a_session_continued_after_a_restart_keeps_its_context(open_loop: Open) -> None:
    with open_loop() as kb:
        first = kb.ask("where was the needle found", agent="finder", session_id="s1", k=4)
    with open_loop() as kb:
        again = kb.ask("and who found it?", agent="finder", session_id="s1", k=4)
        question_id = again.meta["filed"]["ids"][0]
        kb.get(question_id)  # a facade call: it waits for the ask's turns to be filed
        found = kb.store.index.lookup(kb.namespace, question_id)
        assert found is not None
        context = kb.store.haystack.read(found.offset)["context"]
    # The new turn's card carries the turns before it, read back from the store.
    assert "where was the needle found" in context and first.text in context


def test_an_asks_turns_are_filed_off_its_path_and_every_later_call_sees_them(
    open_loop: Open,
) -> None:
    with open_loop() as kb:
        got = kb.ask("where was the needle found", agent="finder", k=4)
        ids = got.meta["filed"]["ids"]
        assert len(ids) == 2 and all(i.startswith("t") for i in ids)
        # Made in advance; the facade's next call waits for the filing thread.
        assert [kb.get(i).type for i in ids] == ["turn", "turn"]
        last = kb.ask("who found the needle", agent="finder", k=4)
    # close() filed what was still queued before the store closed.
    with open_loop() as kb:
        assert kb.get(last.meta["filed"]["ids"][1]).text == last.text


def test_filing_before_returning_when_background_filing_is_off(open_loop: Open) -> None:
    with open_loop(ask_file_in_background=False) as kb:
        got = kb.ask("where was the needle found", agent="finder", k=4)
        # No facade call in between: the index has the turns already.
        for rid in got.meta["filed"]["ids"]:
            assert kb.store.index.lookup(kb.namespace, rid) is not None


def test_a_burst_of_asks_past_the_filers_queue_loses_no_turn(open_loop: Open) -> None:
    """Issue 14: more asks back to back than the filing thread holds waiting used to
    drop turns with a WARNING; now an ask waits for room and every ask's turns are
    in the store. The facade's filer (1,000 waiting) is swapped for one holding 5, and
    held for 0.5 s by a first job, so that 12 asks overflow it."""
    with open_loop() as kb:
        filer = kb._ask_filer = TurnFiler(kb, max_pending=5)
        held = threading.Event()
        assert filer.submit_call("a held filing", lambda: held.wait(10))
        threading.Timer(0.5, held.set).start()
        n = 12
        answers = [kb.ask("where was the needle found", agent="finder", k=4) for _ in range(n)]
        assert held.is_set()  # the later asks waited for the held filing
        ids = [i for a in answers for i in a.meta["filed"]["ids"]]
        assert len(ids) == 2 * n
        turns = sum(d["records"] for d in kb.stats()["drawers"] if d.get("type") == "turn")
        assert turns == 2 * n
        assert filer.dropped == 0
        assert [kb.get(rid).text for rid in ids[-2:]] == [
            "where was the needle found",
            answers[-1].text,
        ]
