"""The local LLM extra: what works without it, and (slow) the real model when installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kredenc.config import Settings
from kredenc.errors import InvalidInput, MissingExtra
from kredenc.providers.llm import local
from kredenc.providers.llm.factory import make_llm
from kredenc.providers.llm.local import Gpt4AllLLM, _until_stop, chat_prompt

INSTALLED = importlib.util.find_spec("gpt4all") is not None and all(
    importlib.util.find_spec(local.PART_MODULE.format(n=n)) is not None
    for n in range(1, local.PARTS + 1)
)


def test_the_prompt_is_chatml_ending_at_the_assistants_turn() -> None:
    prompt = chat_prompt(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    )
    assert prompt == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_a_stop_marker_written_as_text_ends_the_reply_even_split() -> None:
    assert (
        "".join(_until_stop(iter(["The answer", " is 8.<|im", "_end|>junk"]))) == "The answer is 8."
    )
    assert "".join(_until_stop(iter(["a <", "b"]))) == "a <b"


@pytest.mark.skipif(INSTALLED, reason="the local extra is installed")
def test_without_the_extra_it_names_the_install_command() -> None:
    with pytest.raises(MissingExtra) as info:
        make_llm(Settings(llm_provider="local"))
    assert info.value.hint == "pip install 'kredenc[local]'"


@pytest.mark.skipif(importlib.util.find_spec("gpt4all") is None, reason="needs gpt4all")
def test_a_model_path_that_is_not_a_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="is not a file"):
        Gpt4AllLLM(tmp_path / "missing.gguf")


@pytest.mark.slow
@pytest.mark.skipif(not INSTALLED, reason="needs the local extra: pip install 'kredenc[local]'")
def test_the_local_model_answers_and_follows_a_schema() -> None:
    llm = make_llm(Settings(llm_provider="local", llm_local_threads=2, llm_max_tokens=48))
    assert isinstance(llm, Gpt4AllLLM)
    try:
        context = "The Transformer uses h = 8 parallel attention layers, or heads."
        messages = [
            {"role": "system", "content": "Answer from the context in a few words."},
            {"role": "user", "content": f"Context: {context}\nHow many attention heads?"},
        ]
        partial = llm.stream(messages)
        assert next(partial)
        del partial  # a reader that stops early releases the model
        stream = llm.stream(messages)
        text = "".join(stream)
        assert "8" in text or "eight" in text.lower()
        assert stream.completion is not None and stream.completion.usage.completion_tokens > 0
        schema = {
            "type": "object",
            "properties": {"heads": {"type": "integer", "minimum": 1, "maximum": 64}},
            "required": ["heads"],
        }
        done = llm.complete(messages, schema=schema)
        assert done.data == {"heads": 8}
        assert done.usage.cost_usd == 0.0
    finally:
        llm.close()
