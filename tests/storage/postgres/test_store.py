"""A whole store on PostgreSQL: ``Kredenc.open(path, backend="postgres", ...)`` remembers,
searches (hybrid), relates, builds the context graph, forgets, reopens and rebuilds,
and answers as the same store on the file backend does."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, NotFound, StoreError
from kredenc.records import GraphEdge
from kredenc.storage import layout
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.postgres import require

pytestmark = pytest.mark.postgres

require()

from kredenc.storage.postgres import migrate  # noqa: E402

FACTS = [
    ("The office coffee machine is broken", "fact"),
    ("Deploys happen on Tuesdays after the standup", "fact"),
    ("The user prefers dark mode in every editor", "preference"),
    ("Lunch is at noon on Fridays", "fact"),
    ("Facilities say the coffee machine works again", "fact"),
    ("Rotate the database credentials every quarter", "task"),
]


@pytest.fixture
def pg(postgres_dsn: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """Settings that put a store's log and index in a schema of its own."""
    return {
        "backend": "postgres",
        "postgres_dsn": postgres_dsn,
        "postgres_schema": "t_store_" + request.node.name.lower()[:40],
        "durability": "none",
    }


@pytest.fixture
def kb(tmp_path: Path, pg: dict[str, Any]) -> Iterator[Kredenc]:
    with Kredenc.open(tmp_path / "pg", embedder=HashEmbedder(), **pg) as store:
        yield store


def fill(kb: Kredenc) -> list[str]:
    return [kb.remember(text, kind=kind).id for text, kind in FACTS]


def test_remember_search_relate_graph_forget(kb: Kredenc, tmp_path: Path) -> None:
    old, *_, new, _task = fill(kb)
    assert not (tmp_path / "pg" / layout.LOG_FILE).exists()  # the log is in the database
    assert not (tmp_path / "pg" / layout.INDEX_FILE).exists()
    hits = kb.search("coffee machine broken", k=3)
    assert hits[0].id == old
    assert {"lexical", "dense"} <= set(hits[0].legs)
    kb.relate(new, old, "contradicts")
    graph = kb.context_graph("office coffee machine broken", hops=0, k=1)
    assert {old, new} <= {n.id for n in graph.nodes}
    assert GraphEdge(new, old, "contradicts", 1.0) in graph.edges
    assert kb.get(old).text == FACTS[0][0]
    kb.forget(old)
    assert old not in {h.id for h in kb.search("coffee machine broken", k=5)}
    with pytest.raises(NotFound):
        kb.get(old)
    assert kb.stats()["records"] == len(FACTS) - 1


def test_namespaces_stay_apart(kb: Kredenc) -> None:
    fill(kb)
    other = kb.scoped("other")
    mine = other.remember("The coffee in namespace other is decaf")
    assert {h.id for h in other.search("coffee", k=10)} == {mine.id}
    assert mine.id not in {h.id for h in kb.search("coffee", k=10)}


def test_reopen_and_rebuild_keep_the_answers(tmp_path: Path, pg: dict[str, Any]) -> None:
    path = tmp_path / "pg"
    with Kredenc.open(path, embedder=HashEmbedder(), **pg) as kb:
        ids = fill(kb)
        kb.relate(ids[1], ids[5], "related_to")
        before = [(h.id, round(h.score, 6)) for h in kb.search("coffee deploys", k=5)]
    with Kredenc.open(path, embedder=HashEmbedder(), **pg) as kb:
        assert [(h.id, round(h.score, 6)) for h in kb.search("coffee deploys", k=5)] == before
        report = kb.rebuild()
        assert report["records"] == len(FACTS)
        assert [(h.id, round(h.score, 6)) for h in kb.search("coffee deploys", k=5)] == before
        assert kb.context_graph("deploys", hops=1, k=1).edges


