"""The 100,000-memory store that ``bench_server.py --proxy-only`` serves, built once and reused.

``bench_server.py`` without ``--home`` builds its store in a temporary directory on
every run (from ``corpus.py``'s cached MiniLM vectors, which take ~5 minutes of a fast
machine to make once, and much longer on a shared 2-core box). For measuring the proxy
that is wasted work: this module files the same ``corpus.py`` texts once under
``--dir`` (default ``/tmp/kredenc-proxy-store``) and each benchmark run serves a copy of
it (:func:`scratch`), so the turns a run files never reach the next run's store.

The vectors are ``corpus.py``'s cached MiniLM vectors when they exist, else seeded
random unit vectors (``--random``, or when no cache is there): the dense leg's cost
(an ANN search over 100,000 vectors of 384 dimensions) does not depend on what the
vectors mean, and the query is still embedded by the real MiniLM at request time. The
store records which it holds in ``proxy-store.json`` beside it.

    PYTHONPATH=src:benchmarks python benchmarks/proxy_store.py            # build or reuse
    PYTHONPATH=src:benchmarks python benchmarks/proxy_store.py --n 2000   # a quick one

Prints the store's path (the last line), for ``bench_server.py --home``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# onnxruntime must be in the process before usearch (see corpus.py).
import numpy as np
import onnxruntime  # noqa: F401

DEFAULT_DIR = Path("/tmp/kredenc-proxy-store")
NS = "bench"  # bench_recall.NS: the namespace bench_server serves
SEED = 0
BATCH = 1000
MARK = "proxy-store.json"


def store_path(root: Path, n: int) -> Path:
    return root / f"store-{n}"


def built(root: Path, n: int) -> dict[str, Any] | None:
    """What ``proxy-store.json`` says of a finished store of ``n``, else ``None``."""
    mark = root / f"store-{n}.{MARK}"
    if not mark.exists() or not (store_path(root, n) / "store.json").exists():
        return None
    info: dict[str, Any] = json.loads(mark.read_text())
    return info if info.get("n") == n else None


def random_vectors(n: int, dim: int = 384, seed: int = SEED) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def build(root: Path, n: int, *, random: bool = False) -> Path:
    """File ``corpus.specs(n)`` into ``root/store-n`` (nothing embedded while filing)."""
    import corpus
    from kredenc import Kredenc
    from kredenc.storage.index.sqlite import embed_text_of, text_hash

    home = store_path(root, n)
    (root / f"store-{n}.{MARK}").unlink(missing_ok=True)  # not built until it is done
    shutil.rmtree(home, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    specs = corpus.specs(n, SEED)
    cached = corpus._cached("memories", n, SEED)
    source = "corpus MiniLM vectors" if cached is not None and not random else "random unit"
    vectors = random_vectors(n) if source == "random unit" else np.asarray(cached)
    with Kredenc.open(home, NS, durability="none") as kb:
        for b in range(0, n, BATCH):
            part = specs[b : b + BATCH]
            kb.index.cache_vectors(
                {
                    text_hash(embed_text_of({"text": s.text})): np.asarray(vectors[b + i])
                    for i, s in enumerate(part)
                }
            )
            kb.remember_many(
                [{"text": s.text, "kind": corpus.TEMPLATES[s.template][0]} for s in part]
            )
            if b and b % 10_000 == 0:
                print(f"  {b:,} filed ({time.monotonic() - started:.0f} s)", file=sys.stderr)
        kb.index.shards()  # loads the shards and builds the ANN graph; close saves it
        records = kb.stats()["records"]
    info = {"n": n, "records": records, "vectors": source, "seed": SEED}
    info["build_s"] = round(time.monotonic() - started, 1)
    (root / f"store-{n}.{MARK}").write_text(json.dumps(info, indent=2))
    return home


def ensure(root: Path = DEFAULT_DIR, n: int = 100_000, *, random: bool = False) -> Path:
    """The store of ``n`` under ``root``: reused when built, else built now."""
    if built(root, n) is None:
        build(root, n, random=random)
    return store_path(root, n)


@contextmanager
def scratch(root: Path = DEFAULT_DIR, n: int = 100_000) -> Iterator[Path]:
    """A copy of the built store to serve and write to, removed after: every run starts
    from the same ``n`` memories and a saved ANN graph that matches them (a store that
    took a run's turns would rebuild its graph at the next open: minutes)."""
    home = ensure(root, n)
    tmp = Path(tempfile.mkdtemp(prefix="kredenc-proxy-run-", dir=root))
    try:
        shutil.copytree(home, tmp / "store", ignore=shutil.ignore_patterns("lock"))
        yield tmp / "store"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--random", action="store_true", help="random unit vectors")
    parser.add_argument("--rebuild", action="store_true", help="build even when built")
    args = parser.parse_args(argv)
    if args.rebuild:
        build(args.dir, args.n, random=args.random)
    home = ensure(args.dir, args.n, random=args.random)
    print(json.dumps(built(args.dir, args.n)), file=sys.stderr)
    print(home)
    return 0


if __name__ == "__main__":
    sys.exit(main())
