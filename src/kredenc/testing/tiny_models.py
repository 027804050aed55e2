"""Tiny model folders for tests: an ONNX embedder and an ONNX cross-encoder built here,
from weights the caller can read back, with a WordPiece ``tokenizer.json``.

They have the layout of a sentence-transformers folder's ONNX export (``model.onnx``,
``tokenizer.json``, ``1_Pooling/config.json``), so the local-model providers
(``providers/embed/onnx.py``, ``providers/rerank/onnx.py``) read them as they read a
real one, and a test computes the expected vectors and scores with numpy from
:attr:`TinyModel.weights`. Built with the ``onnx`` package's helper API (a runtime
dependency of kredenc: the 8-bit query graph needs it); nothing is downloaded.

:func:`save_tiny_bert` saves a tiny BERT (an encoder, or a cross-encoder for
``providers/rerank``) and :func:`build_sentence_transformers` one as a sentence-transformers
folder (``providers/embed/sbert.py``); both need torch, the ``rerank`` extra.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
#: Words of the tiny vocabulary (anything else is ``[UNK]``).
WORDS = tuple(
    [
        "the",
        "a",
        "of",
        "and",
        "in",
        "on",
        "is",
        "to",
        "what",
        "which",
        "who",
        "apple",
        "apples",
        "banana",
        "cherry",
        "river",
        "boat",
        "kestrel",
        "heron",
        "bird",
        "fish",
        "red",
        "green",
        "blue",
        "fast",
        "slow",
        "paris",
        "london",
        "city",
        "capital",
        "tree",
        "seed",
        "fruit",
        "grows",
        "water",
        "sea",
        "ship",
        "sail",
        "wind",
        "stone",
        "bridge",
        "old",
        "new",
        "small",
        "large",
    ]
)
OPSET = 17
IR_VERSION = 8

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class TinyModel:
    """A model folder and the arrays its graph computes with."""

    path: Path
    vocab: dict[str, int]
    weights: dict[str, F32]


def vocabulary(words: Sequence[str] = WORDS) -> dict[str, int]:
    return {t: i for i, t in enumerate([*SPECIAL, *dict.fromkeys(words)])}


def write_tokenizer(folder: Path, vocab: dict[str, int], *, max_length: int = 64) -> None:
    """``tokenizer.json``: BERT WordPiece, lower-cased, [CLS] a [SEP] b [SEP] for pairs."""
    from tokenizers import BertWordPieceTokenizer

    tok = BertWordPieceTokenizer(vocab, lowercase=True)
    tok.enable_truncation(max_length=max_length)
    tok.save(str(folder / "tokenizer.json"))


def _save(graph: object, path: Path) -> None:
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])  # type: ignore[arg-type]
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def _inputs(with_types: bool) -> list[object]:
    from onnx import TensorProto, helper

    names = ["input_ids", "attention_mask", *(["token_type_ids"] if with_types else [])]
    return [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in names]


def build_embedder(
    folder: Path,
    *,
    dim: int = 8,
    pooling: str | None = "mean",
    seed: int = 0,
    token_types: bool = True,
    max_seq_length: int | None = None,
) -> TinyModel:
    """An embedder folder: ``last_hidden_state = tanh(E[input_ids] @ W)`` (per token,
    shape batch x seq x ``dim``), pooled by the reader. ``pooling``: the mode written to
    ``1_Pooling/config.json`` ("mean", "cls", "max"), or None for no config (mean).
    ``weights``: ``E`` and ``W``."""
    from onnx import TensorProto, helper, numpy_helper

    folder.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary()
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(len(vocab), dim)).astype(np.float32)
    proj = rng.normal(size=(dim, dim)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["E", "input_ids"], ["tok"], axis=0),
        helper.make_node("MatMul", ["tok", "W"], ["lin"]),
        helper.make_node("Tanh", ["lin"], ["last_hidden_state"]),
    ]
    out = helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, ["batch", "seq", dim]
    )
    graph = helper.make_graph(
        nodes,
        "tiny-embedder",
        _inputs(token_types),  # type: ignore[arg-type]
        [out],
        initializer=[numpy_helper.from_array(emb, "E"), numpy_helper.from_array(proj, "W")],
    )
    _save(graph, folder / "model.onnx")
    write_tokenizer(folder, vocab)
    if pooling is not None:
        (folder / "1_Pooling").mkdir(exist_ok=True)
        config = {
            "word_embedding_dimension": dim,
            "pooling_mode_cls_token": pooling == "cls",
            "pooling_mode_mean_tokens": pooling == "mean",
            "pooling_mode_max_tokens": pooling == "max",
            "pooling_mode_mean_sqrt_len_tokens": False,
        }
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(config))
    if max_seq_length is not None:
        sbert = {"max_seq_length": max_seq_length, "do_lower_case": False}
        (folder / "sentence_bert_config.json").write_text(json.dumps(sbert))
    return TinyModel(folder, vocab, {"E": emb, "W": proj})


def build_cross_encoder(
    folder: Path, *, favour: Sequence[str] = ("apple",), seed: int = 1, dim: int = 4
) -> TinyModel:
    """A cross-encoder folder: ``logits = sum_t E[input_ids_t] @ w + b`` (batch x 1).
    ``E``'s [PAD] row is zero, so padding changes nothing; ``w`` and ``E`` are set so
    that every word in ``favour`` adds 10 to a pair's score and others little.
    ``weights``: ``E``, ``w`` and ``b``."""
    from onnx import TensorProto, helper, numpy_helper

    folder.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary()
    rng = np.random.default_rng(seed)
    emb = (rng.normal(size=(len(vocab), dim)) * 0.05).astype(np.float32)
    emb[vocab["[PAD]"]] = 0.0
    head = np.zeros((dim, 1), dtype=np.float32)
    head[0, 0] = 1.0
    for word in favour:
        emb[vocab[word], 0] = 10.0
    bias = np.array([0.5], dtype=np.float32)
    nodes = [
        helper.make_node("Gather", ["E", "input_ids"], ["tok"], axis=0),
        helper.make_node("ReduceSum", ["tok", "axes"], ["summed"], keepdims=0),
        helper.make_node("MatMul", ["summed", "w"], ["raw"]),
        helper.make_node("Add", ["raw", "b"], ["logits"]),
    ]
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    graph = helper.make_graph(
        nodes,
        "tiny-cross-encoder",
        _inputs(True),  # type: ignore[arg-type]
        [out],
        initializer=[
            numpy_helper.from_array(emb, "E"),
            numpy_helper.from_array(head, "w"),
            numpy_helper.from_array(bias, "b"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "axes"),
        ],
    )
    _save(graph, folder / "model.onnx")
    write_tokenizer(folder, vocab)
    return TinyModel(folder, vocab, {"E": emb, "w": head, "b": bias})


def save_tiny_bert(
    folder: Path,
    *,
    hidden: int = 16,
    intermediate: int = 32,
    num_labels: int = 0,
    layers: int = 1,
    heads: int = 2,
) -> Path:
    """A small BERT (one layer unless ``layers``; random weights, seed 0; MiniLM's
    vocabulary) and its tokenizer saved to ``folder`` with transformers'
    ``save_pretrained``: a plain encoder, or with ``num_labels`` a sequence classifier
    (a cross-encoder for sentence-transformers' ``CrossEncoder``). With hidden 384,
    intermediate 1536, 6 layers and 12 heads it has the shape, and so the cost, of
    ms-marco-MiniLM-L-6-v2 (bench_ask's reranker). Needs the ``rerank`` extra (torch,
    transformers)."""
    from importlib import resources

    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import (  # type: ignore[attr-defined]
        BertConfig,
        BertForSequenceClassification,
        BertModel,
        BertTokenizerFast,
    )

    torch.manual_seed(0)
    vocab = resources.files("kredenc.providers.embed").joinpath("data/minilm-vocab.txt")
    words = vocab.read_text(encoding="utf-8").splitlines()
    # Built from the vocabulary itself: transformers 5 ignores ``vocab_file`` and leaves
    # a five-token tokenizer (every word [UNK], fewer tokens than MiniLM's pieces).
    pieces = BertWordPieceTokenizer({w: i for i, w in enumerate(words)}, lowercase=True)
    tokenizer = BertTokenizerFast(tokenizer_object=pieces._tokenizer, do_lower_case=True)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
    )
    if num_labels:
        config.num_labels = num_labels  # the setter makes the label maps too
    model = BertForSequenceClassification(config) if num_labels else BertModel(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def export_cross_encoder_onnx(
    bert: Path, folder: Path, *, max_seq_length: int = 512, quantized: bool = True
) -> Path:
    """The sequence classifier :func:`save_tiny_bert` saved in ``bert`` exported to an
    ONNX cross-encoder folder ``folder`` (``model.onnx`` with ``logits``, its
    ``tokenizer.json`` and a ``sentence_bert_config.json`` with ``max_seq_length``), and
    with ``quantized`` its int8 copy (onnxruntime's ``quantize_dynamic``, int8 weights)
    as ``model_quantized.onnx``, the name optimum's quantizer writes. Needs torch.

    The attention is exported as BERT's classic graph (``attn_implementation="eager"``:
    mask add, softmax), the one onnxruntime's BERT fusions are written for;
    transformers 5's default (SDPA) exports a Where/IsNaN guard over every layer's
    attention weights that costs a third of an int8 rerank (docs/benchmarks.md, "The
    reranker's stand-in")."""
    import warnings

    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        bert, attn_implementation="eager"
    ).eval()
    tokenizer = AutoTokenizer.from_pretrained(bert)
    sample = tokenizer(["a query"], ["a passage"], return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch", 1: "seq"} for n in names} | {"logits": {0: "batch"}}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's deprecation notes
        torch.onnx.export(
            model,
            tuple(sample[n] for n in names),
            str(folder / "model.onnx"),
            input_names=names,
            output_names=["logits"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )
    tokenizer.backend_tokenizer.save(str(folder / "tokenizer.json"))
    sbert = {"max_seq_length": max_seq_length, "do_lower_case": False}
    (folder / "sentence_bert_config.json").write_text(json.dumps(sbert))
    if quantized:
        from kredenc.providers.model_folder import QUANTIZED

        quantize_int8(folder / "model.onnx", folder / QUANTIZED)
    return folder


def quantize_int8(source: Path, target: Path) -> Path:
    """``source``'s int8 copy (dynamic quantization: int8 weights, activations quantized
    per batch) at ``target``; onnxruntime's quantizer, quiet."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # "consider pre-processing" on every call
    try:
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8)
    finally:
        root.setLevel(level)
    return target


def build_sentence_transformers(root: Path) -> Path:
    """A tiny one-layer BERT (:func:`save_tiny_bert`) saved as a sentence-transformers
    folder with mean pooling under ``root / "st"``, returned. Needs the ``rerank`` extra
    (torch, sentence-transformers)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as models

    save_tiny_bert(root / "bert")
    word = models.Transformer(str(root / "bert"), max_seq_length=32)
    pooling = models.Pooling(16, pooling_mode="mean")
    SentenceTransformer(modules=[word, pooling], device="cpu").save(str(root / "st"))
    return root / "st"