def test_the_same_answers_as_the_file_backend(tmp_path: Path, pg: dict[str, Any]) -> None:
    queries = ["coffee machine", "dark mode editor", "database credentials", "lunch friday"]
    answers: list[list[list[str]]] = []
    for where, extra in (("sqlite", {"durability": "none"}), ("pg", pg)):
        with Kredenc.open(tmp_path / where, embedder=HashEmbedder(), **extra) as kb:
            fill(kb)
            answers.append([[h.text for h in kb.search(q, k=3)] for q in queries])
    assert answers[0] == answers[1]


def test_a_memorys_history_is_the_file_backends(tmp_path: Path, pg: dict[str, Any]) -> None:
    shapes = []
    for where, extra in (("sqlite", {"durability": "none"}), ("pg", pg)):
        with Kredenc.open(tmp_path / where, embedder=HashEmbedder(), **extra) as kb:
            a, b, *_ = fill(kb)
            kb.score(a, importance=0.8, reason="seen twice")
            kb.relate(a, b, "supports")
            kb.forget(b)
            kb.rebuild()
            shapes.append(
                [
                    [(e.change, e.text, [(f.field, f.old, f.new) for f in e.fields],
                      (e.reason or "").replace(b, "B"), e.other in (a, b))
                     for e in kb.memory_history(rid)]
                    for rid in (a, b)
                ]
            )  # fmt: skip
            with pytest.raises(NotFound):
                kb.scoped("other").memory_history(a)
    assert shapes[0] == shapes[1]
    assert [c for c, *_ in shapes[1][0]] == ["created", "changed", "related", "unrelated"]
    assert [c for c, *_ in shapes[1][1]] == ["created", "related", "forgotten"]


def test_postgres_without_a_dsn_is_refused(tmp_path: Path) -> None:
    with pytest.raises((InvalidInput, ValueError), match="postgres_dsn"):
        Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), backend="postgres")


