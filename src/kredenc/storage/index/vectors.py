"""Vector search over one shard (a namespace and drawer).

Below ``ann_threshold`` vectors a shard answers by exact cosine (a float32 matrix
product); past it, a usearch HNSW index answers, persisted beside the SQLite index
so that opening a large store does not rebuild it. The matrix and the graph are
derived: SQLite's ``vectors`` table holds every vector, and the log holds the truth.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kredenc.storage.index.ann_lib import usearch_index_class

log = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class AnnParams:
    threshold: int = 20_000
    dtype: str = "f16"
    connectivity: int = 16
    expansion_add: int = 64
    expansion_search: int = 96


class VectorShard:
    """Vectors of one (namespace, drawer), searchable by cosine similarity.

    Writes come from the housekeeper's thread, searches from any thread; a lock
    guards the arrays (searches copy nothing: they read under the lock).
    """

    def __init__(self, dim: int, params: AnnParams, ann_path: Path | None = None) -> None:
        self.dim = dim
        self.params = params
        self.ann_path = ann_path
        self._lock = threading.RLock()
        self._rowids: I64 = np.zeros(0, dtype=np.int64)
        self._matrix: F32 = np.zeros((0, dim), dtype=np.float32)
        self._n = 0
        self._pos: dict[int, int] = {}
        self._ann: Any = None
        self._ann_dirty = False

    def __len__(self) -> int:
        return len(self._pos)

    # -- writes ---------------------------------------------------------------
    def add(self, rowids: I64, vectors: F32, *, build_ann: bool = True) -> None:
        with self._lock:
            if self._n == 0 and self._adoptable(rowids, vectors):
                # The first load of a shard: take the arrays as they are (no second
                # copy of 100,000 vectors at open; measured peak RSS 632 -> 486 MB).
                self._rowids, self._matrix = rowids, vectors
                self._pos = {r: i for i, r in enumerate(rowids.tolist())}
                self._n = len(rowids)
                if build_ann and self.wants_ann:
                    self.build_ann()
                return
            need = self._n + len(rowids)
            if need > len(self._rowids):
                cap = max(need, int(len(self._rowids) * 1.5) + 64)
                rows = np.zeros(cap, dtype=np.int64)
                mat = np.zeros((cap, self.dim), dtype=np.float32)
                rows[: self._n] = self._rowids[: self._n]
                mat[: self._n] = self._matrix[: self._n]
                self._rowids, self._matrix = rows, mat
            for i, rowid in enumerate(rowids.tolist()):
                old = self._pos.get(rowid)
                if old is not None:  # replaced vector: update in place
                    self._matrix[old] = vectors[i]
                    continue
                self._rowids[self._n] = rowid
                self._matrix[self._n] = vectors[i]
                self._pos[rowid] = self._n
                self._n += 1
            if self._ann is not None:
                self._ann_add(rowids, vectors)
            elif build_ann and self.wants_ann:
                self.build_ann()

    @staticmethod
    def _adoptable(rowids: I64, vectors: F32) -> bool:
        """Arrays a shard can own: writable, contiguous, right types, unique ids."""
        return (
            rowids.dtype == np.int64
            and vectors.dtype == np.float32
            and rowids.flags.writeable
            and vectors.flags.writeable
            and vectors.flags.c_contiguous
            and len(np.unique(rowids)) == len(rowids)
        )

    def remove(self, rowid: int) -> None:
        with self._lock:
            pos = self._pos.pop(rowid, None)
            if pos is None:
                return
            last = self._n - 1
            if pos != last:  # move the last row into the hole
                moved = int(self._rowids[last])
                self._rowids[pos] = moved
                self._matrix[pos] = self._matrix[last]
                self._pos[moved] = pos
            self._n = last
            if self._ann is not None:
                self._ann.remove(rowid)
                self._ann_dirty = True

    # -- reads ----------------------------------------------------------------
    def rowids(self) -> list[int]:
        """The rowids this shard holds (a copy)."""
        with self._lock:
            return list(self._pos)

    def search(self, query: F32, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest rowids with cosine similarity, best first."""
        with self._lock:
            n = self._n
            if n == 0 or k <= 0:
                return []
            if self._ann is not None:
                return self._ann_search(query, k)
            # einsum, not a BLAS product: a vector gets the same score wherever it
            # sits in the matrix, so a rebuilt shard (rows in another order) agrees.
            scores = np.einsum("ij,j->i", self._matrix[:n], query)
            k = min(k, n)
            if k < n:  # the k best, and everything tied with the k-th
                kth = np.partition(-scores, k - 1)[k - 1]
                top = np.flatnonzero(-scores <= kth)
            else:
                top = np.arange(n)
            # Best first; ties by rowid (not by position, which removals change).
            order = top[np.lexsort((self._rowids[top], -scores[top]))][:k]
            return [(int(self._rowids[i]), float(scores[i])) for i in order]

    def search_among(
        self, query: F32, rowids: list[int], k: int, *, block: int = 2048
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest of ``rowids`` (those this shard holds) by exact cosine,
        best first, ties by rowid: a filter that passes few records (a user's) is
        searched exactly among them instead of fetching ever deeper from all. Scored
        ``block`` rows at a time, so no copy of more than ``block`` vectors is made."""
        with self._lock:
            pos = [self._pos[r] for r in rowids if r in self._pos]
            if not pos or k <= 0:
                return []
            where = np.asarray(pos, dtype=np.int64)
            scores = np.empty(len(where), dtype=np.float32)
            for start in range(0, len(where), block):
                part = where[start : start + block]
                scores[start : start + len(part)] = np.einsum("ij,j->i", self._matrix[part], query)
            ids = self._rowids[where]
        order = np.lexsort((ids, -scores))[:k]
        return [(int(ids[i]), float(scores[i])) for i in order]

    @property
    def uses_ann(self) -> bool:
        return self._ann is not None

    @property
    def wants_ann(self) -> bool:
        return self.params.threshold > 0 and len(self._pos) >= self.params.threshold

    # -- the ANN graph --------------------------------------------------------
    def _new_ann(self) -> Any:
        index_class = usearch_index_class()
        return index_class(
            ndim=self.dim,
            metric="ip",
            dtype=self.params.dtype,
            connectivity=self.params.connectivity,
            expansion_add=self.params.expansion_add,
            expansion_search=self.params.expansion_search,
        )

    def build_ann(self) -> None:
        index = self._new_ann()
        n = self._n
        # One thread and rowid order make the graph the same on every rebuild.
        order = np.argsort(self._rowids[:n], kind="stable")
        index.add(self._rowids[:n][order], self._matrix[:n][order], threads=1)
        self._ann = index
        self._ann_dirty = True
        log.info("vector shard passed %d vectors: ANN index built", n)

    def _ann_add(self, rowids: I64, vectors: F32) -> None:
        ann = self._ann
        fresh = [i for i, r in enumerate(rowids.tolist()) if not ann.contains(r)]
        if fresh:
            ann.add(rowids[fresh], vectors[fresh], threads=1)
        self._ann_dirty = True

    def _ann_search(self, query: F32, k: int) -> list[tuple[int, float]]:
        ann = self._ann
        matches = ann.search(query, min(k, len(self._pos)))
        keys = matches.keys.tolist()
        dists = matches.distances.tolist()
        # usearch's "ip" distance is 1 - dot product.
        return [(int(key), 1.0 - float(d)) for key, d in zip(keys, dists, strict=True)]

    def save(self, applied_seq: int) -> None:
        """Persist the ANN graph (if any) with the log position it reflects."""
        with self._lock:
            if self._ann is None or self.ann_path is None or not self._ann_dirty:
                return
            self.ann_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = self.ann_path.with_suffix(".tmp")
            self._ann.save(str(tmp))
            os.chmod(tmp, 0o600)  # usearch creates it 0666 less the umask
            tmp.replace(self.ann_path)
            side = {"applied_seq": applied_seq, "count": len(self._pos)}
            fd = os.open(
                self.ann_path.with_suffix(".json"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
            )
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(side))
            self._ann_dirty = False

    def load_ann(self, applied_seq: int) -> bool:
        """Adopt a saved graph if it reflects exactly ``applied_seq``; else False."""
        if self.ann_path is None or not self.ann_path.exists():
            return False
        side_path = self.ann_path.with_suffix(".json")
        try:
            side = json.loads(side_path.read_text())
        except (OSError, ValueError):
            return False
        if side.get("applied_seq") != applied_seq or side.get("count") != len(self._pos):
            return False
        index = self._new_ann()
        index.load(str(self.ann_path))
        with self._lock:
            self._ann = index
            self._ann_dirty = False
        return True
