"""``kredenc eval beir`` on the PostgreSQL backend, to set beside the same run on SQLite.

Starts the test PostgreSQL (``kredenc.testing.postgres``), copies the file embedding
cache of ``kredenc eval`` (``~/.cache/kredenc/eval-embeddings.db``, filled by a run on
SQLite) into the index's ``embeddings`` table so that nothing is embedded twice, then
runs ``kredenc eval beir DIR --json`` with ``backend = "postgres"``::

    kredenc eval beir ../shared/data/scifact --json > sqlite.json     # fills the cache
    python benchmarks/bench_postgres_beir.py ../shared/data/scifact > postgres.json
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kredenc.interfaces.cli import main as cli
from kredenc.storage.postgres.index import PostgresIndex
from kredenc.testing.postgres import PostgresServer

CACHE = Path("~/.cache/kredenc/eval-embeddings.db").expanduser()
SCHEMA = "kredenc"


def seed(dsn: str, cache: Path) -> int:
    """Copy every cached vector into the PostgreSQL embedding cache; how many."""
    with sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT model, hash, vec FROM embeddings").fetchall()
    by_model: dict[str, dict[bytes, np.ndarray]] = {}
    for model, digest, vec in rows:
        by_model.setdefault(str(model), {})[bytes(digest)] = np.frombuffer(vec, np.float32)
    for model, items in by_model.items():
        dim = len(next(iter(items.values())))
        index = PostgresIndex(dsn, SCHEMA, dim=dim, model_id=model)
        try:
            index.cache_vectors(items)
        finally:
            index.close()
    return len(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args(argv)
    with PostgresServer() as server:
        dsn = server.create_app_database("kredenc", role="kredenc")
        print(f"seeded {seed(dsn, args.cache)} cached vectors", file=sys.stderr)
        os.environ.update(
            KREDENC_BACKEND="postgres", KREDENC_POSTGRES_DSN=dsn, KREDENC_POSTGRES_SCHEMA=SCHEMA
        )
        try:
            cli(["eval", "beir", args.directory, "--json"])
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
