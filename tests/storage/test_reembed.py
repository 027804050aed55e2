"""kredenc reembed's storage half: a store moves to another embedding model, with every
chunk, memory and turn card embedded again; stopped at any step the store still opens
with the model its store.json records; refused while another process holds the store."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from kredenc.config import Settings
from kredenc.engine import Kredenc
from kredenc.errors import FormatError, StoreError, StoreLocked
from kredenc.providers.embed.onnx import OnnxEmbedder
from kredenc.storage import layout, reembed
from kredenc.storage.reembed import reembed as run_reembed
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.tiny_models import build_embedder

MEMORIES = ["the apple tree grows", "kestrel and heron", "a red boat on the sea"]
DOC = "# Bridges\n\nThe old stone bridge over the river.\n\nShips sail under it in the wind.\n"
TURNS = [
    {"role": "user", "content": "which city is the capital"},
    {"role": "assistant", "content": "paris is the capital city"},
]


class Counting(OnnxEmbedder):
    """The ONNX embedder counting the texts it embeds; ``fail_after`` texts: raises."""

    texts = 0
    fail_after: int | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail_after is not None and self.texts + len(texts) > self.fail_after:
            raise RuntimeError("stopped")  # a crash while building
        self.texts += len(texts)
        return super().embed(texts)


@pytest.fixture
def models(tmp_path: Path) -> tuple[Path, Path]:
    return build_embedder(tmp_path / "old", dim=8).path, build_embedder(
        tmp_path / "new", dim=6, seed=7, pooling="max"
    ).path


def _fill(home: Path, old: Path) -> int:
    (home.parent / "doc.md").write_text(DOC)
    with Kredenc.open(home, embedder=OnnxEmbedder(old), durability="none") as kb:
        kb.remember_many([{"text": t} for t in MEMORIES])
        kb.ingest(home.parent / "doc.md")
        kb.file_turns("s1", TURNS)
        return int(kb.stats()["records"])


def _settings(home: Path) -> Settings:
    return Settings(home=home, durability="none")


def test_a_store_moves_to_the_new_model(tmp_path: Path, models: tuple[Path, Path]) -> None:
    old, new = models
    home = tmp_path / "s"
    records = _fill(home, old)
    target = Counting(new)
    report = run_reembed(_settings(home), target)
    assert report.changed and report.model == target.model_id and report.dim == 6
    assert report.old_model == OnnxEmbedder(old).model_id and report.old_dim == 8
    assert target.texts == report.embedded >= len(MEMORIES) + len(TURNS) + 1
    assert layout.read_meta(home).model_id == target.model_id
    assert not (home / layout.REEMBED_DIR).exists()
    with pytest.raises(FormatError, match="built with embedding model onnx:new@"):
        Kredenc.open(home, embedder=OnnxEmbedder(old), durability="none")
    after = Counting(new)
    with Kredenc.open(home, embedder=after, durability="none") as kb:
        assert kb.stats()["records"] == records and kb.stats()["dim"] == 6
        assert after.texts == 0  # opening embedded nothing: the index was in place
        by_text: dict[str, float] = {}
        for hit in kb.search(TURNS[1]["content"], k=20, mode="dense", types=["turn"]):
            by_text[hit.text] = hit.score
        for text in [*MEMORIES, "Ships sail under it in the wind."]:
            hits = kb.search(text, k=1, mode="dense")
            assert text in hits[0].text
        # Every vector is the new model's: a card's dense score is its cosine under it.
        query = after.embed_one(MEMORIES[2])
        for hit in kb.search(MEMORIES[2], k=10, mode="dense", types=["memory"]):
            card = after.embed_one(hit.text)
            assert hit.legs["dense"].score == pytest.approx(float(card @ query), abs=1e-4)
    assert any(t.startswith("paris") for t in by_text)


def test_the_same_model_changes_nothing(tmp_path: Path, models: tuple[Path, Path]) -> None:
    old, _ = models
    home = tmp_path / "s"
    _fill(home, old)
    before = (home / "index.db").stat().st_mtime_ns
    report = run_reembed(_settings(home), OnnxEmbedder(old))
    assert not report.changed and report.records == 0
    assert (home / "index.db").stat().st_mtime_ns == before


def test_a_crash_while_building_leaves_the_old_model_working(
    tmp_path: Path, models: tuple[Path, Path]
) -> None:
    old, new = models
    home = tmp_path / "s"
    records = _fill(home, old)
    failing = Counting(new)
    failing.fail_after = 2
    with pytest.raises(RuntimeError, match="stopped"):
        run_reembed(_settings(home), failing)
    assert layout.read_meta(home).model_id == OnnxEmbedder(old).model_id
    with Kredenc.open(home, embedder=OnnxEmbedder(old), durability="none") as kb:
        assert kb.stats()["records"] == records
        assert kb.search(MEMORIES[0], k=1, mode="dense")[0].text == MEMORIES[0]
    # The next run starts over (what the stopped one left is removed) and succeeds.
    assert run_reembed(_settings(home), Counting(new)).changed
    assert not (home / layout.REEMBED_DIR).exists()


def test_stopped_after_the_old_index_is_dropped_the_old_model_still_opens(
    tmp_path: Path, models: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = models
    home = tmp_path / "s"
    records = _fill(home, old)

    def crash(*_a: object) -> None:
        raise KeyboardInterrupt  # before store.json is rewritten

    monkeypatch.setattr(reembed.layout, "write_meta", crash)
    with pytest.raises(KeyboardInterrupt):
        run_reembed(_settings(home), Counting(new))
    monkeypatch.undo()
    assert not (home / "index.db").exists()
    with Kredenc.open(home, embedder=OnnxEmbedder(old), durability="none") as kb:
        assert kb.stats()["records"] == records
        assert kb.search(MEMORIES[1], k=1, mode="dense")[0].text == MEMORIES[1]


def test_stopped_after_the_commit_the_new_model_opens_without_embedding(
    tmp_path: Path, models: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = models
    home = tmp_path / "s"
    records = _fill(home, old)

    write_meta = layout.write_meta

    def crash(home: Path, raw: dict[str, object]) -> None:
        write_meta(home, raw)
        raise KeyboardInterrupt  # store.json says the new model; its index is not in place

    monkeypatch.setattr(reembed.layout, "write_meta", crash)
    with pytest.raises(KeyboardInterrupt):
        run_reembed(_settings(home), Counting(new))
    monkeypatch.undo()
    with pytest.raises(FormatError):
        Kredenc.open(home, embedder=OnnxEmbedder(old), durability="none")
    after = Counting(new)
    with Kredenc.open(home, embedder=after, durability="none") as kb:
        assert kb.stats()["records"] == records
        assert after.texts == 0  # the index came from the log, vectors from the cache
        assert kb.search(MEMORIES[2], k=1, mode="dense")[0].text == MEMORIES[2]


def test_refused_while_another_process_holds_the_store(
    tmp_path: Path, models: tuple[Path, Path]
) -> None:
    old, new = models
    home = tmp_path / "s"
    _fill(home, old)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from kredenc.storage.housekeeper import StoreLock\n"
            "StoreLock(__import__('pathlib').Path(sys.argv[1]))\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n",
            str(home / layout.LOCK_FILE),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(Path(layout.__file__).parents[2])},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLocked, match="locked by pid"):
            run_reembed(_settings(home), Counting(new))
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert layout.read_meta(home).model_id == OnnxEmbedder(old).model_id


def test_postgres_stores_are_sent_to_export_and_import(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "s", backend="postgres", postgres_dsn="host=127.0.0.1")
    with pytest.raises(StoreError, match="in PostgreSQL") as caught:
        run_reembed(settings, HashEmbedder())
    assert "export" in caught.value.hint
