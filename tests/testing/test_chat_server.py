"""The scripted chat-completions route speaks the OpenAI protocol (raw HTTP, no client)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kredenc.testing import chat_completions_route
from kredenc.testing.chat_server import PATH, sse_body, words
from kredenc.testing.openai_server import LoopbackServer, Reply

MESSAGES = [{"role": "user", "content": "Reply in JSON please."}]


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


def post(server: LoopbackServer, **body: Any) -> httpx.Response:
    body.setdefault("model", "m")
    body.setdefault("messages", MESSAGES)
    return httpx.post(server.base_url + "/chat/completions", json=body, timeout=5)


def test_a_json_reply_carries_usage(server: LoopbackServer) -> None:
    server.route("POST", PATH, chat_completions_route(["Hello there."]))
    reply = post(server).json()
    assert reply["object"] == "chat.completion" and reply["model"] == "m"
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "Hello there."}
    usage = reply["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0


def test_a_stream_ends_with_a_usage_chunk_and_done(server: LoopbackServer) -> None:
    server.route("POST", PATH, chat_completions_route("one two"))
    raw = post(server, stream=True, stream_options={"include_usage": True})
    assert raw.headers["content-type"] == "text/event-stream"
    events = [line[6:] for line in raw.text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:3]] == ["one ", "two"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 2
    plain = post(server, stream=True)  # no usage unless asked for
    assert "usage" not in plain.text and plain.text.endswith("data: [DONE]\n\n")


def test_json_object_mode_needs_the_word_json_as_openai_says(server: LoopbackServer) -> None:
    server.route("POST", PATH, chat_completions_route({"ok": True}))
    fmt = {"type": "json_object"}
    assert (
        post(server, response_format=fmt).json()["choices"][0]["message"]["content"]
        == '{"ok": true}'
    )
    refused = post(server, response_format=fmt, messages=[{"role": "user", "content": "Hi"}])
    assert refused.status_code == 400 and "json" in refused.json()["error"]["message"]


def test_json_schema_is_checked_and_can_be_refused(server: LoopbackServer) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "v", "schema": {"type": "object"}}}
    server.route("POST", PATH, chat_completions_route({"ok": 1}))
    assert post(server, response_format=fmt).status_code == 200
    bad_name = {"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}}
    assert post(server, response_format=bad_name).status_code == 400
    server.route("POST", PATH, chat_completions_route({"ok": 1}, json_schema=False))
    assert post(server, response_format=fmt).status_code == 400


def test_a_list_script_runs_out_loudly_and_a_reply_item_is_sent_as_is(
    server: LoopbackServer,
) -> None:
    busy = Reply.error(429, "slow down", headers={"Retry-After": "7"})
    server.route("POST", PATH, chat_completions_route([busy, "ok"]))
    first = post(server)
    assert first.status_code == 429 and first.headers["retry-after"] == "7"
    assert post(server).status_code == 200
    exhausted = post(server)
    assert exhausted.status_code == 500 and "no reply left" in exhausted.text


def test_a_function_script_sees_the_body(server: LoopbackServer) -> None:
    server.route("POST", PATH, chat_completions_route(lambda body: f"T={body['temperature']}"))
    reply = post(server, temperature=0.3).json()
    assert reply["choices"][0]["message"]["content"] == "T=0.3"


def test_usage_can_be_left_out_and_bad_requests_are_400(server: LoopbackServer) -> None:
    server.route("POST", PATH, chat_completions_route("x", usage=False))
    assert "usage" not in post(server).json()
    assert post(server, messages=[]).status_code == 400
    assert post(server, response_format={"type": "yaml"}).status_code == 400


def test_words_and_the_sse_body_round_trip() -> None:
    assert "".join(words("  two  words ")) == "  two  words "
    body = sse_body(["a", "b"]).decode()
    assert body.count("data: ") == 5 and body.endswith("data: [DONE]\n\n")
