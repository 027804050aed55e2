"""The cross-encoder reranker, end to end, with a tiny model the test builds itself."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from kredenc import plugins
from kredenc.config import Settings
from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.providers.rerank import CrossEncoderReranker, make_reranker
from kredenc.testing.distributions import write_distribution
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.tiny_models import save_tiny_bert

LONGEST = '''
from kredenc.providers.rerank import Reranker


class LongestFirst(Reranker):
    """A third-party reranker: ``rerank = "longest:<bonus word>"``."""

    def __init__(self, bonus):
        self.name = f"longest:{bonus}"
        self.bonus = bonus

    @classmethod
    def from_settings(cls, settings):
        return cls(settings.rerank.partition(":")[2])

    def score(self, query, passages):
        return [len(p) + (1000.0 if self.bonus in p else 0.0) for p in passages]
'''


def test_no_reranker_by_default() -> None:
    assert make_reranker(None) is None
    assert make_reranker("none") is None
    assert Settings().rerank == "none"


def test_the_cross_encoder_is_the_builtin_plugin() -> None:
    assert plugins.names(plugins.RERANKERS) == ["cross-encoder", "maxsim", "onnx"]
    named = make_reranker("cross-encoder:/some/path")
    bare = make_reranker(" /some/other/path ")
    assert isinstance(named, CrossEncoderReranker) and named.model_path == "/some/path"
    assert isinstance(bare, CrossEncoderReranker) and bare.model_path == "/some/other/path"
    with pytest.raises(InvalidInput, match="needs a local model path"):
        make_reranker("cross-encoder")


def test_a_reranker_from_a_package_is_used_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = write_distribution(
        tmp_path / "site",
        "kredenc-longest",
        {plugins.RERANKERS: {"longest": "kredenc_longest:LongestFirst"}},
        {"kredenc_longest": LONGEST},
    )
    monkeypatch.syspath_prepend(str(site))
    plugins.refresh()
    try:
        texts = ["kestrel", "kestrel over the river", "kestrel budget", "a kestrel, a heron"]
        with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
            kb.remember_many([{"text": t} for t in texts])
            hits = kb.search("kestrel", k=4, rerank="longest:heron")
        assert [h.text for h in hits][:2] == ["a kestrel, a heron", "kestrel over the river"]
        assert hits[0].rerank == 1000.0 + len("a kestrel, a heron")
    finally:
        sys.modules.pop("kredenc_longest", None)
        monkeypatch.undo()
        plugins.refresh()


def test_a_model_that_is_not_on_disk_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    with pytest.raises(InvalidInput, match="not a local path"):
        CrossEncoderReranker(str(tmp_path / "missing")).score("q", ["p"])


def test_a_name_no_reranker_has_is_refused_naming_those_there_are() -> None:
    """'--rerank bogus' was read as a model path ("is not a local path, download the
    model once…"): a bare word is a mistyped name."""
    with pytest.raises(InvalidInput, match="unknown reranker 'bogus'") as caught:
        make_reranker("bogus")
    for name in ("cross-encoder", "maxsim", "onnx"):
        assert name in caught.value.hint


def test_a_folder_without_a_cross_encoder_is_one_line_naming_it(tmp_path: Path) -> None:
    """An empty folder gave transformers' own message, exit 1, no hint."""
    pytest.importorskip("sentence_transformers")
    with pytest.raises(InvalidInput, match="holds no cross-encoder model") as caught:
        CrossEncoderReranker(str(tmp_path)).score("q", ["p"])
    assert str(tmp_path) in caught.value.message and "\n" not in str(caught.value)
    assert "config.json" in caught.value.hint


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1-layer BERT cross-encoder with the bundled MiniLM vocabulary, saved to disk."""
    pytest.importorskip("sentence_transformers")
    out = tmp_path_factory.mktemp("tiny-cross-encoder")
    return save_tiny_bert(out, hidden=32, intermediate=64, num_labels=1)


def test_reranking_reorders_hits_by_the_model(tmp_path: Path, tiny_cross_encoder: Path) -> None:
    model = CrossEncoderReranker(str(tiny_cross_encoder))
    texts = [f"note {i} about the kestrel river and the budget meeting" for i in range(12)]
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        kb.remember_many([{"text": t} for t in texts])
        plain = kb.search("kestrel budget", k=5)
        reranked = kb.search("kestrel budget", k=5, rerank=str(tiny_cross_encoder))
    assert all(h.rerank is None for h in plain)
    assert len(reranked) == 5
    scores = [h.rerank for h in reranked]
    assert all(s is not None for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    # The scores are the model's: scoring the same pairs directly gives the same numbers.
    direct = model.score("kestrel budget", [h.text for h in reranked])
    assert direct == pytest.approx(scores, rel=1e-5)
    # The reranker rescored the fused candidates (rerank_depth), not just the top k.
    assert {h.id for h in reranked} <= {h.id for h in kb_hits(tmp_path)}


def kb_hits(tmp_path: Path) -> list[object]:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        return list(kb.search("kestrel budget", k=30))


def test_the_onnx_export_scores_as_torch_does_and_its_int8_copy_is_near(
    tmp_path: Path, tiny_cross_encoder: Path
) -> None:
    """``export_cross_encoder_onnx`` (bench_ask's ``minilm-shaped-onnx``): the ONNX
    cross-encoder reads the export and scores the pairs as sentence-transformers does on
    torch, MiniLM's word pieces included; the int8 copy beside it scores near them."""
    from kredenc.providers.model_folder import QUANTIZED
    from kredenc.providers.rerank.onnx import OnnxCrossEncoder
    from kredenc.testing.tiny_models import export_cross_encoder_onnx

    folder = export_cross_encoder_onnx(tiny_cross_encoder, tmp_path / "onnx")
    assert (folder / QUANTIZED).is_file()
    passages = [f"note {i}: the kestrel's budget {'meeting ' * i}moved" for i in range(6)]
    torch_scores = CrossEncoderReranker(str(tiny_cross_encoder)).score("kestrel budget", passages)
    fp32 = OnnxCrossEncoder(folder).score("kestrel budget", passages)
    int8 = OnnxCrossEncoder(folder, quantized=True).score("kestrel budget", passages)
    # sentence-transformers puts one logit through a sigmoid; the ONNX reader keeps the
    # logit (the same order)
    assert [1 / (1 + math.exp(-v)) for v in fp32] == pytest.approx(torch_scores, abs=1e-5)
    assert int8 == pytest.approx(fp32, abs=0.05) and int8 != fp32
    pieces = OnnxCrossEncoder(folder).model.batches([("kestrel", "budget")], 1)
    ((_, batch),) = list(pieces)
    assert 100 not in batch.ids  # [UNK]: the tokenizer has MiniLM's whole vocabulary
    # BERT's classic attention graph: no SDPA export guard (IsNaN, then Where) per layer
    onnx = pytest.importorskip("onnx")
    ops = [node.op_type for node in onnx.load(str(folder / "model.onnx")).graph.node]
    assert "Softmax" in ops and "IsNaN" not in ops
