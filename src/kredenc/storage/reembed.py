"""Move a store to another embedding model (``kredenc reembed``).

A store's vectors are derived: every chunk, memory and turn card is embedded from its
record in the log. Reembedding builds a whole new index for the new model beside the
old one (``<store>/reembed.new/``: the log replayed, every card embedded by the new
model, the vectors also written to the embedding cache under the new model's id), then
switches in three steps, each safe to be stopped after:

1. the old index (and its ANN graphs and the operation cache) is deleted: stopped here,
   the store still records the old model, and opening it with the old model rebuilds
   the index from the log (its vectors from the embedding cache);
2. ``store.json`` is rewritten with the new model id and size (an atomic rename): the
   commit point. Stopped here, the store records the new model and has no index;
   opening it with the new model builds the index from the log, its vectors from the
   cache the build filled, so nothing is embedded again;
3. the new index moves into place.

Stopped before step 1 (while building), nothing of the store changed: the old model
still opens it, and the next reembed starts over (``reembed.new`` is removed first).
The whole run holds the store's writer lock, so it is refused while another process
writes, and no process writes while it runs. The file backend only: a PostgreSQL
store moves by export and import into a store made with the new model.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kredenc.config import Settings
from kredenc.errors import StoreError
from kredenc.storage import backends, layout, repair
from kredenc.storage.housekeeper import StoreLock
from kredenc.storage.index.vectors import F32
from kredenc.storage.store import TextEmbedder, replay

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReembedReport:
    """What a reembed did."""

    old_model: str
    old_dim: int
    model: str
    dim: int
    records: int
    embedded: int
    seconds: float
    changed: bool = True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def reembed(
    settings: Settings,
    embedder: TextEmbedder,
    *,
    on_progress: Callable[[int], None] | None = None,
) -> ReembedReport:
    """Move the store at ``settings.home`` to ``embedder`` (see the module doc);
    ``on_progress`` gets the log records replayed so far. A store that already uses
    the model is left as it is (``changed`` False)."""
    home = settings.home
    if backends.is_postgres(settings):
        raise StoreError(
            "reembed rebuilds the index files of a store directory; this store's index is "
            "in PostgreSQL",
            "export the store and import it into a new store opened with the new model",
        )
    layout.require_store(home)
    lock = StoreLock(home / layout.LOCK_FILE)  # StoreLocked while another process writes
    try:
        meta = layout.read_meta(home)
        if (meta.model_id, meta.dim) == (embedder.model_id, embedder.dim):
            return ReembedReport(
                meta.model_id, meta.dim, meta.model_id, meta.dim, 0, 0, 0.0, changed=False
            )
        return _reembed(settings, embedder, meta, on_progress)
    finally:
        lock.release()


def _reembed(
    settings: Settings,
    embedder: TextEmbedder,
    meta: layout.StoreMeta,
    on_progress: Callable[[int], None] | None,
) -> ReembedReport:
    home = settings.home
    started = time.perf_counter()
    aside = home / layout.REEMBED_DIR
    shutil.rmtree(aside, ignore_errors=True)  # what a stopped run left
    aside.mkdir(mode=0o700)
    cache = repair.cache_path_of(home, settings.embed_cache)
    embedded = 0

    def embed(texts: Sequence[str]) -> F32:
        nonlocal embedded
        embedded += len(texts)
        return embedder.embed(list(texts))

    hay = backends.open_log(settings, home, read_only=True)
    try:
        index = backends.new_index(
            settings.model_copy(update={"embed_cache": cache}),
            aside,
            dim=embedder.dim,
            model_id=embedder.model_id,
            read_only=False,
        )
        try:
            records = replay(hay, index, embed, 0, on_progress)
            index.compact()
            index.shards()  # build the ANN graphs now, into reembed.new/ann
            index.save_ann()
        finally:
            index.close()
    finally:
        hay.close()
    _switch(home, meta, embedder)
    report = ReembedReport(
        meta.model_id,
        meta.dim,
        embedder.model_id,
        embedder.dim,
        records,
        embedded,
        round(time.perf_counter() - started, 3),
    )
    log.info("%s: reembedded %d records with %s", home, records, embedder.model_id)
    return report


def _switch(home: Path, meta: layout.StoreMeta, embedder: TextEmbedder) -> None:
    """Steps 1-3 of the module doc."""
    aside = home / layout.REEMBED_DIR
    layout.drop_index(home)  # 1: the old index, its ANN graphs, the operation cache
    raw = {**meta.to_json(), "model_id": embedder.model_id, "dim": embedder.dim}
    layout.write_meta(home, raw)  # 2: the commit point
    for name in (layout.INDEX_FILE, layout.INDEX_FILE + "-wal", layout.INDEX_FILE + "-shm"):
        if (aside / name).exists():
            os.replace(aside / name, home / name)  # 3
    if (aside / layout.ANN_DIR).is_dir():
        os.replace(aside / layout.ANN_DIR, home / layout.ANN_DIR)
    _fsync_dir(home)
    shutil.rmtree(aside, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
