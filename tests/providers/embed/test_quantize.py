"""The 8-bit query graph: made once, cached, checked against the full model, raced
against it, and never able to break a query (every failure falls back to the full
model with a WARNING).

Whether the copy is faster depends on the CPU (int8 arithmetic), so the tests that use
it set ``MIN_SPEEDUP`` to 0; the race's verdict is tested both ways by forcing it."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from kredenc.config import Settings
from kredenc.engine import make_default_embedder
from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.embed import quantize
from kredenc.providers.embed.minilm import MiniLMEmbedder, default_model_path

QUERIES = [
    "When is the Opal feature freeze?",
    "How many parallel attention heads does the base Transformer use?",
    "birthday of Lena Petrov",
    "Milyen nyelven beszél a felhasználó?",
    "x",
]


@pytest.fixture(scope="module", autouse=True)
def always_faster() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(quantize, "MIN_SPEEDUP", 0.0)
        yield


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def embedder(cache: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder(intra_op_num_threads=1, model_cache=cache)


def test_query_vectors_agree_with_the_full_model(embedder: MiniLMEmbedder, cache: Path) -> None:
    queries = np.stack([embedder.embed_query(q) for q in QUERIES])
    full = embedder.embed(QUERIES)
    assert embedder.query_model == "8-bit"
    cosines = (queries * full).sum(axis=1)
    assert cosines.min() >= quantize.MIN_COSINE, cosines
    assert not np.array_equal(queries, full)  # a different graph, not the same one twice
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)
    target = quantize.cache_path(default_model_path(), cache)
    verdict = target.with_suffix(".json")
    assert sorted(cache.iterdir()) == sorted([target, verdict])
    seen = json.loads(verdict.read_text())
    assert seen["used"] and seen["cosine_min"] >= quantize.MIN_COSINE
    assert seen["full_ms"] > 0 and seen["copy_ms"] > 0
    # The copy holds a quarter of the matrices' bytes: the file is smaller than the
    # folded float32 graph (word embeddings, kept in float32, are most of it).
    assert target.stat().st_size < 70_000_000


def test_a_cached_copy_is_reused(embedder: MiniLMEmbedder, cache: Path) -> None:
    embedder.embed_query("warm")
    target = quantize.cache_path(default_model_path(), cache)
    before = target.stat().st_mtime_ns
    again = MiniLMEmbedder(intra_op_num_threads=1, model_cache=cache)
    assert again.query_model == "not loaded"
    np.testing.assert_array_equal(again.embed_query(QUERIES[0]), embedder.embed_query(QUERIES[0]))
    assert target.stat().st_mtime_ns == before
    assert len(list(cache.iterdir())) == 2  # the copy and its verdict; no scratch left


def test_unwritable_cache_falls_back_to_the_full_model(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    e = MiniLMEmbedder(intra_op_num_threads=1, model_cache=blocker / "models")
    with caplog.at_level(logging.WARNING, logger="kredenc.providers.embed.minilm"):
        vec = e.embed_query(QUERIES[0])
        e.embed_query(QUERIES[1])
    np.testing.assert_array_equal(vec, e.embed_one(QUERIES[0]))
    assert e.query_model == "full"
    warnings = [r for r in caplog.records if "queries use the full MiniLM model" in r.message]
    assert len(warnings) == 1  # said once, not per query


def test_a_copy_that_disagrees_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(quantize, "MIN_COSINE", 1.01)  # no 8-bit graph can pass this
    with pytest.raises(ProviderError, match="disagrees with the full model"):
        quantize.query_model(default_model_path(), _open_graph, tmp_path)
    assert list(tmp_path.iterdir()) == []  # neither the copy nor its scratch is left
    e = MiniLMEmbedder(intra_op_num_threads=1, model_cache=tmp_path)
    with caplog.at_level(logging.WARNING):
        np.testing.assert_array_equal(e.embed_query("ok"), e.embed_one("ok"))
    assert "disagrees" in caplog.text


def test_a_copy_that_is_not_faster_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(quantize, "MIN_SPEEDUP", 100.0)  # no copy is 100x faster
    assert quantize.query_model(default_model_path(), _open_graph, tmp_path) is None
    target = quantize.cache_path(default_model_path(), tmp_path)
    assert list(tmp_path.iterdir()) == [target.with_suffix(".json")]
    assert json.loads(target.with_suffix(".json").read_text())["used"] is False

    def no_conversion(*_: object) -> None:
        raise AssertionError("the verdict is cached: nothing is converted again")

    monkeypatch.setattr(quantize, "_convert", no_conversion)
    e = MiniLMEmbedder(intra_op_num_threads=1, model_cache=tmp_path)
    with caplog.at_level(logging.INFO):
        np.testing.assert_array_equal(e.embed_query("ok"), e.embed_one("ok"))
    assert e.query_model == "full" and not any(r.levelno >= logging.WARNING for r in caplog.records)


def test_copies_superseded_for_the_same_model_file_are_deleted(tmp_path: Path) -> None:
    source = str(default_model_path().resolve())
    stale = tmp_path / "minilm-q8-0000000000000000aaaa"  # an older onnxruntime's copy
    stale.with_suffix(".onnx").write_bytes(b"old graph")
    stale.with_suffix(".json").write_text(json.dumps({"source": source, "used": True}))
    other = tmp_path / "minilm-q8-0000000000000000bbbb"  # another model file's copy
    other.with_suffix(".onnx").write_bytes(b"another model's graph")
    other.with_suffix(".json").write_text(json.dumps({"source": "/elsewhere/model.onnx"}))
    made = quantize.query_model(default_model_path(), _open_graph, tmp_path)
    assert made is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [
            made.name,
            made.with_suffix(".json").name,
            *(other.with_suffix(s).name for s in (".json", ".onnx")),
        ]
    )
    assert json.loads(made.with_suffix(".json").read_text())["source"] == source


def test_a_corrupt_cached_copy_falls_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    target = quantize.cache_path(default_model_path(), tmp_path)
    target.write_bytes(b"not an onnx graph")
    target.with_suffix(".json").write_text(json.dumps({"used": True}))
    e = MiniLMEmbedder(intra_op_num_threads=1, model_cache=tmp_path)
    with caplog.at_level(logging.WARNING):
        np.testing.assert_array_equal(e.embed_query("ok"), e.embed_one("ok"))
    assert e.query_model == "full" and "cannot load MiniLM" in caplog.text


def test_switched_off_queries_use_the_full_model(tmp_path: Path) -> None:
    e = MiniLMEmbedder(intra_op_num_threads=1, quantized_queries=False, model_cache=tmp_path)
    np.testing.assert_array_equal(e.embed_query(QUERIES[0]), e.embed_one(QUERIES[0]))
    assert list(tmp_path.iterdir()) == [] and e.query_model == "full"


def test_making_the_copy_leaves_the_root_logger_alone(tmp_path: Path) -> None:
    """onnxruntime's quantizer configures the root logger when imported; a library must
    not, so the copy is made in a fresh process and the root logger checked after."""
    code = (
        "import logging, sys\n"
        "from pathlib import Path\n"
        "from kredenc.providers.embed import quantize\n"
        "from kredenc.providers.embed.minilm import MiniLMEmbedder\n"
        "quantize.MIN_SPEEDUP = 0.0\n"
        f"e = MiniLMEmbedder(intra_op_num_threads=1, model_cache=Path({str(tmp_path)!r}))\n"
        "e.embed_query('ok')\n"
        "root = logging.getLogger()\n"
        "print(e.query_model, len(root.handlers), root.level)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["8-bit", "0", str(logging.WARNING)]
    assert out.stderr == ""  # nothing logged at INFO to the terminal


def test_setting_reaches_the_embedder() -> None:
    on = make_default_embedder(Settings())
    off = make_default_embedder(Settings(embed_query_quantized=False))
    assert isinstance(on, MiniLMEmbedder) and isinstance(off, MiniLMEmbedder)
    assert on.quantized_queries and not off.quantized_queries
    assert on.query_threads == 1  # the default: a short query gains nothing from two
    assert make_default_embedder(Settings(embed_query_threads=3)).query_threads == 3  # type: ignore[attr-defined]


def _threads(runtime: object) -> int:
    return int(runtime.session.get_session_options().intra_op_num_threads)  # type: ignore[attr-defined]


def test_queries_run_on_their_own_threads(cache: Path) -> None:
    e = MiniLMEmbedder(intra_op_num_threads=2, query_threads=1, model_cache=cache)
    e.embed_query(QUERIES[0])
    e.embed(QUERIES[:1])
    assert e.query_model == "8-bit"
    assert _threads(e._query) == 1 and _threads(e._runtime) == 2
    with pytest.raises(InvalidInput, match="query_threads"):
        MiniLMEmbedder(query_threads=0)


def test_one_thread_queries_run_side_by_side_not_coalesced(cache: Path) -> None:
    """One-thread query runs are not batched: eight at once would run on one thread."""
    one = MiniLMEmbedder(query_threads=1, model_cache=cache)
    assert one.coalesce_queries is False
    assert MiniLMEmbedder(query_threads=2, model_cache=cache).coalesce_queries is True
    with ThreadPoolExecutor(4) as pool:
        rows = list(pool.map(one.embed_query, QUERIES * 2))
    for text, row in zip(QUERIES * 2, rows, strict=True):
        np.testing.assert_array_equal(row, one.embed_queries([text])[0])
    assert one.query_coalescer.runs == 0  # never went through it


def _open_graph(model: Path) -> Callable[[list[str]], np.ndarray]:
    return MiniLMEmbedder(intra_op_num_threads=1, model_path=model, quantized_queries=False).embed