def test_the_cli_on_postgres_remembers_searches_and_checks(
    tmp_path: Path,
    pg: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kredenc.interfaces.cli import main

    monkeypatch.setattr("kredenc.engine.make_default_embedder", lambda _s: HashEmbedder())
    for key, value in pg.items():
        monkeypatch.setenv(f"KREDENC_{key.upper()}", str(value))
    home = str(tmp_path / "cli")

    def run(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        try:
            main(["--store", home, *args])
        except SystemExit as exc:
            return int(exc.code or 0), capsys.readouterr().out
        return 0, capsys.readouterr().out

    assert run("remember", "Deploys happen on Tuesdays", "--kind", "fact")[0] == 0
    code, out = run("search", "when do we deploy", "--json")
    assert code == 0 and "Deploys happen on Tuesdays" in out
    code, out = run("check")
    assert code == 0, out
    assert "postgresql schema" in out.lower() and "sound" in out
    assert pg["postgres_dsn"] not in out  # the DSN is a secret
    # --full does not claim a comparison it does not make (it said "sound" and compared
    # nothing when a row of the index was gone)
    code, out = run("check", "--full")
    assert code == 0 and "--full compares every record on SQLite stores only" in out
    # A damaged record is found and named.
    with migrate.connect(pg["postgres_dsn"], pg["postgres_schema"]) as conn:
        conn.execute("UPDATE log_records SET crc = crc + 1 WHERE seq = 1")
    code, out = run("check")
    assert code == 1
    assert "damaged record" in out and "NOT sound" in out


GUIDE = """# Tea guide

Green tea is steeped at eighty degrees for two minutes.

## Coffee

Espresso needs finely ground beans and nine bars of pressure.
"""


def _export(kb: Kredenc) -> list[str]:
    out = io.StringIO()
    kb.export(out)
    return out.getvalue().splitlines()


def test_export_and_import_move_a_store_between_backends(
    tmp_path: Path, pg: dict[str, Any]
) -> None:
    """SQLite -> PostgreSQL -> SQLite: the same lines out, the same hits, scores and all."""
    src = tmp_path / "guide.md"
    src.write_text(GUIDE, encoding="utf-8")
    query = "oolong tea morning espresso"

    def answers(kb: Kredenc) -> list[tuple[str, float]]:
        return [(h.id, round(h.score, 6)) for h in kb.search(query, k=8)]

    with Kredenc.open(tmp_path / "a", embedder=HashEmbedder(), durability="none") as a:
        a.ingest([src])
        tea = a.remember(
            "The user drinks oolong every morning",
            kind="preference",
            tags=["drink"],
            importance=0.9,
            meta={"origin": "chat"},
        )
        job = a.remember("Renew the passport", kind="task", task_status="pending")
        a.score(job.id, importance=0.2, status="disputed", reason="later")
        gone = a.remember("An old phone number", kind="fact")
        a.relate(tea.id, job.id, "related_to", weight=0.5)
        a.forget(gone.id)
        a.file_turns("s1", [{"role": "user", "content": "I like oolong"}])
        a.scoped("other").remember("Espresso in another namespace", kind="note")
        first, hits_a = _export(a), answers(a)
    with Kredenc.open(tmp_path / "b", embedder=HashEmbedder(), **pg) as b:
        b.import_lines(first)
        second, hits_b = _export(b), answers(b)
        assert b.session_history("s1") == [{"role": "user", "content": "I like oolong"}]
        assert b.get(job.id).importance == 0.2
    with Kredenc.open(tmp_path / "c", embedder=HashEmbedder(), durability="none") as c:
        c.import_lines(second)
        third, hits_c = _export(c), answers(c)
    assert second[0] == first[0] == third[0]
    assert sorted(second[1:]) == sorted(first[1:]) == sorted(third[1:])
    assert hits_a and hits_b == hits_a and hits_c == hits_a


def test_a_reader_beside_the_writer_sees_its_writes(tmp_path: Path, pg: dict[str, Any]) -> None:
    path = tmp_path / "shared"
    with Kredenc.open(path, embedder=HashEmbedder(), **pg) as writer:
        first = writer.remember("The first note about gardens")
        with Kredenc.open(path, embedder=HashEmbedder(), read_only=True, **pg) as reader:
            assert [h.id for h in reader.search("gardens", k=5)] == [first.id]
            second = writer.remember("A second note about gardens and roses")
            assert {h.id for h in reader.search("gardens", k=5)} == {first.id, second.id}
            assert reader.get(second.id).text == "A second note about gardens and roses"
            assert reader.stats()["records"] == 2


def test_a_server_that_is_not_there_is_one_line_without_the_password(tmp_path: Path) -> None:
    dsn = "host=127.0.0.1 port=1 user=kredenc password=s3cret-pw dbname=kredenc connect_timeout=2"
    with pytest.raises(StoreError) as err:
        Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), backend="postgres", postgres_dsn=dsn)
    text = f"{err.value.message} {err.value.hint}"
    assert "s3cret-pw" not in text
    assert "postgres_dsn" in err.value.hint
    assert "\n" not in err.value.message


# -- a rebuild while other handles serve the store ------------------------------------
def test_other_handles_search_after_a_rebuild(tmp_path: Path, pg: dict[str, Any]) -> None:
    with Kredenc.open(tmp_path / "a", embedder=HashEmbedder(), **pg) as a:
        ids = [a.remember(t).id for t in ("tea with milk", "coffee at noon", "green tea")]
        with Kredenc.open(tmp_path / "b", embedder=HashEmbedder(), **pg) as b:
            for _ in range(3):  # warm plans and prepared statements
                before = [h.id for h in b.search("tea", k=5)]
                words = [h.id for h in b.search("tea", k=5, mode="lexical")]
            assert set(words) == {ids[0], ids[2]}
            a.rebuild()
            assert [h.id for h in b.search("tea", k=5)] == before
            assert [h.id for h in b.search("tea", k=5, mode="lexical")] == words
            assert [h.id for h in b.search("tea", k=5, mode="dense")]
            assert b.get(ids[1]).text == "coffee at noon"
            new = b.remember("iced tea in summer").id
            assert new in {h.id for h in a.search("iced tea", k=5)}


