"""The ONNX-folder embedder with a tiny model the test builds: vectors equal a numpy
reference from the same weights, for each pooling; the folder's content is its id."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from kredenc import plugins
from kredenc.config import Settings
from kredenc.engine import Kredenc, make_default_embedder
from kredenc.errors import FormatError, InvalidInput
from kredenc.providers.embed.base import Embedder
from kredenc.providers.embed.onnx import OnnxEmbedder
from kredenc.testing.tiny_models import TinyModel, build_embedder

TEXTS = ["the apple grows on a tree", "kestrel", "a small boat on the river sea", "zebra"]


def reference(model: TinyModel, texts: list[str], pooling: str) -> np.ndarray:
    """What the graph and the pooling compute, in numpy (one text at a time: no padding)."""
    tok = Tokenizer.from_file(str(model.path / "tokenizer.json"))
    rows = []
    for text in texts:
        ids = np.array(tok.encode(text).ids)
        hidden = np.tanh(model.weights["E"][ids] @ model.weights["W"])
        vec = {"mean": hidden.mean(0), "cls": hidden[0], "max": hidden.max(0)}[pooling]
        rows.append(vec / np.linalg.norm(vec))
    return np.array(rows, dtype=np.float32)


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_vectors_match_a_numpy_reference(tmp_path: Path, pooling: str) -> None:
    model = build_embedder(tmp_path / "m", pooling=pooling)
    emb = OnnxEmbedder(model.path, batch_size=3)  # batches of 3: padding is exercised
    got = emb.embed(TEXTS)
    assert emb.dim == 8 and emb.pooling == pooling
    assert got.shape == (4, 8) and got.dtype == np.float32
    np.testing.assert_allclose(got, reference(model, TEXTS, pooling), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(emb.embed_query(TEXTS[1]), got[1], atol=1e-6)


def test_without_a_pooling_config_it_means_and_reads_the_size_from_the_graph(
    tmp_path: Path,
) -> None:
    model = build_embedder(tmp_path / "m", pooling=None, dim=6, token_types=False)
    emb = OnnxEmbedder(model.path)
    assert emb.dim == 6 and emb.pooling == "mean"
    np.testing.assert_allclose(emb.embed(TEXTS), reference(model, TEXTS, "mean"), atol=1e-5)


def test_a_sentence_transformers_layout_is_read(tmp_path: Path) -> None:
    """A sentence-transformers folder: the graph in onnx/, configs at the root."""
    root = tmp_path / "st"
    build_embedder(root / "onnx", pooling=None)
    (root / "1_Pooling").mkdir()
    config = {"word_embedding_dimension": 8, "pooling_mode_cls_token": True}
    (root / "1_Pooling" / "config.json").write_text(json.dumps(config))
    (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 4}))
    emb = OnnxEmbedder(root)
    assert emb.pooling == "cls" and emb.model.max_tokens == 4
    long, short = emb.embed(["red green blue fast slow", "red green"])
    # Cut to 4 word pieces: [CLS] red green [SEP] for both; CLS pooling sees position 0.
    np.testing.assert_allclose(long, short, atol=1e-6)


def test_the_model_id_follows_the_folder_content(tmp_path: Path) -> None:
    one = OnnxEmbedder(build_embedder(tmp_path / "m", seed=0).path)
    same = OnnxEmbedder(build_embedder(tmp_path / "copy" / "m", seed=0).path)
    other = OnnxEmbedder(build_embedder(tmp_path / "other" / "m", seed=1).path)
    assert one.model_id.startswith("onnx:m@") and one.model_id == same.model_id
    assert other.model_id != one.model_id
    pooled_cls = build_embedder(tmp_path / "cls" / "m", seed=0, pooling="cls").path
    assert OnnxEmbedder(pooled_cls).model_id != one.model_id


def test_the_setting_builds_it_and_a_store_refuses_another_export(tmp_path: Path) -> None:
    first = build_embedder(tmp_path / "first").path
    second = build_embedder(tmp_path / "second", seed=3).path
    settings = Settings(embed_provider="onnx", embed_model_path=first)
    emb = make_default_embedder(settings)
    assert isinstance(emb, OnnxEmbedder) and emb.folder.root == first.resolve()
    assert "onnx" in plugins.names(plugins.EMBEDDERS)
    store = tmp_path / "store"
    with Kredenc.open(store, embed_provider="onnx", embed_model_path=first) as kb:
        kb.remember_many([{"text": t} for t in TEXTS])
        hits = kb.search(TEXTS[2], k=2, mode="dense")
    assert hits[0].text == TEXTS[2]  # its own vector: cosine 1
    with (
        pytest.raises(FormatError, match="built with embedding model onnx:first@"),
        Kredenc.open(store, embed_provider="onnx", embed_model_path=second),
    ):
        pass


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: None, "does not exist or is not a folder"),
        (lambda p: p.mkdir(), "holds no model.onnx"),
        (lambda p: (p.mkdir(), (p / "model.onnx").write_bytes(b"x")), "holds no tokenizer.json"),
    ],
)
def test_a_missing_or_incomplete_folder_is_one_line_with_the_fix(
    tmp_path: Path, setup: object, message: str
) -> None:
    folder = tmp_path / "model"
    setup(folder)  # type: ignore[operator]
    with pytest.raises(InvalidInput, match=message) as caught:
        plugins.build(
            plugins.EMBEDDERS,
            "onnx",
            Settings(embed_provider="onnx", embed_model_path=folder),
            Embedder,
        )
    assert "\n" not in caught.value.message and caught.value.hint


def test_no_folder_configured_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="embed_model_path is empty"):
        OnnxEmbedder.from_settings(Settings(embed_provider="onnx"))


def test_a_graph_that_is_not_onnx_is_a_provider_error(tmp_path: Path) -> None:
    from kredenc.errors import ProviderError

    model = build_embedder(tmp_path / "m")
    (model.path / "model.onnx").write_bytes(b"not a graph")
    (model.path / "1_Pooling" / "config.json").unlink()  # no size stated: it loads to probe
    with pytest.raises(ProviderError, match="cannot load the ONNX embedder"):
        OnnxEmbedder(model.path)


def test_a_pipeline_with_a_dense_layer_is_sent_to_sentence_transformers(tmp_path: Path) -> None:
    model = build_embedder(tmp_path / "m")
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
    ]
    (model.path / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(InvalidInput, match="modules the ONNX graph lacks: Dense"):
        OnnxEmbedder(model.path)
