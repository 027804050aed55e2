"""Turns filed with the turns before them as context: the context never crosses a
namespace or a scope (an index card carries it, so it would be found there)."""

from __future__ import annotations

from kredenc.engine import Kredenc


def test_a_sessions_context_stays_in_its_namespace(kb: Kredenc) -> None:
    kb.use_namespace("tenant-a")
    kb.file_turns("s1", [{"role": "user", "content": "The vault code is zebra-4471."}])
    kb.use_namespace("tenant-b")
    kb.file_turns("s1", [{"role": "user", "content": "Hello there, how are you?"}])
    # tenant b's card must not carry tenant a's words as its context
    assert kb.search("zebra vault code", mode="lexical") == []
    kb.use_namespace("tenant-a")
    assert [h.text for h in kb.search("zebra vault code", mode="lexical")] == [
        "The vault code is zebra-4471."
    ]


def test_a_sessions_context_stays_within_its_user(kb: Kredenc) -> None:
    kb.file_turns("chat", [{"role": "user", "content": "My bank PIN is 8812."}], user_id="ann")
    kb.file_turns("chat", [{"role": "user", "content": "What is the weather?"}], user_id="bob")
    assert kb.search("bank PIN", mode="lexical", user_id="bob") == []


def test_a_session_continues_its_context_within_its_namespace(kb: Kredenc) -> None:
    kb.file_turns("s1", [{"role": "user", "content": "We talked about the heron project."}])
    kb.file_turns("s1", [{"role": "user", "content": "What was its budget again?"}])
    found = {h.text for h in kb.search("heron", mode="lexical")}
    assert "What was its budget again?" in found  # found through its context
