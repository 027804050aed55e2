from __future__ import annotations

import gzip
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from kredenc.testing.retrievers import OverlapRetriever

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eval"


@pytest.fixture
def retriever() -> OverlapRetriever:
    return OverlapRetriever()


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def gzipped(tmp_path: Path) -> Callable[[str], Path]:
    """Copy a fixture file or folder under tmp_path with every file gzipped (name.gz)."""

    def make(name: str) -> Path:
        src = FIXTURES / name
        dst = tmp_path / "gz" / name
        files = [src] if src.is_file() else [p for p in src.rglob("*") if p.is_file()]
        for f in files:
            rel = f.relative_to(src.parent if src.is_file() else src)
            out = (dst.parent if src.is_file() else dst) / (str(rel) + ".gz")
            out.parent.mkdir(parents=True, exist_ok=True)
            with f.open("rb") as fin, gzip.open(out, "wb") as fout:
                shutil.copyfileobj(fin, fout)
        return dst

    return make


@pytest.fixture
def shared_data() -> Path:
    """The shared evaluation data (../shared/data or $KREDENC_DATA); skip when absent."""
    env = os.environ.get("KREDENC_DATA")
    root = Path(env) if env else Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
    if not root.is_dir():
        pytest.skip(f"shared evaluation data not found at {root} (set KREDENC_DATA)")
    return root.resolve()
