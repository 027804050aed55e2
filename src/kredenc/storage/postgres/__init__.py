"""The PostgreSQL backend (``kredenc[postgres]``): the log and the index as tables.

:class:`~kredenc.storage.postgres.log.PostgresLog` is the append-only log (one row a
record, the file haystack's record JSON and CRC32C) and
:class:`~kredenc.storage.postgres.index.PostgresIndex` the derived index (``tsvector``
full text ranked by BM25 in SQL, pgvector with HNSW for the dense leg). Both live in
one PostgreSQL schema per store, made by ordered, named migration steps
(``migrate``); both pass the conformance suites of ``kredenc.testing.conformance``.
docs/postgres.md describes the layout and what differs from the SQLite backend.

Importing this package needs psycopg; the store imports it only when
``backend = "postgres"``.
"""
