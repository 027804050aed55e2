"""A writer process the storage tests start, kill and outlive.

Run as ``python _writer_proc.py MODE STORE SEED COUNT DURABILITY``:

``log``
    Open the store's pieces directly (``StoreLock``, ``Haystack``, ``SqliteIndex``,
    ``Housekeeper``) and append the plan for ``SEED``: single records and batches,
    with up to ``window`` requests in flight so that requests share group commits.
``engine``
    Open the store with ``Kredenc.open`` (HashEmbedder) and file the same plan with
    ``remember()`` (single items) and ``remember_many()`` (batches).
``hold``
    Open the store for writing, print ``ready`` and wait to be killed.
``try-open``
    Try to open the store for writing once; print one JSON line with the outcome and
    how long the attempt took.

After each append returns, the writer prints one line per record,
``ITEM SEQ OFFSET ID``, flushed at once, so that a parent that kills it knows exactly
which appends had returned. It prints ``ready`` before the first append and ``done``
after the last, then waits to be killed.

The plan is a pure function of the seed, so the parent can rebuild it: ``plan()``.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Plan:
    """The writes one trial attempts: ``ops[k]`` lists the items of the k-th append."""

    seed: int
    ops: list[list[int]]
    window: int  # requests in flight at once (``log`` mode)

    @property
    def items(self) -> int:
        return sum(len(op) for op in self.ops)

    def boundaries(self) -> set[int]:
        """Item counts at which a prefix of the plan ends on an append boundary."""
        out = {0}
        total = 0
        for op in self.ops:
            total += len(op)
            out.add(total)
        return out


def plan(seed: int, count: int) -> Plan:
    """Mostly single appends, some batches (2-64 items), a few large batches."""
    rng = random.Random(seed)
    ops: list[list[int]] = []
    item = 0
    while item < count:
        roll = rng.random()
        if roll < 0.80:
            size = 1
        elif roll < 0.98:
            size = rng.randint(2, 64)
        else:
            size = rng.randint(200, 500)
        size = min(size, count - item)
        ops.append(list(range(item, item + size)))
        item += size
    window = rng.choice([1, 1, 4, 16])
    return Plan(seed, ops, window)


def item_id(seed: int, item: int) -> str:
    return f"m{seed}x{item}"


def item_token(seed: int, item: int) -> str:
    """A word that occurs in exactly one item's text (for lexical search)."""
    return f"tok{seed}y{item}"


def item_text(seed: int, item: int) -> str:
    """The item's text: deterministic, of varied length (a few are 64 KiB)."""
    rng = random.Random(seed * 1_000_003 + item)
    filler = "z" * (65536 if rng.random() < 0.005 else rng.randint(0, 300))
    return f"crash note {item} {item_token(seed, item)} {filler}".rstrip()


def log_payload(seed: int, item: int) -> dict[str, Any]:
    """A put record shaped like the engine's memory records."""
    return {
        "op": "put",
        "ns": "default",
        "id": item_id(seed, item),
        "type": "memory",
        "drawer": "memories",
        "kind": "note",
        "ts": time.time(),
        "text": item_text(seed, item),
        "tags": [],
        "meta": {"seed": seed, "i": item},
    }


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run_log(home: Path, p: Plan, durability: str) -> None:
    from kredenc.storage import layout
    from kredenc.storage.haystack import Haystack
    from kredenc.storage.housekeeper import Housekeeper, StoreLock
    from kredenc.storage.index.sqlite import SqliteIndex
    from kredenc.storage.index.vectors import AnnParams
    from kredenc.testing.embedders import HashEmbedder

    emb = HashEmbedder()
    StoreLock(home / layout.LOCK_FILE)  # held until the process dies
    hay = Haystack(home / layout.LOG_FILE, durability=durability)  # type: ignore[arg-type]
    index = SqliteIndex(
        home / layout.INDEX_FILE, dim=emb.dim, model_id=emb.model_id, ann=AnnParams()
    )
    hk = Housekeeper(hay, index, emb.embed)
    _say("ready")
    pending: deque[tuple[list[int], Future[Any]]] = deque()

    def settle() -> None:
        items, fut = pending.popleft()
        placed = fut.result()
        _say(
            "\n".join(
                f"{i} {a.seq} {a.offset} {item_id(p.seed, i)}"
                for i, a in zip(items, placed, strict=True)
            )
        )

    for op in p.ops:
        payloads = [log_payload(p.seed, i) for i in op]
        # Vectors come with the request, as the engine sends them (the housekeeper's
        # own embedding path writes the embedding cache, which is fsynced per group).
        vecs = emb.embed([pl["text"] for pl in payloads])
        vectors = {pl["id"]: vecs[k] for k, pl in enumerate(payloads)}
        pending.append((op, hk.submit(payloads, batch=len(op) > 1, vectors=vectors)))
        if len(pending) >= p.window:
            settle()
    while pending:
        settle()


def run_engine(home: Path, p: Plan, durability: str) -> None:
    from kredenc.engine import Kredenc
    from kredenc.testing.embedders import HashEmbedder

    kb = Kredenc.open(home, embedder=HashEmbedder(), durability=durability)
    _say("ready")
    for op in p.ops:
        if len(op) == 1:
            (i,) = op
            mems = [kb.remember(item_text(p.seed, i), meta={"seed": p.seed, "i": i})]
        else:
            mems = kb.remember_many(
                [{"text": item_text(p.seed, i), "meta": {"seed": p.seed, "i": i}} for i in op]
            )
        _say("\n".join(f"{i} {m.seq} {m.offset} {m.id}" for i, m in zip(op, mems, strict=True)))


def run_hold(home: Path, durability: str) -> None:
    from kredenc.engine import Kredenc
    from kredenc.testing.embedders import HashEmbedder

    kb = Kredenc.open(home, embedder=HashEmbedder(), durability=durability)
    kb.remember("held by the first writer")
    _say("ready")
    time.sleep(3600)


def run_try_open(home: Path, durability: str) -> None:
    from kredenc.engine import Kredenc
    from kredenc.errors import KredencError
    from kredenc.testing.embedders import HashEmbedder

    emb = HashEmbedder()
    started = time.monotonic()
    try:
        kb = Kredenc.open(home, embedder=emb, durability=durability)
    except KredencError as exc:
        elapsed = time.monotonic() - started
        out = {"error": type(exc).__name__, "message": exc.message, "elapsed": elapsed}
    else:
        elapsed = time.monotonic() - started
        kb.close()
        out = {"error": None, "message": "", "elapsed": elapsed}
    _say(json.dumps(out))


def main(argv: list[str]) -> int:
    mode, home = argv[0], Path(argv[1])
    seed, count, durability = int(argv[2]), int(argv[3]), argv[4]
    if mode == "hold":
        run_hold(home, durability)
        return 0
    if mode == "try-open":
        run_try_open(home, durability)
        return 0
    p = plan(seed, count)
    if mode == "log":
        run_log(home, p, durability)
    elif mode == "engine":
        run_engine(home, p, durability)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    _say("done")
    time.sleep(3600)  # a trial always ends with SIGKILL, never with a clean close
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
