"""The PostgreSQL log with several writer processes: two processes (and two handles
in one) write one store at once and take turns under the log's writers' lock; nothing
is lost or duplicated, each sees the other's writes, namespaces stay apart, and a
record that one writer logged but never applied is taken into the index by the next."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.records import new_id
from kredenc.storage import layout
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.postgres import require

pytestmark = pytest.mark.postgres

require()

from kredenc.storage.postgres.log import PostgresLog  # noqa: E402

CHILD = Path(__file__).with_name("_two_writers_proc.py")
SRC = Path(__file__).resolve().parents[3] / "src"


@pytest.fixture
def pg(postgres_dsn: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    return {
        "backend": "postgres",
        "postgres_dsn": postgres_dsn,
        "postgres_schema": "t_log_" + re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40],
        "durability": "none",
    }


def _child(home: Path, pg: dict[str, Any], tag: str, count: int) -> subprocess.Popen[str]:
    dsn, schema = pg["postgres_dsn"], pg["postgres_schema"]
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(home), dsn, schema, tag, str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
    )


def _say(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


@pytest.mark.parametrize("one_home", [True, False], ids=["one-home", "two-homes"])
def test_two_processes_write_one_store(tmp_path: Path, pg: dict[str, Any], one_home: bool) -> None:
    homes = [tmp_path / "a", tmp_path / ("a" if one_home else "b")]
    count = 40
    procs = [_child(home, pg, tag, count) for home, tag in zip(homes, ("p0", "p1"), strict=True)]
    try:
        for proc in procs:
            assert _line(proc) == "ready"
        for proc in procs:
            _say(proc, "go")
        acked = [json.loads(_line(proc)) for proc in procs]
        for proc, other in zip(procs, reversed(acked), strict=True):
            _say(proc, "look")
            _say(proc, json.dumps(other["shared"]))
        seen = [json.loads(_line(proc)) for proc in procs]
        for proc in procs:
            assert proc.wait(timeout=60) == 0
    finally:
        for proc in procs:
            proc.kill()
            proc.communicate(timeout=30)
    # Each process reads every shared memory the other acknowledged...
    for view, other in zip(seen, reversed(acked), strict=True):
        assert sorted(view["shared"]) == sorted(other["shared"])
    # ...and its own namespace's searches return its own memories only.
    for view, mine in zip(seen, acked, strict=True):
        own = set(mine["p0"] if "p0" in mine else mine["p1"])
        assert view["hits"] and set(view["hits"]) <= own
    # A third handle finds exactly what was acknowledged: none lost, none twice.
    written = {ns: [rid for a in acked for rid in a.get(ns, [])] for ns in ("p0", "p1", "shared")}
    with Kredenc.open(homes[0], embedder=HashEmbedder(), **pg) as kb:
        total = sum(len(ids) for ids in written.values())
        assert kb.store.haystack.last_seq == total  # one log record per memory, no gaps
        assert [r.payload["seq"] for r in kb.store.haystack.iter_from()] == list(
            range(1, total + 1)
        )
        for ns, ids in written.items():
            assert len(ids) == len(set(ids))
            view = kb.scoped(ns)
            assert view.stats()["records"] == len(ids)
            assert {m.id for m in view.list_memories(limit=500)} == set(ids)
        report = kb.check()
        assert report["sound"], report
    # No writer held the store directory's file lock (a second would have been refused).
    assert not (homes[0] / layout.LOCK_FILE).exists()


def test_two_handles_take_turns_and_take_in_what_the_other_left(
    tmp_path: Path, pg: dict[str, Any]
) -> None:
    with (
        Kredenc.open(tmp_path / "a", embedder=HashEmbedder(), **pg) as a,
        Kredenc.open(tmp_path / "b", embedder=HashEmbedder(), **pg) as b,
    ):
        first = a.remember("the orchard's apples ripen in September")
        assert b.get(first.id).text == first.text  # b reads a's write at once
        # A writer that logged a record and died before applying it: the record is in
        # the log, not in the index. The next write (by anyone) takes it in first.
        rid = new_id("memory")
        orphan = {
            "op": "put",
            "id": rid,
            "ns": "default",
            "drawer": "memories",
            "type": "memory",
            "kind": "fact",
            "text": "pears are picked in August",
            "ts": time.time(),
        }
        b.store.haystack.append([orphan])
        assert rid not in {h.id for h in b.search("pears picked August", k=5)}
        second = a.remember("plums come last, in October")
        hits = {h.id for h in b.search("pears picked August", k=5)}
        assert rid in hits
        assert {first.id, second.id, rid} == {m.id for m in a.list_memories(limit=10)}


def test_the_writers_lock_keeps_another_process_out(pg: dict[str, Any], tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), **pg):
        pass  # the schema and its log exist now
    dsn, schema = pg["postgres_dsn"], pg["postgres_schema"]
    one, two = PostgresLog(dsn, schema), PostgresLog(dsn, schema)
    try:
        order: list[str] = []

        def second() -> None:
            with two.exclusive():
                order.append("two")

        with one.exclusive():
            worker = threading.Thread(target=second)
            worker.start()
            time.sleep(0.5)
            order.append("one")  # two is still waiting for the lock
        worker.join(timeout=10)
        assert order == ["one", "two"]
        # The lock brings the handle's end up to the other's appends.
        ((seq, _),) = one.append([{"op": "access", "ns": "default", "counts": {}}])
        with two.exclusive():
            assert two.last_seq == seq
    finally:
        one.close()
        two.close()


# -- the server restarts under an open store ----------------------------------------------
def test_a_store_writes_and_searches_on_after_the_server_restarts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every connection the handle holds is cut by the restart: the pooled ones are
    replaced as they are taken, the writer's is opened again. At most the first write
    after the cut fails, with a StoreError that says the connection was lost; every
    acknowledged write is in the log once, and nothing logs a traceback."""
    from kredenc.errors import StoreError
    from kredenc.testing.postgres import PostgresServer

    with PostgresServer() as server:
        dsn = server.create_app_database("kredenc_restart", role="kredenc")
        with Kredenc.open(
            tmp_path / "s",
            embedder=HashEmbedder(),
            backend="postgres",
            postgres_dsn=dsn,
            postgres_schema="rs",
            durability="none",
        ) as kb:
            acked = [kb.remember("a garden note before the first restart").id]
            failed: list[StoreError] = []
            for restart in range(2):
                server.restart()
                assert [h.id for h in kb.search("garden note", k=50)]  # reads come back
                for n in range(3):
                    try:
                        acked.append(kb.remember(f"garden note {n} after restart {restart}").id)
                    except StoreError as exc:
                        failed.append(exc)
            assert len(failed) <= 2, [str(f) for f in failed]  # one per restart at most
            for exc in failed:
                assert "connection" in exc.message and "disk" not in exc.hint
            assert len(acked) >= 5
            found = [h.id for h in kb.search("garden note", k=50)]
            assert sorted(found) == sorted(acked)
            assert kb.stats()["records"] == len(acked)
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


