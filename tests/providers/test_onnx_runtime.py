"""The session every onnxruntime model of kredenc shares: its options and the heap trim."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kredenc.errors import ProviderError
from kredenc.providers import onnx_runtime
from kredenc.providers.onnx_runtime import open_session, pad, release_free_heap
from kredenc.testing.tiny_models import build_embedder


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_embedder(tmp_path_factory.mktemp("tiny")).path / "model.onnx"


def test_session_options_bound_memory_and_threads(model: Path) -> None:
    session, _ = open_session(model, 3, what="tiny", hint="-")
    opts = session.get_session_options()
    assert opts.enable_mem_pattern is False  # issue 16: the per-shape plan peaked higher
    assert opts.enable_cpu_mem_arena is True  # the arena off peaked higher still
    assert opts.intra_op_num_threads == 3
    assert opts.inter_op_num_threads == 1
    assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    ids, mask = pad([[2, 5, 6, 3], [2, 7, 3]], 4)
    (hidden,) = session.run(
        None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    )
    assert hidden.shape == (2, 4, 8)


def test_loading_trims_the_heap(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(onnx_runtime, "_malloc_trim", lambda: calls.append)
    open_session(model, 1, what="tiny", hint="-")
    assert calls == [0]


def test_release_free_heap_without_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx_runtime, "_malloc_trim", lambda: None)
    assert release_free_heap() is False


def test_release_free_heap_on_glibc() -> None:
    if onnx_runtime._malloc_trim() is None:
        pytest.skip("no glibc malloc_trim here")
    assert release_free_heap() is True


def test_a_bad_model_file_is_one_provider_error(tmp_path: Path) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ProviderError, match="cannot load tiny from"):
        open_session(bad, 1, what="tiny", hint="-")
