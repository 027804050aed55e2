"""The sentence-transformers embedder from a local folder (the rerank extra), with a tiny
one-layer BERT the test builds and saves."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from kredenc.errors import InvalidInput
from kredenc.providers.embed.sbert import SentenceTransformersEmbedder

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sentence_transformers")
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("sbert")
    vocab = resources.files("kredenc.providers.embed").joinpath("data/minilm-vocab.txt")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
    )
    BertModel(config).save_pretrained(root / "bert")
    tokenizer.save_pretrained(root / "bert")
    word = models.Transformer(str(root / "bert"), max_seq_length=32)
    pooling = models.Pooling(16, pooling_mode="mean")
    SentenceTransformer(modules=[word, pooling], device="cpu").save(str(root / "st"))
    return root / "st"


def test_vectors_are_the_library_s_normalised(folder: Path) -> None:
    from sentence_transformers import SentenceTransformer

    texts = ["the apple tree", "a kestrel over the river", "x"]
    emb = SentenceTransformersEmbedder(folder)
    assert emb.dim == 16 and emb.model_id.startswith("sentence-transformers:st@")
    want = SentenceTransformer(str(folder), device="cpu").encode(texts)
    want = want / np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(emb.embed(texts), want, atol=1e-5)
    assert SentenceTransformersEmbedder(folder).model_id == emb.model_id


def test_a_folder_that_is_not_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="is not a sentence-transformers folder"):
        SentenceTransformersEmbedder(tmp_path)
    with pytest.raises(InvalidInput, match="embed_model_path is empty"):
        SentenceTransformersEmbedder(None)