def test_searches_during_a_rebuild_see_the_whole_index(tmp_path: Path, pg: dict[str, Any]) -> None:
    """Another handle's searches while one rebuilds: each answers from a whole index
    (the old one or the new one), never an error and never a half-refilled one (the
    last record filed is the last one a refill writes)."""
    texts = [f"note {i} about tea and the garden" for i in range(3000)]
    with Kredenc.open(tmp_path / "a", embedder=HashEmbedder(), **pg) as a:
        a.remember_many([{"text": t} for t in texts])
        last = a.remember("the zebra crossing by the gate").id
        with Kredenc.open(tmp_path / "b", embedder=HashEmbedder(), **pg) as b:
            assert [h.id for h in b.search("zebra", k=3, mode="lexical")] == [last]
            seen: list[object] = []
            done = threading.Event()

            def watch() -> None:
                while not done.is_set():
                    try:
                        seen.append([h.id for h in b.search("zebra", k=3, mode="lexical")])
                    except Exception as exc:  # noqa: BLE001 - what the test looks for
                        seen.append(f"{type(exc).__name__}: {exc}")
                    time.sleep(0.005)

            watcher = threading.Thread(target=watch)
            watcher.start()
            try:
                a.rebuild()
            finally:
                done.set()
                watcher.join()
    bad = [s for s in seen if s != [last]]
    assert len(seen) > 3
    assert not bad, f"{len(bad)} of {len(seen)} searches during the rebuild: {bad[:3]}"


