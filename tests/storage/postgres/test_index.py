"""The PostgreSQL index beyond the conformance suite: row-level security as the second
wall behind the namespace in every statement, BM25 scores on FTS5's scale, the term
counts spelling corrections read, the HNSW path of the dense leg, and a rebuild's drop
that keeps the embedding cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kredenc.storage.index.filters import Filters
from kredenc.storage.index.lexical import Phrase
from kredenc.storage.index.sqlite import SqliteIndex
from kredenc.storage.index.vectors import AnnParams
from kredenc.testing import postgres as postgres_testing
from kredenc.testing.conformance.index_data import Records, put, tombstone
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.postgres import require

pytestmark = pytest.mark.postgres

require()

import psycopg  # noqa: E402

from kredenc.storage.postgres import lexical, migrate  # noqa: E402
from kredenc.storage.postgres.index import PostgresIndex  # noqa: E402

DIM = 32


@pytest.fixture
def schema(request: pytest.FixtureRequest) -> str:
    return "t_ix_" + request.node.name.lower().replace("[", "_").replace("]", "")[:40]


@pytest.fixture
def index(postgres_dsn: str, schema: str) -> Iterator[PostgresIndex]:
    ix = PostgresIndex(postgres_dsn, schema, dim=DIM, model_id="t")
    try:
        yield ix
    finally:
        ix.close()


def fill(index: PostgresIndex | SqliteIndex, embedder: HashEmbedder) -> Records:
    log = Records()
    texts = {
        "a1": "the river boat sails down the river",
        "a2": "a boat on the lake",
        "a3": "mountain trail in the snow",
        "a4": "river fish and river birds by the river bank",
        "a5": "boat boat boat",
    }
    payloads = [put("a", rid, text) for rid, text in texts.items()]
    payloads += [put("b", "b1", "the secret river of namespace b")]
    index.apply(log.add(*payloads), None, embedder.embed, log.end)
    return log


def test_row_level_security_shows_one_namespace_whatever_the_sql(
    index: PostgresIndex, postgres_dsn: str, schema: str
) -> None:
    fill(index, HashEmbedder(dim=DIM))
    with migrate.connect(postgres_dsn, schema) as conn:
        # A statement that forgets to bind the namespace sees nothing without a setting...
        assert conn.execute("SELECT id FROM records").fetchall() == []
        assert conn.execute("SELECT count(*) FROM vectors").fetchone() == (0,)
        # ...and only its own namespace's rows with one.
        conn.execute("SELECT set_config('kredenc.ns', 'a', true)")
        ids = {r[0] for r in conn.execute("SELECT id FROM records").fetchall()}
        assert ids == {"a1", "a2", "a3", "a4", "a5"}
        assert conn.execute("SELECT count(*) FROM vectors").fetchone() == (5,)
        # Nor can it write into another namespace.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO edges(src, dst, rel, ns, seq) VALUES ('x', 'y', 'r', 'b', 1)")


def test_history_is_walled_by_namespace_and_backfilled_by_its_step(
    postgres_dsn: str, schema: str
) -> None:
    embedder = HashEmbedder(dim=DIM)
    index = PostgresIndex(postgres_dsn, schema, dim=DIM, model_id="t")
    try:
        log = fill(index, embedder)
        index.apply(
            log.add({"op": "score", "ns": "a", "id": "a1", "importance": 0.9}),
            None,
            embedder.embed,
            log.end,
        )
        assert [s for s, _ in index.history_of("a", "a1")] == [1, 7]
        with migrate.connect(postgres_dsn, schema) as conn:
            assert conn.execute("SELECT count(*) FROM history").fetchone() == (0,)
            conn.execute("SELECT set_config('kredenc.ns', 'b', true)")
            assert conn.execute("SELECT id FROM history").fetchall() == [("b1",)]
            # A store from before the step: no history table, the step not recorded.
            conn.execute("DROP TABLE history")
            conn.execute("DELETE FROM migrations WHERE name = 'index/002 history'")
            conn.commit()
    finally:
        index.close()
    index = PostgresIndex(postgres_dsn, schema, dim=DIM, model_id="t")  # migrates
    try:
        assert [s for s, _ in index.history_of("a", "a1")] == [1]  # from its put
        assert [s for s, _ in index.history_of("b", "b1")] == [6]
    finally:
        index.close()


COUNTED = (
    "SELECT u.lexeme, count(*) FROM cards c CROSS JOIN LATERAL unnest(c.tsv) AS u"
    " GROUP BY u.lexeme ORDER BY 1"
)


def _terms(postgres_dsn: str, schema: str) -> list[tuple[str, int]]:
    with migrate.connect(postgres_dsn, schema) as conn:
        return [(str(t), int(n)) for t, n in conn.execute("SELECT * FROM terms ORDER BY 1")]


def _counted(postgres_dsn: str, schema: str) -> list[tuple[str, int]]:
    with migrate.connect(postgres_dsn, schema) as conn:
        return [(str(t), int(n)) for t, n in conn.execute(COUNTED)]


def test_terms_count_the_cards_that_hold_each_lexeme(
    index: PostgresIndex, postgres_dsn: str, schema: str
) -> None:
    """Every apply keeps ``terms`` equal to the cards' own lexemes counted, through
    puts and tombstones in one apply or several, and drops a lexeme no card holds."""
    embedder = HashEmbedder(dim=DIM)
    log = fill(index, embedder)
    assert _terms(postgres_dsn, schema) == _counted(postgres_dsn, schema)
    assert ("river", 3) in _terms(postgres_dsn, schema)  # a1, a4 and b1
    index.apply(
        log.add(
            tombstone("a", "a4"),
            put("a", "a6", "a heron by the river"),
            put("a", "a7", "zeppelins over the lake"),
            tombstone("a", "a7"),  # put and forgotten in one apply
        ),
        None,
        embedder.embed,
        log.end,
    )
    index.apply(log.add(tombstone("a", "a3")), None, embedder.embed, log.end)
    terms = dict(_terms(postgres_dsn, schema))
    assert list(terms.items()) == _counted(postgres_dsn, schema)
    assert "zeppelin" not in terms and "mountain" not in terms  # no card holds them
    assert terms["heron"] == 1


def test_bm25_scores_match_fts5s(index: PostgresIndex, tmp_path: Path) -> None:
    """Words both stemmers agree on get the SQLite index's BM25 scores."""
    embedder = HashEmbedder(dim=DIM)
    sqlite = SqliteIndex(tmp_path / "index.db", dim=DIM, model_id="t", ann=AnnParams())
    try:
        fill(index, embedder)
        fill(sqlite, embedder)
        for phrases in (["river"], ["boat"], ["river", "boat"], ["snow", "lake", "fish"]):
            query = [Phrase(p) for p in phrases]
            want = sqlite.lexical("a", query, 10, Filters())
            got = index.lexical("a", query, 10, Filters())
            ids = {r: sqlite.resolve("a", [r])[r][0] for r, _ in want}
            pg_ids = {r: index.resolve("a", [r])[r][0] for r, _ in got}
            assert [pg_ids[r] for r, _ in got] == [ids[r] for r, _ in want], phrases
            for (_, s_pg), (_, s_sq) in zip(got, want, strict=True):
                assert s_pg == pytest.approx(s_sq, rel=1e-6), phrases
    finally:
        sqlite.close()


