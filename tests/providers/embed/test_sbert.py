"""The sentence-transformers embedder from a local folder (the rerank extra), with a tiny
one-layer BERT the test builds and saves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kredenc.errors import InvalidInput
from kredenc.providers.embed.sbert import SentenceTransformersEmbedder
from kredenc.testing.tiny_models import build_sentence_transformers

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sentence_transformers")
    return build_sentence_transformers(tmp_path_factory.mktemp("sbert"))


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
