"""An 8-bit copy of the MiniLM graph for query embeddings, made once and cached.

Embedding one short query is bound by reading the transformer's weights, not by
arithmetic: 42 MB of float32 matrices per call. A turn arrives after an idle pause, when
the CPU runs slower (on the 2-vCPU box a query took 3.2 ms back to back and 7.0 ms
50 ms apart, ramping back over ~40 ms of work), so that read is what the recall reflex
pays on every turn. ``MatMulNBits`` with 8-bit weights in blocks of 32 and int8
arithmetic (``accuracy_level=4``) reads a quarter of it: 5.0 ms instead of 7.0 after a
pause, and 2.7 instead of 3.2 back to back, with cosine >= 0.999 to the float32 vectors
(measured in docs/benchmarks.md) on a CPU with VNNI int8 instructions. Where int8
arithmetic is slow the copy is no faster (an earlier machine measured it 6.3 against
5.3-6.5 ms), so each machine races the two graphs once and keeps its verdict.

Only queries use the copy; stored vectors come from the full model, so a store's
vectors and its embedding cache never depend on it. The copy is made with
onnxruntime's own quantizer (it needs the ``onnx`` package), checked against the full
model on probe sentences, raced against it, and written atomically under
``~/.cache/kredenc/models`` with its verdict, keyed by the source file and the
onnxruntime version; a store never refers to it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kredenc.errors import ProviderError

log = logging.getLogger(__name__)

#: Bump when the conversion changes, so old copies are not reused.
RECIPE = "matmulnbits-8bit-block32-sym-acc4-v2"  # v2: raced after pauses
MODEL_CACHE = Path("~/.cache/kredenc/models")
#: The copy must agree with the full model at least this well on every probe.
MIN_COSINE = 0.998
PROBES = (
    "When is the Opal feature freeze?",
    "The user prefers email over phone calls, confirmed by Aaron.",
    "Multi-head attention allows the model to jointly attend to information from "
    "different representation subspaces at different positions.",
    "Wie heißt die Hauptstadt von Ungarn? Budapest, a Duna partján.",
    "ok",
)

Graph = Callable[[Path], Callable[[list[str]], np.ndarray]]
#: The copy is used only where it is at least this much faster than the full model.
MIN_SPEEDUP = 1.1
_RACE_ROUNDS = 12
_RACE_PAUSE_S = 0.02


def cache_path(source: Path, cache_dir: Path | None = None) -> Path:
    """Where the 8-bit copy of ``source`` is kept."""
    import onnxruntime as ort

    st = source.stat()
    key = f"{RECIPE}|{ort.__version__}|{source.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return (cache_dir or MODEL_CACHE).expanduser() / f"minilm-q8-{digest}.onnx"


def query_model(source: Path, open_graph: Graph, cache_dir: Path | None = None) -> Path | None:
    """The 8-bit copy of ``source``, made now if it is not cached; None where it is not
    faster on this machine (int8 arithmetic needs VNNI-class instructions to pay; the
    verdict is cached beside the copy, so it is measured once).

    ``open_graph(model_path)`` loads a graph and returns its embed function; the copy
    is checked against ``source`` on :data:`PROBES` and raced against it. Raises
    :class:`ProviderError` when the copy cannot be made (``onnx`` missing, a graph the
    quantizer does not know) or disagrees with the full model.
    """
    target = cache_path(source, cache_dir)
    verdict = target.with_suffix(".json")
    if verdict.is_file():
        return target if target.is_file() else None
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".q8-", dir=target.parent) as tmp:
        scratch = Path(tmp)
        made = scratch / "q8.onnx"
        _convert(source, made, scratch)
        full, copy = open_graph(source), open_graph(made)
        probes = list(PROBES)
        worst = float(np.min(np.sum(copy(probes) * full(probes), axis=1)))
        if worst < MIN_COSINE:
            raise ProviderError(
                f"the 8-bit query model disagrees with the full model (cosine {worst:.4f})",
                "set embed_query_quantized = false in kredenc.toml",
            )
        full_ms, copy_ms = _race(full, copy)
        faster = full_ms >= MIN_SPEEDUP * copy_ms
        note = {
            "recipe": RECIPE,
            "source": str(source.resolve()),
            "full_ms": full_ms,
            "copy_ms": copy_ms,
            "cosine_min": worst,
        }
        (scratch / "verdict.json").write_text(json.dumps({**note, "used": faster}))
        if faster:
            os.replace(made, target)  # atomic: another process sees all of it or nothing
        os.replace(scratch / "verdict.json", verdict)  # written last: the copy is in place
    _drop_superseded(verdict, str(source.resolve()))
    log.info(
        "8-bit query model %s: %.2f ms a query against %.2f ms (worst probe cosine %.4f)",
        "made" if faster else "not faster here, not used",
        copy_ms,
        full_ms,
        worst,
    )
    return target if faster else None


def _drop_superseded(verdict: Path, source: str) -> None:
    """Delete the copies made earlier from the same model file (before a reinstall or an
    onnxruntime upgrade changed its key): 60 MB each, never used again. A process that
    still has one open keeps its graph in memory."""
    for other in verdict.parent.glob("minilm-q8-*.json"):
        if other == verdict:
            continue
        try:
            if json.loads(other.read_text(encoding="utf-8")).get("source") != source:
                continue
            other.with_suffix(".onnx").unlink(missing_ok=True)
            other.unlink()
        except (OSError, ValueError, AttributeError):
            continue  # another process's file, or not ours: leave it


def _race(
    full: Callable[[list[str]], np.ndarray], copy: Callable[[list[str]], np.ndarray]
) -> tuple[float, float]:
    """Median milliseconds of one short query on each graph, interleaved, each after a
    pause: queries arrive after idle time, when the weights' read costs most (back to
    back the two graphs were within 2 % of each other on one run here)."""
    times: dict[int, list[float]] = {0: [], 1: []}
    for i in range(_RACE_ROUNDS):
        for which, embed in ((0, full), (1, copy))[:: 1 if i % 2 else -1]:
            time.sleep(_RACE_PAUSE_S)
            started = time.perf_counter()
            embed([PROBES[i % len(PROBES)]])
            times[which].append((time.perf_counter() - started) * 1000)
    return statistics.median(times[0]), statistics.median(times[1])


def _convert(source: Path, out: Path, scratch: Path) -> None:
    root = logging.getLogger()
    handlers, root_level = list(root.handlers), root.level
    try:
        import onnx
        import onnxruntime as ort
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    except ImportError as exc:
        raise ProviderError(
            f"cannot make the 8-bit query model: {exc}", "pip install onnx onnx-ir"
        ) from exc
    finally:
        # The quantizer's module calls logging.basicConfig() on import: undo it, so the
        # application's root logger is not given a handler at INFO.
        root.handlers[:] = handlers
        root.setLevel(root_level)
    folded = scratch / "fp32.onnx"
    opts = ort.SessionOptions()
    # Basic optimisation folds the package's int8 weights (Cast + Mul) into float32
    # constants, which is what the quantizer reads.
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = str(folded)
    opts.log_severity_level = 3
    quiet = logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ort.InferenceSession(str(source), opts, providers=["CPUExecutionProvider"])
            quantizer = MatMulNBitsQuantizer(
                onnx.load(str(folded)),
                bits=8,
                block_size=32,
                is_symmetric=True,
                accuracy_level=4,
            )
            quantizer.process()
            quantizer.model.save_model_to_file(str(out), use_external_data_format=False)
    except Exception as exc:  # the quantizer raises whatever its graph walk meets
        raise ProviderError(
            f"cannot make the 8-bit query model: {exc}".splitlines()[0],
            "set embed_query_quantized = false in kredenc.toml",
        ) from exc
    finally:
        quiet.setLevel(level)