def test_words_the_stemmers_part_on_rank_as_on_sqlite(index: PostgresIndex, tmp_path: Path) -> None:
    """Porter and Snowball stem these apart ("generously": gener / generous); the cards'
    lexemes are FTS5's own, so the scores and the order are SQLite's all the same."""
    embedder = HashEmbedder(dim=DIM)
    sqlite = SqliteIndex(tmp_path / "index.db", dim=DIM, model_id="t", ann=AnnParams())
    texts = {
        "g1": "they gave generously to the general fund",
        "g2": "a generous general and a generator",
        "g3": "generally the generation was generous",
        "g4": "nothing here at all",
    }
    try:
        for ix in (index, sqlite):
            log = Records()
            ix.apply(
                log.add(*[put("a", r, t) for r, t in texts.items()]), None, embedder.embed, log.end
            )
        for words in (["generously"], ["generous"], ["general", "generation"], ["gener"]):
            want = sqlite.lexical("a", [Phrase(w) for w in words], 10, Filters())
            got = index.lexical("a", [Phrase(w) for w in words], 10, Filters())
            ids = [sqlite.resolve("a", [r])[r][0] for r, _ in want]
            assert [index.resolve("a", [r])[r][0] for r, _ in got] == ids, words
            assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-6), words
        assert len(sqlite.lexical("a", [Phrase("generously")], 10, Filters())) == 3
    finally:
        sqlite.close()


