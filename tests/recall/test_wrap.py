"""``wrap(client, kb)`` with the real OpenAI SDK against a scripted loopback server:
recall lands in the request the server receives, the turn is filed after the call,
sync and async, streaming and not."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

openai = pytest.importorskip("openai")

from kredenc.engine import Kredenc  # noqa: E402
from kredenc.errors import InvalidInput  # noqa: E402
from kredenc.recall import wrap  # noqa: E402
from kredenc.testing.chat_server import chat_route, sent_messages  # noqa: E402
from kredenc.testing.openai_server import LoopbackServer  # noqa: E402

from .blocks import parse  # noqa: E402

REPLY = "You like jasmine tea, brewed for three minutes."
QUESTION = "Which tea do I like in the morning?"
HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hello!"},
    {"role": "assistant", "content": "Hi, how can I help?"},
    {"role": "user", "content": QUESTION},
]


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        srv.route("POST", "/v1/chat/completions", chat_route(REPLY))
        yield srv


@pytest.fixture
def memory(kb: Kredenc) -> str:
    return kb.remember("The user likes jasmine tea in the morning.", kind="preference").id


def sync_client(server: LoopbackServer) -> Any:
    return openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)


def async_client(server: LoopbackServer) -> Any:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)


def check_request(server: LoopbackServer, memory: str) -> None:
    sent = sent_messages(server.requests[-1])
    assert json.dumps(sent[:-1]) == json.dumps(HISTORY)  # the prefix as the caller sent it
    assert sent[-1]["role"] == "system"
    items = parse(sent[-1]["content"])
    (remembered,) = [i for i in items if "memory" in i]
    assert remembered["memory"] == "preference"
    assert remembered["text"] == "The user likes jasmine tea in the morning."
    assert memory not in sent[-1]["content"]  # the store's ids stay out of the model's view
    assert "kredenc_session_id" not in server.requests[-1].json()


def filed(kb: Kredenc, session: str) -> list[tuple[str, str]]:
    hits = kb.search("jasmine tea morning like", k=50, types=["turn"])
    return sorted((h.meta["role"], h.text) for h in hits if h.meta.get("session") == session)


EXPECTED = [("assistant", REPLY), ("user", QUESTION)]


def test_sync(kb: Kredenc, server: LoopbackServer, memory: str, session: str) -> None:
    client = wrap(sync_client(server), kb, session_id=session)
    with client:
        response = client.chat.completions.create(model="m", messages=HISTORY)
    assert response.choices[0].message.content == REPLY
    check_request(server, memory)
    assert filed(kb, session) == EXPECTED


def test_the_recall_role_setting_reaches_the_request(
    open_store: Any, server: LoopbackServer, session: str
) -> None:
    with open_store(recall_role="user") as kb:
        kb.remember("The user likes jasmine tea in the morning.", kind="preference")
        client = wrap(sync_client(server), kb, session_id=session, warm=False)
        with client:
            client.chat.completions.create(model="m", messages=HISTORY)
    sent = sent_messages(server.requests[-1])
    assert json.dumps(sent[:-1]) == json.dumps(HISTORY)
    assert sent[-1]["role"] == "user"
    (item,) = parse(sent[-1]["content"])
    assert item["memory"] == "preference"
    assert item["text"] == "The user likes jasmine tea in the morning."


def test_sync_streaming(kb: Kredenc, server: LoopbackServer, memory: str, session: str) -> None:
    client = wrap(sync_client(server), kb, session_id=session)
    with client:
        stream = client.chat.completions.create(model="m", messages=HISTORY, stream=True)
        pieces = [c.choices[0].delta.content or "" for c in stream]
    assert "".join(pieces).strip() == REPLY
    assert len(pieces) > 3  # chunk by chunk
    check_request(server, memory)
    assert filed(kb, session) == [("assistant", "".join(pieces)), ("user", QUESTION)]


def test_sync_stream_closed_early_files_the_question_not_part_of_an_answer(
    kb: Kredenc, server: LoopbackServer, memory: str, session: str
) -> None:
    """The reply read before the caller closed the stream is not the answer: filed as
    a whole turn it was recalled as one (as the proxy, which files it only finished)."""
    client = wrap(sync_client(server), kb, session_id=session)
    with client:
        with client.chat.completions.create(model="m", messages=HISTORY, stream=True) as stream:
            [next(stream), next(stream)]
        assert stream.response.is_closed  # attributes reach the SDK's stream
    assert filed(kb, session) == [("user", QUESTION)]


def test_async(kb: Kredenc, server: LoopbackServer, memory: str, session: str) -> None:
    async def main() -> str:
        async with wrap(async_client(server), kb, session_id=session) as client:
            response = await client.chat.completions.create(model="m", messages=HISTORY)
            return str(response.choices[0].message.content)

    assert asyncio.run(main()) == REPLY
    check_request(server, memory)
    assert filed(kb, session) == EXPECTED


def test_async_streaming(kb: Kredenc, server: LoopbackServer, memory: str, session: str) -> None:
    async def main() -> list[str]:
        async with wrap(async_client(server), kb, session_id=session) as client:
            stream = await client.chat.completions.create(model="m", messages=HISTORY, stream=True)
            return [c.choices[0].delta.content or "" async for c in stream]

    pieces = asyncio.run(main())
    assert "".join(pieces).strip() == REPLY
    check_request(server, memory)
    assert filed(kb, session) == [("assistant", "".join(pieces)), ("user", QUESTION)]


def test_session_per_call_and_derived(kb: Kredenc, server: LoopbackServer, memory: str) -> None:
    with wrap(sync_client(server), kb) as client:
        client.chat.completions.create(
            model="m", messages=HISTORY, kredenc_session_id="explicit-session"
        )
        client.chat.completions.create(model="m", messages=HISTORY)
    assert filed(kb, "explicit-session") == EXPECTED
    from kredenc.recall.conversation import conversation_id

    assert filed(kb, conversation_id(HISTORY)) == EXPECTED


def test_a_broken_store_never_breaks_the_call(
    open_store: Any, server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    kb = open_store()
    kb.remember("The user likes jasmine tea in the morning.", kind="preference")
    with wrap(sync_client(server), kb, session_id="broken") as client:
        kb.close()
        response = client.chat.completions.create(model="m", messages=HISTORY)
    assert response.choices[0].message.content == REPLY
    assert sent_messages(server.requests[-1]) == HISTORY  # sent unchanged
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("recall reflex skipped" in w for w in warnings)
    assert any("filing the turn of session broken failed" in w for w in warnings)


def test_wrapping_twice_is_refused(kb: Kredenc, server: LoopbackServer) -> None:
    with wrap(sync_client(server), kb) as client, pytest.raises(InvalidInput):
        wrap(client, kb)


def test_startup_line_at_wrap_time(
    kb: Kredenc, server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kredenc.recall")
    with wrap(sync_client(server), kb, dry_run=True):
        pass
    assert any(
        r.getMessage().startswith("recall reflex online: store=")
        and "dry_run=true" in r.getMessage()
        for r in caplog.records
    )


def test_without_a_store_the_default_store_is_opened(
    server: LoopbackServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kredenc

    monkeypatch.setenv("KREDENC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KREDENC_EMBED_THREADS", "1")
    with kredenc.wrap(sync_client(server)) as client:  # the public wrap opens the store
        client.chat.completions.create(model="m", messages=HISTORY, kredenc_session_id="d")
    kb = client.chat.completions._kredenc_wrapped.kb  # the store wrap opened
    try:
        assert kb.home == tmp_path / "home"
        assert filed(kb, "d") == EXPECTED
    finally:
        kb.close()
