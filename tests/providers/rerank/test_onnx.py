"""The ONNX-folder cross-encoder with a tiny model the test builds: scores equal a numpy
reference of its head, and search reorders by them (no torch)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from kredenc import plugins
from kredenc.config import Settings
from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.providers.rerank import make_reranker
from kredenc.providers.rerank.onnx import OnnxCrossEncoder
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.tiny_models import TinyModel, build_cross_encoder

PASSAGES = [
    "the river boat",
    "an apple tree grows by the river",
    "kestrel and heron",
    "the red apple and the green apple",
]


def reference(model: TinyModel, query: str, passages: list[str]) -> list[float]:
    tok = Tokenizer.from_file(str(model.path / "tokenizer.json"))
    w = model.weights
    out = []
    for p in passages:
        ids = np.array(tok.encode(query, p).ids)
        out.append(float((w["E"][ids].sum(0) @ w["w"])[0] + w["b"][0]))
    return out


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> TinyModel:
    return build_cross_encoder(tmp_path_factory.mktemp("ce") / "model")


def test_scores_match_a_numpy_reference_of_the_head(model: TinyModel) -> None:
    ce = OnnxCrossEncoder(model.path, batch_size=3)  # batches of 3: padding is exercised
    got = ce.score("which river", PASSAGES)
    assert got == pytest.approx(reference(model, "which river", PASSAGES), abs=1e-4)
    assert got[3] > got[1] > max(got[0], got[2])  # two apples > one apple > none
    assert ce.score("q", []) == []


def test_it_is_the_onnx_reranker_plugin(model: TinyModel) -> None:
    assert plugins.names(plugins.RERANKERS) == ["cross-encoder", "maxsim", "onnx"]
    made = make_reranker(f"onnx:{model.path}")
    assert isinstance(made, OnnxCrossEncoder) and made.folder.root == model.path.resolve()
    with pytest.raises(InvalidInput, match="needs a local model folder"):
        make_reranker("onnx")
    with pytest.raises(InvalidInput, match="does not exist or is not a folder"):
        make_reranker(f"onnx:{model.path}-missing")


def test_search_reorders_by_the_model(tmp_path: Path, model: TinyModel) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        kb.remember_many([{"text": t} for t in PASSAGES])
        plain = kb.search("the river", k=4)
        reranked = kb.search("the river", k=4, rerank=f"onnx:{model.path}")
    assert plain[0].text != PASSAGES[3]  # retrieval alone does not put it first
    assert [h.text for h in reranked][:2] == [PASSAGES[3], PASSAGES[1]]
    scores = [h.rerank for h in reranked]
    want = dict(zip(PASSAGES, reference(model, "the river", PASSAGES), strict=True))
    assert scores == pytest.approx([want[h.text] for h in reranked], abs=1e-4)


def test_the_setting_makes_it_the_default_reranker(tmp_path: Path, model: TinyModel) -> None:
    with Kredenc.open(
        tmp_path / "s", embedder=HashEmbedder(), durability="none", rerank=f"onnx:{model.path}"
    ) as kb:
        kb.remember_many([{"text": t} for t in PASSAGES])
        hits = kb.search("the river", k=2)
    assert hits[0].text == PASSAGES[3] and hits[0].rerank is not None


def test_two_logits_score_their_difference(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    folder = build_cross_encoder(tmp_path / "two").path
    graph = onnx.load(str(folder / "model.onnx")).graph
    # Append a second column: logits2 = [raw, 2 * raw]; the score is raw.
    two = numpy_helper.from_array(np.array([[1.0, 2.0]], dtype=np.float32), "two")
    graph.initializer.append(two)
    graph.node.append(helper.make_node("MatMul", ["logits", "two"], ["logits2"]))
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("logits2", TensorProto.FLOAT, ["b", 2]))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(folder / "model.onnx"))
    one = OnnxCrossEncoder(build_cross_encoder(tmp_path / "one").path)
    assert OnnxCrossEncoder(folder).score("apple", PASSAGES) == pytest.approx(
        one.score("apple", PASSAGES), abs=1e-4
    )


def test_a_broken_tokenizer_is_one_line(tmp_path: Path) -> None:
    folder = build_cross_encoder(tmp_path / "m").path
    (folder / "tokenizer.json").write_text("{not json")
    ce = OnnxCrossEncoder.from_settings(Settings(rerank=f"onnx:{folder}"))
    with pytest.raises(InvalidInput, match="is not a tokenizers file") as caught:
        ce.score("q", ["p"])
    assert "\n" not in caught.value.message


def test_the_folders_int8_copy_scores_when_asked_and_the_setting_asks(tmp_path: Path) -> None:
    """``model_quantized.onnx`` beside ``model.onnx`` (here another tiny head, so the two
    are told apart) scores with ``quantized``, and the ``rerank_quantized`` setting
    (default on) makes the plugin ask for it; a folder without one uses model.onnx."""
    from kredenc.providers.model_folder import QUANTIZED

    full = build_cross_encoder(tmp_path / "m", favour=("apple",))
    other = build_cross_encoder(tmp_path / "q", favour=("river",))
    (other.path / "model.onnx").replace(full.path / QUANTIZED)
    want_full = reference(full, "q", PASSAGES)
    want_q = reference(TinyModel(full.path, other.vocab, other.weights), "q", PASSAGES)
    assert OnnxCrossEncoder(full.path).score("q", PASSAGES) == pytest.approx(want_full, abs=1e-4)
    assert OnnxCrossEncoder(full.path, quantized=True).score("q", PASSAGES) == pytest.approx(
        want_q, abs=1e-4
    )
    made = make_reranker(f"onnx:{full.path}")
    assert isinstance(made, OnnxCrossEncoder) and made.folder.model.name == QUANTIZED
    off = make_reranker(f"onnx:{full.path}", Settings(rerank_quantized=False))
    assert isinstance(off, OnnxCrossEncoder) and off.folder.model.name == "model.onnx"
    assert made.folder.model_id("rerank") != off.folder.model_id("rerank")
    alone = build_cross_encoder(tmp_path / "alone")
    assert OnnxCrossEncoder(alone.path, quantized=True).folder.model.name == "model.onnx"


def test_max_tokens_cuts_pairs_below_the_folders_length(tmp_path: Path) -> None:
    model = build_cross_encoder(tmp_path / "m", favour=("apple",))
    long_tail = "the river boat " * 10 + "apple"
    cut = OnnxCrossEncoder(model.path, max_tokens=8).score("q", [long_tail])
    whole = OnnxCrossEncoder(model.path).score("q", [long_tail])
    assert whole[0] - cut[0] > 9  # the apple at the end is cut off (it adds 10)