def test_an_append_on_a_lost_connection_fails_once_then_the_log_reconnects(
    pg: dict[str, Any],
) -> None:
    import psycopg

    from kredenc.errors import StoreError

    dsn, schema = pg["postgres_dsn"], pg["postgres_schema"]
    log = PostgresLog(dsn, schema)
    try:
        log.append([{"op": "put", "id": "a"}])
        pid = log._conn.info.backend_pid
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
        with pytest.raises(StoreError) as err:
            log.append([{"op": "put", "id": "b"}])
        assert "connection was lost" in err.value.message and "disk" not in err.value.hint
        assert log.append([{"op": "put", "id": "c"}]) == [(2, 2)]  # no gap, nothing doubled
        with log.exclusive():  # the lock is taken on the new connection
            assert log.append([{"op": "put", "id": "d"}]) == [(3, 3)]
        assert [r.payload["id"] for r in log.iter_from()] == ["a", "c", "d"]
    finally:
        log.close()


def test_a_sync_after_a_crash_acknowledges_nothing_the_lost_session_wrote(
    tmp_path: Path,
) -> None:
    """The review's find: inside the writers' lock, a group's appends commit without
    waiting for the WAL, then one sync makes them durable. After a crash between them,
    sync reconnected and succeeded on a new session, so a record the crash had lost was
    acknowledged (and its seq given again to another). The sync must fail instead."""
    import psycopg

    from kredenc.errors import StoreError
    from kredenc.storage.postgres.log import PostgresLog
    from kredenc.testing.postgres import PostgresServer

    with PostgresServer() as server:
        dsn = server.create_app_database("kredenc_crash", role="kredenc")
        log = PostgresLog(dsn, "crash_sync")
        try:
            log.append([{"op": "put", "id": "first"}])
            with psycopg.connect(server.dsn(), autocommit=True) as admin:
                admin.execute("CHECKPOINT")
            with log.exclusive():
                log.append([{"op": "put", "id": "lost-in-the-crash"}], sync=False)
                server.crash()
                with pytest.raises(StoreError):
                    log.append([{"op": "put", "id": "after"}], sync=False)
                with pytest.raises(StoreError):
                    log.sync()  # nothing of this group may be acknowledged
            with log.exclusive():  # and the log goes on, on a new connection
                (placed,) = log.append([{"op": "put", "id": "next"}])
            ids = [log.read(seq)["id"] for seq in range(1, placed[0] + 1)]
            assert ids[0] == "first" and ids[-1] == "next" and len(set(ids)) == len(ids)
        finally:
            log.close()