def test_an_index_made_before_the_terms_step_gets_them_counted(
    postgres_dsn: str, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The ``index/003 terms`` step counts an older index's cards once, at its first
    writable open; a read-only handle before that corrects nothing and says why."""
    embedder = HashEmbedder(dim=DIM)
    ix = PostgresIndex(postgres_dsn, schema, dim=DIM, model_id="t")
    try:
        fill(ix, embedder)
        with migrate.connect(postgres_dsn, schema) as conn:
            conn.execute("DROP TABLE terms")
            conn.execute("DELETE FROM migrations WHERE name = 'index/003 terms'")
            conn.commit()
    finally:
        ix.close()
    reader = PostgresIndex(postgres_dsn, schema, dim=DIM, model_id="t", read_only=True)
    try:
        assert reader.corrections("a", ["rivr", "bost"], Filters()) == {}
        assert "predates its term counts" in caplog.text
        assert reader.lexical("a", [Phrase("river")], 10, Filters())  # searches as before
    finally:
        reader.close()
    writer = PostgresIndex(postgres_dsn, schema, dim=DIM, model_id="t")  # migrates
    try:
        assert _terms(postgres_dsn, schema) == _counted(postgres_dsn, schema)
        assert writer.corrections("a", ["rivers", "rievr"], Filters()) == {"rievr": "river"}
    finally:
        writer.close()


def test_an_index_built_with_snowball_lexemes_keeps_them(
    postgres_dsn: str, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An index filled before the Porter lexemes (no ``lexemes`` mark in ``meta``)
    still finds its cards, with Snowball's stems, and says to rebuild it."""
    embedder = HashEmbedder(dim=DIM)
    ix = PostgresIndex(postgres_dsn, schema, dim=DIM, model_id="t")
    try:
        ix._stems = lexical.Stems()  # as the index was filled before
        fill(ix, embedder)
        with migrate.connect(postgres_dsn, schema) as conn:
            conn.execute("DELETE FROM meta WHERE key = 'lexemes'")
    finally:
        ix.close()
    old = PostgresIndex(postgres_dsn, schema, dim=DIM, model_id="t")
    try:
        assert not old._stems.porter
        assert "kredenc rebuild" in caplog.text
        found = old.lexical("a", [Phrase("rivers")], 10, Filters())
        assert {old.resolve("a", [r])[r][0] for r, _ in found} == {"a1", "a4"}
    finally:
        old.close()


def test_the_hnsw_path_finds_what_the_exact_scan_does(postgres_dsn: str, schema: str) -> None:
    embedder = HashEmbedder(dim=DIM)
    exact = PostgresIndex(postgres_dsn, schema, dim=DIM, model_id="t")
    ann = PostgresIndex(postgres_dsn, schema, dim=DIM, model_id="t", ann=AnnParams(threshold=2))
    try:
        log = Records()
        words = ["river", "boat", "snow", "lake", "fish", "bird", "tree", "road"]
        payloads = [
            put("a", f"r{n}", f"{words[n % 8]} {words[(n * 3) % 8]} {words[(n * 5) % 8]} {n}")
            for n in range(200)
        ]
        payloads.append(put("b", "other", "river boat snow"))
        exact.apply(log.add(*payloads), None, embedder.embed, log.end)
        query = embedder.embed(["river boat snow"])[0]
        want = exact.dense("a", query, 10, Filters())
        got = ann.dense("a", query, 10, Filters())
        assert len(got) == 10
        assert len({r for r, _ in got} & {r for r, _ in want}) >= 8
        assert "other" not in {i for i, _ in ann.resolve("b", [r for r, _ in got]).values()}
        kinds = ann.dense("a", query, 10, Filters(kinds=("nothing",)))
        assert kinds == []
    finally:
        exact.close()
        ann.close()


def test_drop_keeps_the_embedding_cache(postgres_dsn: str, schema: str) -> None:
    embedder = HashEmbedder(dim=DIM)
    index = PostgresIndex(postgres_dsn, schema, dim=DIM, model_id="t")
    fill(index, embedder)
    index.close()
    PostgresIndex.drop(postgres_dsn, schema)
    index = PostgresIndex(postgres_dsn, schema, dim=DIM, model_id="t")
    try:
        assert index.applied() == (0, 0)
        assert index.live_count() == 0
        log = Records()
        calls = embedder.calls
        index.apply(log.add(put("a", "a2", "a boat on the lake")), None, None, log.end)
        assert embedder.calls == calls  # the vector came from the kept cache
        assert index.lookup("a", "a2") is not None
    finally:
        index.close()


def test_the_first_open_creates_the_vector_extension(
    postgres_server: postgres_testing.PostgresServer,
) -> None:
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE bare")
    dsn = postgres_server.dsn("bare")  # a superuser's: allowed to create it
    index = PostgresIndex(dsn, "s", dim=DIM, model_id="t")
    try:
        index.apply(Records().add(put("a", "m", "hello")), None, HashEmbedder(dim=DIM).embed, 1)
        assert index.lookup("a", "m") is not None
    finally:
        index.close()
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
    assert row == ("public",)
