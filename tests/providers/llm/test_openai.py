"""OpenAICompatLLM against the scripted OpenAI-compatible server on 127.0.0.1 (real HTTP)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.llm.openai import OpenAICompatLLM
from kredenc.providers.llm.structured import RETRY_PROMPT, estimate_tokens
from kredenc.testing.chat_server import PATH, Script, chat_completions_route
from kredenc.testing.openai_server import LoopbackServer, Reply

ASK = [{"role": "user", "content": "How many heads does the Transformer use?"}]
VERDICT = {
    "title": "chunk verdict",
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["CORRECT", "AMBIGUOUS", "INCORRECT"]},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
    },
    "required": ["verdict", "confidence"],
    "additionalProperties": False,
}
KEY = "sk-test-0123456789abcdef"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


def llm(
    server: LoopbackServer,
    script: Script,
    *,
    usage: bool = True,
    server_json_schema: bool = True,
    **options: Any,
) -> OpenAICompatLLM:
    """The LLM under test, against ``script`` on the server (``usage``: the server
    reports token counts; ``server_json_schema``: it takes response_format json_schema)."""
    route = chat_completions_route(script, usage=usage, json_schema=server_json_schema)
    server.route("POST", PATH, route)
    options.setdefault("backoff_s", 0.01)
    options.setdefault("timeout", 5.0)
    return OpenAICompatLLM(server.base_url, "gpt-test", **options)


def bodies(server: LoopbackServer) -> list[dict[str, Any]]:
    return [r.json() for r in server.requests]


def test_a_plain_reply_with_the_servers_usage(server: LoopbackServer) -> None:
    with llm(server, ["Eight heads [1]."], max_tokens=64) as model:
        done = model.complete(ASK, temperature=0.2)
    assert done.text == "Eight heads [1]."
    assert done.model == "gpt-test" and done.finish_reason == "stop" and done.data is None
    [body] = bodies(server)
    assert body["messages"] == ASK and body["model"] == "gpt-test"
    assert body["temperature"] == 0.2 and body["max_tokens"] == 64
    assert "response_format" not in body and "stream" not in body
    assert done.usage.prompt_tokens > 0
    assert done.usage.completion_tokens == estimate_tokens("Eight heads [1].")


def test_a_reply_far_past_max_tokens_is_refused_unread(server: LoopbackServer) -> None:
    """A 5 MB reply to a call allowed 1,024 tokens was read whole (718 MB peak in an
    ask), printed as the answer, then could not be filed. Its body is read up to a bound
    of the tokens asked for; past it the reply is a provider failure."""
    huge = "word " * 1_000_000
    with llm(server, [huge, huge], max_tokens=1024) as model:
        with pytest.raises(ProviderError, match="larger than") as caught:
            model.complete(ASK)
        assert "max_tokens" in caught.value.hint or "llm_max_tokens" in caught.value.hint
        with pytest.raises(ProviderError, match="larger than"):
            for _ in model.stream(ASK):
                pass
    with llm(server, ["Eight heads [1]. " * 200], max_tokens=1024) as model:
        assert model.complete(ASK).text.startswith("Eight heads")  # a long, fair reply


def test_a_call_max_tokens_overrides_the_default(server: LoopbackServer) -> None:
    with llm(server, "ok", max_tokens=64) as model:
        model.complete(ASK, max_tokens=5)
    assert bodies(server)[0]["max_tokens"] == 5


def test_without_usage_from_the_server_the_tokens_are_estimated(server: LoopbackServer) -> None:
    text = "A reply of some forty characters, or so."
    with llm(server, [text], usage=False) as model:
        done = model.complete(ASK)
    assert done.usage.completion_tokens == estimate_tokens(text) == 10
    assert done.usage.prompt_tokens == estimate_tokens(ASK[0]["content"]) + 4


def test_a_schema_reply_is_parsed_and_asked_for_as_json_schema(server: LoopbackServer) -> None:
    with llm(server, [{"verdict": "CORRECT", "confidence": 92}]) as model:
        done = model.complete(ASK, schema=VERDICT)
    assert done.data == {"verdict": "CORRECT", "confidence": 92}
    fmt = bodies(server)[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"] == {"name": "chunk_verdict", "schema": VERDICT, "strict": True}


def test_a_schema_strict_mode_cannot_take_is_sent_without_strict(server: LoopbackServer) -> None:
    loose = {"type": "object", "properties": {"a": {"type": "string"}}}
    with llm(server, [{"a": "x"}]) as model:
        assert model.complete(ASK, schema=loose).data == {"a": "x"}
    assert bodies(server)[0]["response_format"]["json_schema"]["strict"] is False


def test_without_json_schema_support_it_asks_for_json_and_states_the_schema(
    server: LoopbackServer,
) -> None:
    # The server refuses json_schema, as one without structured output does: the
    # record says so, and the client falls back to JSON mode.
    with llm(
        server,
        [{"verdict": "INCORRECT", "confidence": 10}],
        server_json_schema=False,
        json_schema=False,
    ) as model:
        done = model.complete([{"role": "system", "content": "Grade."}, *ASK], schema=VERDICT)
    assert done.data == {"verdict": "INCORRECT", "confidence": 10}
    [body] = bodies(server)
    assert body["response_format"] == {"type": "json_object"}
    system = body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Grade.\n\n")
    assert json.dumps(VERDICT, separators=(",", ":")) in system["content"]


def test_a_server_without_json_schema_refuses_it(server: LoopbackServer) -> None:
    with (
        llm(server, ["{}"], server_json_schema=False) as model,
        pytest.raises(ProviderError, match="HTTP 400") as info,
    ):
        model.complete(ASK, schema=VERDICT)
    assert "response_format" in info.value.hint


def test_an_invalid_reply_is_retried_once_with_the_problem_named(
    server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    script: list[Any] = [
        {"verdict": "MAYBE", "confidence": 50},
        {"verdict": "AMBIGUOUS", "confidence": 50},
    ]
    with llm(server, script) as model, caplog.at_level(logging.INFO):
        done = model.complete(ASK, schema=VERDICT)
    assert done.data == {"verdict": "AMBIGUOUS", "confidence": 50}
    _first, second = bodies(server)
    assert second["messages"][: len(ASK)] == ASK
    assert second["messages"][-2] == {"role": "assistant", "content": json.dumps(script[0])}
    retry = second["messages"][-1]
    assert retry["role"] == "user"
    assert retry["content"].startswith(RETRY_PROMPT.split("{")[0])
    assert '$.verdict: expected one of ["CORRECT", "AMBIGUOUS", "INCORRECT"]' in retry["content"]
    # Both calls are paid for.
    written = [estimate_tokens(json.dumps(item)) for item in script]
    assert done.usage.completion_tokens == sum(written)
    assert "does not match the schema" in caplog.text


def test_a_reply_that_is_not_json_twice_is_a_provider_error_with_a_hint(
    server: LoopbackServer,
) -> None:
    with (
        llm(server, ["Sure! Here it is:", "I think it is correct."]) as model,
        pytest.raises(ProviderError) as info,
    ):
        model.complete(ASK, schema=VERDICT)
    error = info.value
    assert "does not match the JSON Schema after 2 tries" in error.message
    assert "not JSON" in error.message and "\n" not in str(error)
    assert "structured output" in error.hint
    assert len(server.requests) == 2


def test_a_missing_required_property_is_named(server: LoopbackServer) -> None:
    with (
        llm(server, [{"verdict": "CORRECT"}, {"verdict": "CORRECT"}]) as model,
        pytest.raises(ProviderError, match="missing required property 'confidence'"),
    ):
        model.complete(ASK, schema=VERDICT)


def test_streaming_yields_the_deltas_and_the_final_usage(server: LoopbackServer) -> None:
    text = "The Transformer uses eight heads."
    with llm(server, [text]) as model:
        stream = model.stream(ASK, max_tokens=32)
        pieces = list(stream)
    assert pieces == ["The ", "Transformer ", "uses ", "eight ", "heads."]
    done = stream.completion
    assert done is not None and done.text == text and done.finish_reason == "stop"
    [body] = bodies(server)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 32
    # The server's usage chunk, not an estimate: the estimate of the prompt differs.
    assert done.usage.completion_tokens == estimate_tokens(text)
    assert done.usage.prompt_tokens == estimate_tokens(ASK[0]["content"]) + 4


def test_a_stream_without_a_usage_chunk_is_estimated(server: LoopbackServer) -> None:
    with llm(server, ["one two three"], usage=False) as model:
        stream = model.stream(ASK)
        assert "".join(stream) == "one two three"
    assert stream.completion is not None
    assert stream.completion.usage.completion_tokens == estimate_tokens("one two three")


def test_a_stream_that_ends_in_an_error_event_is_a_provider_error(
    server: LoopbackServer,
) -> None:
    broken = b'data: {"choices":[{"index":0,"delta":{"content":"Hal"}}]}\n\n' + (
        b'data: {"error":{"message":"upstream overloaded"}}\n\n'
    )
    stream_reply = Reply.raw(broken, content_type="text/event-stream")
    with llm(server, [stream_reply]) as model:
        stream = model.stream(ASK)
        assert next(stream) == "Hal"
        with pytest.raises(ProviderError, match="upstream overloaded"):
            next(stream)


def test_a_429_with_retry_after_is_retried(server: LoopbackServer) -> None:
    busy = Reply.error(429, "rate limited", "rate_limit", headers={"Retry-After": "0"})
    with llm(server, [busy, busy, "Finally."]) as model:
        assert model.complete(ASK).text == "Finally."
    assert len(server.requests) == 3


def test_a_streamed_request_refused_with_429_is_retried(server: LoopbackServer) -> None:
    busy = Reply.error(429, "rate limited", "rate_limit", headers={"Retry-After": "0"})
    with llm(server, [busy, "ok then"]) as model:
        assert "".join(model.stream(ASK)) == "ok then"
    assert len(server.requests) == 2


def test_a_long_retry_after_ends_at_once_with_the_wait_in_the_hint(
    server: LoopbackServer,
) -> None:
    busy = Reply.error(429, "rate limited", "rate_limit", headers={"Retry-After": "3600"})
    with llm(server, [busy, "never"]) as model, pytest.raises(ProviderError) as info:
        model.complete(ASK)
    assert "3600 s" in info.value.hint and len(server.requests) == 1


def test_a_500_is_not_repeated(server: LoopbackServer) -> None:
    # A chat request may have been processed (and paid for): it is not sent twice.
    with (
        llm(server, [Reply.error(502, "bad gateway"), "twice"]) as model,
        pytest.raises(ProviderError, match="HTTP 502: bad gateway"),
    ):
        model.complete(ASK)
    assert len(server.requests) == 1


def test_401_is_a_provider_error_that_does_not_echo_the_key(server: LoopbackServer) -> None:
    denied = Reply.error(401, f"Incorrect API key provided: {KEY}", "invalid_request_error")
    with llm(server, [denied], api_key=KEY) as model:
        assert KEY not in repr(model) and KEY not in model.describe()
        with pytest.raises(ProviderError) as info:
            model.complete(ASK)
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    error = info.value
    assert "HTTP 401" in error.message and error.hint == "check the API key"
    assert KEY not in str(error) and KEY not in repr(error.to_dict())


def test_a_401_on_a_stream_does_not_echo_the_key(server: LoopbackServer) -> None:
    denied = Reply.error(401, f"bad key {KEY}", "invalid_request_error")
    with (
        llm(server, [denied], api_key=KEY) as model,
        pytest.raises(ProviderError, match="HTTP 401") as info,
    ):
        model.stream(ASK)
    assert KEY not in str(info.value)


def test_cost_comes_from_the_price_table(server: LoopbackServer) -> None:
    text = "x" * 400  # 100 estimated tokens
    prices = {"gpt-test": (2.0, 8.0)}
    with llm(server, [text, text], prices=prices) as model:
        done = model.complete(ASK)
        p, c = done.usage.prompt_tokens, done.usage.completion_tokens
        assert c == 100
        assert done.usage.cost_usd == pytest.approx((p * 2.0 + c * 8.0) / 1e6)
        model.model = "another-model"  # not in the table: free, not an error
        assert model.complete(ASK).usage.cost_usd == 0.0


def test_a_reply_without_choices_is_a_provider_error(server: LoopbackServer) -> None:
    with (
        llm(server, [Reply.json({"object": "chat.completion", "choices": []})]) as model,
        pytest.raises(ProviderError, match="no choices") as info,
    ):
        model.complete(ASK)
    assert "/v1" in info.value.hint


def test_bad_messages_are_invalid_input_before_any_request(server: LoopbackServer) -> None:
    with llm(server, ["never"]) as model:
        for bad in ([], "hello", [{"role": "wizard", "content": "x"}], [{"role": "user"}]):
            with pytest.raises(InvalidInput):
                model.complete(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="'oneOf'"):
            model.complete(ASK, schema={"oneOf": []})
        with pytest.raises(InvalidInput, match="temperature must be between 0 and 2"):
            model.complete(ASK, temperature=-1)
        with pytest.raises(InvalidInput, match="max_tokens must be a positive integer"):
            model.stream(ASK, max_tokens=0)
    assert server.requests == []


def test_no_model_name_is_refused_with_the_setting_to_set() -> None:
    with pytest.raises(InvalidInput, match="needs a model name") as info:
        OpenAICompatLLM("http://127.0.0.1:9/v1", "")
    assert "llm_model" in info.value.hint


def test_the_fingerprint_names_provider_model_and_url(server: LoopbackServer) -> None:
    with llm(server, ["x"], name="vllm") as model:
        assert model.fingerprint() == f"vllm:gpt-test@{server.base_url}"
        assert model.describe() == f"gpt-test (vllm at {server.base_url})"