def test_a_rebuild_that_fails_keeps_the_old_index(
    tmp_path: Path, pg: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fill of the staging index fails: the store's index is the old one, whole,
    still written to, and the next rebuild (which drops the leftover) succeeds."""
    from kredenc.storage.store import Store

    with Kredenc.open(tmp_path / "a", embedder=HashEmbedder(), **pg) as a:
        ids = [a.remember(t).id for t in ("tea with milk", "coffee at noon")]
        real = Store._catch_up

        def fill_fails(self: Store) -> None:
            raise RuntimeError("the disk is full")

        monkeypatch.setattr(Store, "_catch_up", fill_fails)
        with pytest.raises(RuntimeError, match="disk is full"):
            a.rebuild()
        monkeypatch.setattr(Store, "_catch_up", real)
        assert [h.id for h in a.search("tea", k=3, mode="lexical")] == [ids[0]]
        late = a.remember("green tea at four").id
        assert a.rebuild()["records"] == 3
        assert {h.id for h in a.search("tea", k=3, mode="lexical")} == {ids[0], late}


def _schemas(dsn: str) -> set[str]:
    with migrate.connect(dsn, "public") as conn:
        return {str(r[0]) for r in conn.execute("SELECT nspname FROM pg_namespace")}


def test_a_failed_creating_command_leaves_no_store_and_no_schema(
    tmp_path: Path,
    pg: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What a failed command created is taken away: the folder, and the schema it made
    (never a schema whose log it only adopted)."""
    from kredenc.interfaces.cli import main

    monkeypatch.setattr("kredenc.engine.make_default_embedder", lambda _s: HashEmbedder())
    for key, value in pg.items():
        monkeypatch.setenv(f"KREDENC_{key.upper()}", str(value))
    schema, dsn = pg["postgres_schema"], pg["postgres_dsn"]

    def run(home: Path, *args: str) -> int:
        try:
            main(["--store", str(home), *args])
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0

    assert run(tmp_path / "new", "remember", "") == 2
    assert not (tmp_path / "new").exists()
    assert schema not in _schemas(dsn)
    # A schema that holds another store's (empty) log is adopted, and kept.
    with Kredenc.open(tmp_path / "first", embedder=HashEmbedder(), **pg):
        pass
    assert run(tmp_path / "second", "remember", "") == 2
    assert not (tmp_path / "second").exists()
    assert schema in _schemas(dsn)
    capsys.readouterr()


def test_a_failed_first_command_never_drops_a_schema_that_was_there(
    tmp_path: Path,
    pg: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The review's find: a failed first command in a schema that already held other
    tables (or in public, where the vector extension lives) dropped it, CASCADE, with
    everything in it. Only a schema the command itself created may go."""
    from kredenc.interfaces.cli import main

    monkeypatch.setattr("kredenc.engine.make_default_embedder", lambda _s: HashEmbedder())
    dsn = pg["postgres_dsn"]
    crm = pg["postgres_schema"] + "_crm"
    with migrate.connect(dsn, "public") as conn:
        conn.execute(f"CREATE SCHEMA {crm}")
        conn.execute(f"CREATE TABLE {crm}.customers(name text)")
        conn.execute(f"INSERT INTO {crm}.customers VALUES ('Ada'), ('Bo')")
        conn.commit()
    for schema in (crm, "public"):
        for key, value in {**pg, "postgres_schema": schema}.items():
            monkeypatch.setenv(f"KREDENC_{key.upper()}", str(value))
        try:
            main(["--store", str(tmp_path / schema), "remember", ""])
        except SystemExit as exc:
            assert exc.code == 2
        assert not (tmp_path / schema).exists()
    assert {crm, "public"} <= _schemas(dsn)
    with migrate.connect(dsn, "public") as conn:
        assert conn.execute(f"SELECT count(*) FROM {crm}.customers").fetchone() == (2,)
        vector = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
        assert vector.fetchone() == (1,)
    capsys.readouterr()


def test_a_postgres_store_folder_says_where_its_log_is(
    tmp_path: Path,
    pg: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """store.json records the backend and the schema (never the DSN); ``init`` on the
    store is a no-op; without the PostgreSQL settings every command says which are
    missing, and nothing offers ``init --new-log`` (which would orphan the folder)."""
    import json

    from kredenc.interfaces.cli import main

    monkeypatch.setattr("kredenc.engine.make_default_embedder", lambda _s: HashEmbedder())
    home = tmp_path / "pgstore"

    def run(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        try:
            main(["--store", str(home), *args])
        except SystemExit as exc:
            return int(exc.code or 0), capsys.readouterr().err
        return 0, capsys.readouterr().err

    with monkeypatch.context() as env:
        for key, value in pg.items():
            env.setenv(f"KREDENC_{key.upper()}", str(value))
        assert run("remember", "Deploys happen on Tuesdays")[0] == 0
        assert run("init") == (0, "")
    meta = json.loads((home / "store.json").read_text())
    assert meta["backend"] == "postgres" and meta["postgres_schema"] == pg["postgres_schema"]
    assert pg["postgres_dsn"] not in json.dumps(meta)
    for args in (("search", "deploys"), ("init",), ("remember", "more")):
        code, err = run(*args)
        assert code == 1, (args, err)
        assert err.count("\n") == 1 and "--new-log" not in err, err
        assert "KREDENC_BACKEND" in err and "KREDENC_POSTGRES_DSN" in err, err
        assert pg["postgres_schema"] in err
    code, err = run("init", "--new-log")
    assert code in (1, 2) and not (home / layout.LOG_FILE).exists(), err
    # salvage reads a haystack.log: this store has none, and says where its log is
    code, err = run("salvage", str(tmp_path / "copy"))
    assert code == 1 and "PostgreSQL" in err and "export" in err, err
    assert not (tmp_path / "copy").exists()
    with monkeypatch.context() as env:  # stats: records, and no "bytes" that are seqs
        for key, value in pg.items():
            env.setenv(f"KREDENC_{key.upper()}", str(value))
        capsys.readouterr()
        main(["--store", str(home), "stats"])
        out = capsys.readouterr().out
        assert "log: 1 records" in out and "bytes" not in out, out
