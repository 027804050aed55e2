"""The index's tables in PostgreSQL, as migration steps (``migrate.Step``).

The tables mirror the SQLite index (``storage/index/schema.py``): ``records`` (one row
per filed record, its current state, ``deleted`` for a tombstone), ``cards`` (the full
text: a ``tsvector`` with the record's own words at weight A and its context at
weight B, and the card's length in tokens for BM25, under a GIN index), ``vectors``
(pgvector, under an HNSW index for inner product: the vectors are unit length, so it
is the cosine the SQLite index scores with), ``edges``, ``documents``, ``access``,
``meta`` (applied position, generations, counts) and ``embeddings`` (the embedding
cache by text hash, which survives a rebuild).

Row-level security is the second wall behind the namespace every statement binds:
``records``, ``vectors``, ``edges``, ``documents`` and ``access`` show a transaction
only the rows of the namespace in ``kredenc.ns`` (``set_config`` at its start), or
every row when ``kredenc.all`` is ``on`` (applying the log, and the few reads that
span namespaces). It binds every role but superusers (``FORCE`` includes the tables'
owner). ``cards`` has no policy: its match operator is not leakproof, so a policy
would keep the GIN index from being used, and every read of it joins ``records``.

Text search: the ``kredenc`` configuration stems with Snowball's English stemmer and
keeps every word (no stop words), as FTS5's porter tokenizer does; the words reach it
already split and folded by ``lexical.words``.
"""

from __future__ import annotations

from kredenc.storage.postgres.migrate import Step

#: Tables that show one namespace at a time (row-level security).
WALLED = ("records", "vectors", "edges", "documents", "access")
#: What a rebuild drops (the embedding cache and the text configuration stay).
INDEX_TABLES = ("records", "cards", "vectors", "edges", "documents", "access", "meta")
INDEX_PREFIX = "index/"

_POLICY = "ns = current_setting('kredenc.ns', true) OR current_setting('kredenc.all', true) = 'on'"


def _walls() -> tuple[str, ...]:
    out: list[str] = []
    for table in WALLED:
        out += [
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"CREATE POLICY {table}_ns ON {table} USING ({_POLICY}) WITH CHECK ({_POLICY})",
        ]
    return tuple(out)


def steps(dim: int) -> tuple[Step, ...]:
    """Every step, in order, for vectors of ``dim`` dimensions."""
    return (
        Step(
            "text/001 kredenc text search configuration",
            (
                "CREATE TEXT SEARCH DICTIONARY kredenc_stem (TEMPLATE = snowball,"
                " Language = english)",
                "CREATE TEXT SEARCH CONFIGURATION kredenc (COPY = pg_catalog.simple)",
                "ALTER TEXT SEARCH CONFIGURATION kredenc ALTER MAPPING FOR asciiword, word,"
                " hword_asciipart, hword_part, asciihword, hword WITH kredenc_stem",
            ),
        ),
        Step(
            "cache/001 embeddings",
            (
                "CREATE TABLE embeddings(model text NOT NULL, hash bytea NOT NULL,"
                " vec bytea NOT NULL, PRIMARY KEY (model, hash))",
            ),
        ),
        Step(
            f"{INDEX_PREFIX}001 tables",
            (
                "CREATE TABLE meta(key text PRIMARY KEY, value text NOT NULL)",
                "INSERT INTO meta(key, value) VALUES ('applied_seq', '0'), ('applied_end', '0'),"
                " ('cards', '0'), ('tokens', '0')",
                "CREATE TABLE records("
                " rowid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
                " id text NOT NULL UNIQUE, ns text NOT NULL, drawer text NOT NULL,"
                " type text NOT NULL, kind text NOT NULL DEFAULT '', seq bigint NOT NULL,"
                " address bigint NOT NULL, created_at double precision NOT NULL,"
                " valid_from double precision, valid_to double precision,"
                " status text NOT NULL DEFAULT 'unvalidated',"
                " importance double precision NOT NULL DEFAULT 0.5,"
                " confidence double precision NOT NULL DEFAULT 0.5,"
                " stability double precision NOT NULL DEFAULT 0.5,"
                " source text, doc_id text, episode_id text, task_status text,"
                " read_only boolean NOT NULL DEFAULT false, origin text, loader text,"
                " page integer, session text, deleted boolean NOT NULL DEFAULT false)",
                "CREATE INDEX records_scope ON records(ns, drawer, deleted)",
                "CREATE INDEX records_seq ON records(ns, seq)",
                "CREATE INDEX records_doc ON records(doc_id)",
                "CREATE INDEX records_origin ON records(ns, origin)",
                "CREATE INDEX records_session ON records(ns, session, seq)"
                " WHERE session IS NOT NULL",
                "CREATE TABLE cards(rowid bigint PRIMARY KEY, ns text NOT NULL,"
                " tsv tsvector NOT NULL, len integer NOT NULL)",
                "CREATE INDEX cards_tsv ON cards USING gin(tsv)",
                f"CREATE TABLE vectors(rowid bigint PRIMARY KEY, ns text NOT NULL,"
                f" shard text NOT NULL, vec vector({int(dim)}) NOT NULL)",
                "CREATE INDEX vectors_shard ON vectors(shard)",
                "CREATE INDEX vectors_hnsw ON vectors USING hnsw (vec vector_ip_ops)",
                "CREATE TABLE edges(src text NOT NULL, dst text NOT NULL, rel text NOT NULL,"
                " weight double precision NOT NULL DEFAULT 1.0, ns text NOT NULL,"
                " seq bigint NOT NULL, PRIMARY KEY (src, dst, rel))",
                "CREATE INDEX edges_dst ON edges(dst)",
                "CREATE INDEX edges_ns ON edges(ns, seq)",
                "CREATE TABLE documents(ns text NOT NULL, source text NOT NULL,"
                " drawer text NOT NULL, doc_id text NOT NULL, content_hash text NOT NULL,"
                " version integer NOT NULL, PRIMARY KEY (ns, source))",
                "CREATE TABLE access(id text PRIMARY KEY, ns text NOT NULL,"
                " count bigint NOT NULL, last_at double precision NOT NULL)",
                *_walls(),
            ),
        ),
    )
