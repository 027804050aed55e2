"""make_embedder: a name and options in, the right embedder out."""

from __future__ import annotations

import pytest

from kredenc.errors import InvalidInput
from kredenc.providers.embed.factory import PROVIDERS, make_embedder
from kredenc.providers.embed.minilm import MiniLMEmbedder
from kredenc.providers.embed.openai import OpenAIEmbedder


def test_minilm() -> None:
    emb = make_embedder("minilm", intra_op_num_threads=1)
    assert isinstance(emb, MiniLMEmbedder) and emb.intra_op_num_threads == 1
    assert not emb.loaded


def test_openai_name_is_case_insensitive() -> None:
    emb = make_embedder(" OpenAI ", base_url="http://127.0.0.1:9/v1", model="m", dim=3)
    assert isinstance(emb, OpenAIEmbedder)
    assert emb.model_id == "openai:m" and emb.dim == 3
    emb.close()


def test_unknown_provider_lists_known_ones() -> None:
    with pytest.raises(InvalidInput, match="unknown embedding provider 'bert'") as info:
        make_embedder("bert")
    assert info.value.hint == "known: minilm, openai"
    assert set(PROVIDERS) == {"minilm", "openai"}


def test_bad_options_are_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="bad options") as info:
        make_embedder("minilm", threads=4)
    assert "intra_op_num_threads" in info.value.hint
    with pytest.raises(InvalidInput, match="bad options"):
        make_embedder("openai", model="m")  # base_url missing
