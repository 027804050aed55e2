"""ScriptedLLM: the scripted model at our own seam behaves like a real provider."""

from __future__ import annotations

import threading

import pytest

import kredenc.testing
from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.llm.base import Completion, Usage
from kredenc.providers.llm.structured import estimate_prompt_tokens, estimate_tokens
from kredenc.testing import ScriptedLLM

ASK = [{"role": "user", "content": "Is the chunk relevant?"}]
VERDICT = {
    "type": "object",
    "properties": {"verdict": {"enum": ["CORRECT", "INCORRECT"]}},
    "required": ["verdict"],
}


def test_it_is_exported_from_kredenc_testing() -> None:
    assert kredenc.testing.ScriptedLLM is ScriptedLLM


def test_replies_come_in_turn_and_every_call_is_recorded() -> None:
    llm = ScriptedLLM(["first", "second"])
    assert llm.complete(ASK).text == "first"
    assert llm.complete(ASK, temperature=0.7, max_tokens=50).text == "second"
    assert [c.temperature for c in llm.calls] == [0.0, 0.7]
    assert llm.calls[1].max_tokens == 50 and llm.calls[0].messages == ASK
    assert llm.remaining == 0
    with pytest.raises(ProviderError, match="no reply left for call 3"):
        llm.complete(ASK)


def test_a_dict_reply_with_a_schema_is_data() -> None:
    llm = ScriptedLLM([{"verdict": "CORRECT"}])
    done = llm.complete(ASK, schema=VERDICT)
    assert done.data == {"verdict": "CORRECT"} and done.text == '{"verdict": "CORRECT"}'
    assert llm.calls[0].schema is VERDICT


def test_without_a_schema_a_dict_is_only_its_text() -> None:
    done = ScriptedLLM([{"a": 1}]).complete(ASK)
    assert done.text == '{"a": 1}' and done.data is None


def test_a_mismatch_is_retried_once_like_the_real_providers() -> None:
    llm = ScriptedLLM([{"verdict": "MAYBE"}, {"verdict": "INCORRECT"}])
    assert llm.complete(ASK, schema=VERDICT).data == {"verdict": "INCORRECT"}
    assert len(llm.calls) == 2
    assert "expected one of" in llm.calls[1].messages[-1]["content"]
    twice = ScriptedLLM(["not json", {"verdict": "MAYBE"}])
    with pytest.raises(ProviderError, match="after 2 tries"):
        twice.complete(ASK, schema=VERDICT)


def test_a_function_answers_from_the_messages_and_schema() -> None:
    def respond(messages: list[dict[str, str]], schema: object) -> str | dict[str, str]:
        return {"verdict": "CORRECT"} if schema else messages[-1]["content"].upper()

    llm = ScriptedLLM(respond)
    assert llm.complete(ASK).text == "IS THE CHUNK RELEVANT?"
    assert llm.complete(ASK, schema=VERDICT).data == {"verdict": "CORRECT"}
    assert llm.remaining is None


def test_it_streams_word_by_word_with_the_completion_at_the_end() -> None:
    llm = ScriptedLLM(["Eight heads, h = 8."])
    stream = llm.stream(ASK)
    assert list(stream) == ["Eight ", "heads, ", "h ", "= ", "8."]
    assert stream.completion is not None and stream.completion.text == "Eight heads, h = 8."
    assert llm.calls[0].stream is True


def test_tokens_are_counted_deterministically_and_priced() -> None:
    text = "y" * 40
    llm = ScriptedLLM([text, text], prices=(3.0, 15.0))
    one = llm.complete(ASK).usage
    assert one == llm.complete(ASK).usage
    assert (
        one.prompt_tokens == estimate_prompt_tokens(ASK)
        and one.completion_tokens == estimate_tokens(text) == 10
    )
    assert one.cost_usd == pytest.approx((one.prompt_tokens * 3.0 + 10 * 15.0) / 1e6)
    assert ScriptedLLM(["z"]).complete(ASK).usage.cost_usd == 0.0


def test_a_completion_reply_is_returned_as_it_is() -> None:
    canned = Completion("paid", "big-model", Usage(10, 5, 0.25), "length")
    assert ScriptedLLM([canned]).complete(ASK) is canned


def test_max_tokens_cuts_a_long_reply() -> None:
    done = ScriptedLLM(["word " * 100]).complete(ASK, max_tokens=5)
    assert done.finish_reason == "length" and done.usage.completion_tokens == 5


def test_bad_input_is_refused_like_a_real_provider() -> None:
    with pytest.raises(InvalidInput):
        ScriptedLLM(["x"]).complete([{"role": "user"}])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match="wrap it"):
        ScriptedLLM("just a string")  # type: ignore[arg-type]


def test_concurrent_calls_each_get_one_reply() -> None:
    llm = ScriptedLLM([str(i) for i in range(40)])
    got: list[str] = []
    lock = threading.Lock()

    def ask() -> None:
        for _ in range(10):
            text = llm.complete(ASK).text
            with lock:
                got.append(text)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got, key=int) == [str(i) for i in range(40)] and len(llm.calls) == 40
