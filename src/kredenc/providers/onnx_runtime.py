"""What every onnxruntime model of kredenc shares: the session (CPU, no spinning
threads), the runtime's exceptions, padding a batch and pooling token vectors.

Used by the bundled MiniLM (``embed/minilm.py``) and by the models read from a folder
(``model_folder.py``: the ``onnx`` embedder and cross-encoder). onnxruntime is imported
on first use only: ``import kredenc`` stays fast.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kredenc.errors import InvalidInput, ProviderError

IdArray = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float32]

#: How token vectors become one vector: the modes of sentence-transformers' Pooling.
POOLINGS = ("mean", "cls", "max", "mean_sqrt_len", "lasttoken")


def ort_errors(ort: Any) -> tuple[type[BaseException], ...]:
    """onnxruntime's own exceptions derive from Exception directly; collect them."""
    state = getattr(getattr(ort, "capi", None), "onnxruntime_pybind11_state", None)
    names = (
        "Fail",
        "InvalidArgument",
        "NoSuchFile",
        "NoModel",
        "EngineError",
        "RuntimeException",
        "InvalidProtobuf",
        "ModelLoaded",
        "NotImplemented",
        "InvalidGraph",
        "EPFail",
    )
    found = [getattr(state, n) for n in names if isinstance(getattr(state, n, None), type)]
    return (*found, RuntimeError, OSError, ValueError)


def refuse_after_usearch() -> None:
    """onnxruntime 1.32 segfaults on import once usearch's extension is loaded (both
    carry libstdc++ locale symbols); fail with a message instead of crashing."""
    if "usearch.compiled" in sys.modules and "onnxruntime" not in sys.modules:
        raise ProviderError(
            "onnxruntime must be imported before usearch in this process "
            "(importing it after usearch crashes the interpreter)",
            "import onnxruntime before usearch, e.g. at the top of the module that imports usearch",
        )


def import_ort(hint: str) -> Any:
    """The onnxruntime module (``hint``: what to do when it is missing)."""
    refuse_after_usearch()
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise ProviderError(f"onnxruntime is missing: {exc}", hint) from exc
    return ort


def open_session(
    model: Path, threads: int, *, what: str, hint: str
) -> tuple[Any, tuple[type[BaseException], ...]]:
    """An onnxruntime CPU session over ``model`` and the exceptions it raises. A file
    that does not load is one :class:`ProviderError` naming ``what`` and ``model``."""
    ort = import_ort(hint)
    errors = ort_errors(ort)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    # Spinning threads burn the other core while waiting; on a small shared machine
    # a query took 21-31 ms with spinning and 6-10 ms without (measured here).
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    # The memory pattern plans one block for all of a run's activations per input shape
    # and the arena keeps the largest; without it the arena reuses freed blocks within a
    # run. Embedding SciFact's abstracts peaked 130 MB lower and no slower (issue 16,
    # benchmarks/probe_ingest_memory.py).
    opts.enable_mem_pattern = False
    try:
        session = ort.InferenceSession(
            str(model), sess_options=opts, providers=["CPUExecutionProvider"]
        )
    except errors as exc:
        raise ProviderError(
            f"cannot load {what} from {model}: {exc}".splitlines()[0], hint
        ) from exc
    # Loading folds the int8 weights into float ones and leaves the scratch free in
    # malloc's heap, still resident (about 60 MB for MiniLM): hand it back.
    release_free_heap()
    return session, errors


def release_free_heap() -> bool:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim``); False
    where the C library has none (musl, macOS), which is harmless."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@cache
def _malloc_trim() -> Any:
    name = ctypes.util.find_library("c") if sys.platform.startswith("linux") else None
    if name is None:
        return None
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None)
    except OSError:
        return None


def pad(rows: Sequence[Sequence[int]], width: int) -> tuple[IdArray, IdArray]:
    """``rows`` right-padded with 0 to ``width``: (ids, attention mask)."""
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for r, row in enumerate(rows):
        ids[r, : len(row)] = row
        mask[r, : len(row)] = 1
    return ids, mask


def pool(hidden: Floats, mask: IdArray, mode: str = "mean") -> Floats:
    """One vector per row from token vectors ``hidden`` (batch x seq x dim) under the
    attention ``mask``, by ``mode`` (:data:`POOLINGS`); a 2-d output is already pooled."""
    if hidden.ndim == 2:
        return hidden
    if mode == "cls":
        return np.ascontiguousarray(hidden[:, 0, :])
    if mode == "lasttoken":
        last = np.clip(mask.sum(axis=1) - 1, 0, None)
        return np.ascontiguousarray(hidden[np.arange(hidden.shape[0]), last, :])
    weights = mask.astype(np.float32)[:, :, None]
    if mode == "max":
        masked = np.where(weights > 0, hidden, np.float32(-1e9))
        maxed: Floats = masked.max(axis=1).astype(np.float32, copy=False)
        return maxed
    summed = (hidden * weights).sum(axis=1)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    if mode == "mean_sqrt_len":
        counts = np.sqrt(counts)
    elif mode != "mean":
        raise InvalidInput(f"unknown pooling {mode!r}", f"use one of {', '.join(POOLINGS)}")
    pooled: Floats = (summed / counts).astype(np.float32, copy=False)
    return pooled
