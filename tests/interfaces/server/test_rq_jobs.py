"""``jobs_queue = "rq"``: the server queues ingest jobs and lifecycle runs to RQ, real
``kredenc worker`` processes run them against one PostgreSQL store, and the server
reports their progress from Redis (the same routes, the same tenant walls).

Against the real Redis on loopback (a key prefix per test, RQ's keys removed after)
and the PostgreSQL of ``kredenc.testing.postgres``. A worker killed with SIGKILL in
the middle of a job, and a database connection cut under one, end with every
document filed once: the job is retried, what was filed is ``unchanged``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("rq")

import redis

from kredenc.engine import Kredenc
from kredenc.interfaces.auth import KeyRing
from kredenc.interfaces.server.rq_jobs import RqJobs
from kredenc.interfaces.server.run import ServerThread
from kredenc.interfaces.server.state import ServerConfig
from kredenc.testing.embedders import HashEmbedder

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

WORKER = Path(__file__).with_name("_worker_proc.py")
ENTRY = "from kredenc.interfaces.cli import main; main()"
DOCS = 24


@pytest.fixture
def rq_prefix(redis_prefix: str, redis_client: redis.Redis) -> Iterator[str]:
    """The test's key prefix (and RQ queue); RQ's keys for it removed after (the
    queue's, its jobs', the test's workers': each names the prefix's token)."""
    yield redis_prefix
    token = redis_prefix.split(":")[1]
    gone: list[bytes] = []
    for key in redis_client.scan_iter(match="rq:*", count=1000):
        name = key.decode()
        if token in name:
            gone.append(key)
        elif (
            name.startswith("rq:job:")
            and redis_client.type(key) == b"hash"
            and redis_client.hget(key, "origin") == redis_prefix.encode()
        ):
            job_id = name.removeprefix("rq:job:")
            gone += [key, *redis_client.scan_iter(match=f"rq:*{job_id}*", count=1000)]
    if gone:
        redis_client.unlink(*set(gone))
    for registry in ("rq:queues", "rq:workers"):
        mine = [m for m in redis_client.smembers(registry) if token in m.decode()]
        if mine:
            redis_client.srem(registry, *mine)


@pytest.fixture
def settings(postgres_dsn: str, redis_url: str, rq_prefix: str) -> dict[str, Any]:
    """A PostgreSQL store in its own schema, its jobs on RQ under the test's prefix."""
    return {
        "backend": "postgres",
        "postgres_dsn": postgres_dsn,
        "postgres_schema": "t_rq_" + uuid.uuid4().hex[:12],
        "durability": "none",
        "jobs_queue": "rq",
        "jobs_redis_url": redis_url,
        "jobs_redis_prefix": rq_prefix,
        "jobs_heartbeat_s": 1,
        "jobs_retries": 3,
    }


def _env(settings: dict[str, Any]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KREDENC_")}
    env.update({f"KREDENC_{k.upper()}": str(v) for k, v in settings.items()})
    return env


class Workers:
    """``kredenc worker`` processes (HashEmbedder), each in its own process group."""

    def __init__(self, settings: dict[str, Any], home: Path) -> None:
        self.settings, self.home = settings, home
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, *extra: str) -> subprocess.Popen[str]:
        token = str(self.settings["jobs_redis_prefix"]).split(":")[1]
        name = f"kredenc-test-{token}-{len(self.procs)}"
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(self.home), name, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(self.settings),
            start_new_session=True,
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("ready "):
            proc.kill()
            raise AssertionError(f"worker did not start: {line!r} {proc.communicate()[1]}")
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)


@pytest.fixture
def store(tmp_path: Path, settings: dict[str, Any]) -> Iterator[Kredenc]:
    with Kredenc.open(tmp_path / "store", embedder=HashEmbedder(), **settings) as kb:
        yield kb


@pytest.fixture
def workers(store: Kredenc, settings: dict[str, Any]) -> Iterator[Workers]:
    pool = Workers(settings, store.home)
    try:
        yield pool
    finally:
        pool.stop()


def _wait(what: str, check: Callable[[], Any], timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _folder(base: Path, n: int = DOCS) -> Path:
    """``n`` Markdown notes, each long enough for several chunks."""
    folder = base / "notes"
    folder.mkdir()
    for i in range(n):
        body = "\n\n".join(
            f"Note {i} paragraph {p}: the kettle number {i} boils water for tea blend {p}. " * 6
            for p in range(8)
        )
        (folder / f"note{i:02d}.md").write_text(f"# Note {i}\n\n{body}\n")
    return folder


def _filed_once(kb: Kredenc, folder: Path) -> None:
    """Every note is one live document with its chunks, and the log holds each
    document's put exactly once (no half-filed or duplicated batch)."""
    fresh = Kredenc(kb.settings, HashEmbedder(), namespace=kb.namespace, read_only=True)
    try:
        docs = fresh.list_documents(limit=1000)
        origins = Counter(Path(d.origin).name for d in docs)
        assert origins == Counter(p.name for p in folder.iterdir()), origins
        puts = Counter(
            Path(str(rec.payload.get("origin"))).name
            for rec in fresh.haystack.iter_from()
            if rec.payload.get("op") == "put" and rec.payload.get("type") == "document"
        )
        assert set(puts.values()) == {1}, puts
        for doc in docs:
            _entry, chunks = fresh.read_document(doc.id)
            assert len(chunks) == doc.chunks > 1
    finally:
        fresh.close()


def test_server_queues_the_worker_runs_and_the_server_reports(
    store: Kredenc, workers: Workers, tmp_path: Path
) -> None:
    keys = KeyRing(store.home)
    alice, _ = keys.add("alice")
    bob, _ = keys.add("bob")
    workers.start()
    config = ServerConfig(mcp=False, web=False, rate_per_minute=0)
    with ExitStack() as stack:
        url = stack.enter_context(ServerThread(store, config))
        a = stack.enter_context(
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {alice}"}, timeout=60)
        )
        b = stack.enter_context(
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {bob}"}, timeout=60)
        )
        files = [
            ("files", ("brewing.md", b"# Brewing\n\nGreen tea brews at 80 degrees.\n")),
            ("files", ("storing.txt", b"Keep oolong in a dark tin away from spices.\n")),
        ]
        queued = a.post("/ingest", files=files)
        assert queued.status_code == 202, queued.text
        job = queued.json()["job"]
        assert job["state"] == "queued"
        assert not list((store.home / "uploads").glob("*"))  # the bytes went to Redis

        done = _wait(
            "the job",
            lambda: (
                (r := a.get(f"/ingest/jobs/{job['id']}").json())["state"] in ("done", "failed")
                and r
            ),
        )
        assert done["state"] == "done", done
        statuses = {f["source"]: f["status"] for f in done["report"]["files"]}
        assert statuses == {"brewing.md": "filed", "storing.txt": "filed"}

        names = []
        with a.stream("GET", f"/ingest/jobs/{job['id']}/events") as stream:
            assert stream.status_code == 200
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    names.append(line.removeprefix("event: "))
        assert names == ["file", "file", "done"]

        # Another tenant's job is a 404 like one that never existed; listings are apart.
        assert b.get(f"/ingest/jobs/{job['id']}").status_code == 404
        assert b.get(f"/ingest/jobs/{job['id']}/events").status_code == 404
        assert b.get("/ingest/jobs").json()["items"] == []
        assert [j["id"] for j in a.get("/ingest/jobs").json()["items"]] == [job["id"]]

        # The worker filed into alice's namespace of the shared store.
        alice_view = Kredenc(store.settings, HashEmbedder(), namespace="alice", read_only=True)
        try:
            hits = alice_view.search("oolong dark tin", k=3)
            assert hits and "oolong" in hits[0].text
        finally:
            alice_view.close()

        # Lifecycle runs go to a worker too, with the same answer shape.
        ran = a.post("/jobs/run", json={"names": ["decay"]})
        assert ran.status_code == 200, ran.text
        assert [r["job"] for r in ran.json()["reports"]] == ["decay"]
        assert a.post("/jobs/run", json={"names": ["nope"]}).status_code == 422


def test_a_worker_killed_mid_job_is_retried_and_files_each_document_once(
    store: Kredenc, workers: Workers, settings: dict[str, Any], tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    jobs = RqJobs(store.settings)
    try:
        first = workers.start()
        job = jobs.submit(store, sources=[str(folder)], inputs=[str(folder)])

        def some_filed() -> bool:
            events, _ = jobs.events(store.namespace, job["id"], 0)
            return len([e for e in events if e.name == "file"]) >= 3

        _wait("a few documents filed", some_filed)
        os.killpg(first.pid, signal.SIGKILL)  # mid-job: documents left to file
        first.wait(timeout=30)
        assert jobs.get(store.namespace, job["id"])["state"] == "running"
        left = list(Path(tempfile.gettempdir()).glob(f"kredenc-worker-{first.pid}-*"))
        assert len(left) == 1  # the killed worker could not remove its folder

        workers.start()  # finds the job abandoned (3 missed beats) and runs it again
        assert not left[0].exists()  # the new worker removed the dead one's folder
        done = _wait(
            "the retried job",
            lambda: (
                (r := jobs.get(store.namespace, job["id"]))["state"] in ("done", "failed") and r
            ),
        )
        assert done["state"] == "done", done
        record = jobs.book.load(job["id"])
        assert record is not None and record["attempts"] == 2
        statuses = Counter(f["status"] for f in done["report"]["files"])
        assert statuses["unchanged"] >= 3 and statuses["unchanged"] + statuses["filed"] == DOCS
        _filed_once(store, folder)
    finally:
        jobs.close()


def test_a_cut_database_connection_is_recovered_without_loss_or_duplicates(
    store: Kredenc,
    workers: Workers,
    settings: dict[str, Any],
    tmp_path: Path,
    postgres_server: Any,
) -> None:
    import psycopg

    folder = _folder(tmp_path)
    jobs = RqJobs(store.settings)
    try:
        workers.start()
        job = jobs.submit(store, sources=[str(folder)], inputs=[str(folder)])

        def some_filed() -> bool:
            events, _ = jobs.events(store.namespace, job["id"], 0)
            return len([e for e in events if e.name == "file"]) >= 3

        _wait("a few documents filed", some_filed)
        with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
            cut = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE usename = 'kredenc' AND pid <> pg_backend_pid()"
                " AND application_name NOT LIKE 'test-keep%%'"
            ).fetchone()
        assert cut is not None and cut[0] > 0
        done = _wait(
            "the job after the cut",
            lambda: (
                (r := jobs.get(store.namespace, job["id"]))["state"] in ("done", "failed") and r
            ),
        )
        assert done["state"] == "done", done
        record = jobs.book.load(job["id"])
        # A cut between two documents is taken up in the same attempt (the log's writer
        # reconnects at its next lock); one cut inside an append fails the attempt (a
        # store error stops the run) and RQ runs the job again: either way, every
        # document filed once (below).
        assert record is not None and record["attempts"] >= 1
    finally:
        jobs.close()
    # The test's own store lost its connections too: judge through a fresh handle.
    _filed_once(store, folder)


def test_the_thread_queue_is_the_default_and_rq_needs_postgres(
    tmp_path: Path, redis_url: str, rq_prefix: str
) -> None:
    from kredenc.errors import InvalidInput

    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        assert kb.settings.jobs_queue == "thread"
        with pytest.raises(InvalidInput, match="needs backend = 'postgres'"):
            RqJobs(kb.settings.model_copy(update={"jobs_queue": "rq"}))


def _worker_cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("KREDENC_")}
    base.update(env)
    return subprocess.run(
        [sys.executable, "-c", ENTRY, "--store", str(tmp_path / "s"), "worker", *args],
        capture_output=True,
        check=False,
        text=True,
        env=base,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("env", "code", "says"),
    [
        ({}, 2, "kredenc worker needs backend = 'postgres'"),
        (
            {"KREDENC_BACKEND": "postgres", "KREDENC_POSTGRES_DSN": "host=127.0.0.1 port=1"},
            2,
            "needs a Redis: jobs_redis_url, redis_url and opcache_redis_url are empty",
        ),
        (
            {
                "KREDENC_BACKEND": "postgres",
                "KREDENC_POSTGRES_DSN": "host=127.0.0.1 port=1",
                "KREDENC_JOBS_REDIS_URL": "CLOSED",
            },
            1,
            "the job queue's Redis at redis://127.0.0.1:",
        ),
    ],
)
def test_a_worker_without_a_usable_redis_or_store_says_so_in_one_line(
    tmp_path: Path, env: dict[str, str], code: int, says: str
) -> None:
    from kredenc.testing.redis import closed_port_url

    env = {k: closed_port_url() if v == "CLOSED" else v for k, v in env.items()}
    done = _worker_cli(tmp_path, **env)
    assert done.returncode == code, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert len([line for line in done.stderr.splitlines() if line.startswith("error")]) == 1
    assert not (tmp_path / "s").exists() or not list((tmp_path / "s").glob("haystack*"))


def test_a_job_record_says_failed_once_its_retries_are_spent(
    store: Kredenc, settings: dict[str, Any]
) -> None:
    """RQ's failure callback on an abandoned job with no retries left (what a worker
    cleaning the registries calls) records the job as failed, with the one error."""
    from rq.job import Job as RqJob

    from kredenc.interfaces.server import tasks

    jobs = RqJobs(store.settings.model_copy(update={"jobs_retries": 0}))
    try:
        job = jobs.submit(store, sources=["x.md"], inputs=["/nowhere/x.md"])
        rq_job = RqJob.fetch(job["id"], connection=jobs.client, serializer=jobs.queue.serializer)
        tasks.on_failure(rq_job, jobs.client)
        failed = jobs.get(store.namespace, job["id"])
        assert failed["state"] == "failed"
        assert failed["error"]["code"] == "worker_lost"
        names = [e.name for e in jobs.events(store.namespace, job["id"], 0)[0]]
        assert names == ["failed"]
    finally:
        jobs.queue.empty()
        jobs.close()


def test_job_records_json_round_trip(store: Kredenc) -> None:
    """The record the server writes is plain JSON (no pickles in Redis)."""
    jobs = RqJobs(store.settings)
    try:
        job = jobs.submit(store, sources=["a.md"], inputs=["/nowhere/a.md"])
        raw = jobs.client.get(f"{store.settings.jobs_redis_prefix}job:{job['id']}")
        assert json.loads(raw)["namespace"] == store.namespace
    finally:
        jobs.queue.empty()
        jobs.close()


FAST_JOBS = {"scheduler_intervals": {"decay": 0.5}, "scheduler_throttle_s": 0.1}


def test_a_scheduled_run_of_the_server_is_queued_for_a_worker(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    fast = {**settings, **FAST_JOBS}
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), **fast) as kb:
        kb.remember("the spare key is under the blue flowerpot")
        pool = Workers(
            {**fast, "scheduler_intervals": json.dumps(FAST_JOBS["scheduler_intervals"])}, kb.home
        )
        try:
            pool.start()
            config = ServerConfig(mcp=False, web=False, scheduler=True)
            with ServerThread(kb, config) as url, httpx.Client(base_url=url, timeout=60) as c:

                def decay() -> dict[str, Any] | None:
                    found = {j["name"]: j for j in c.get("/jobs").json()["items"]}["decay"]
                    return found if found["last_run"] is not None else None

                ran = _wait("a scheduled decay run", decay, timeout=60)
                assert ran["last_result"]["job"] == "decay"
                assert ran["last_result"]["examined"] >= 1  # on the worker, over the store
        finally:
            pool.stop()


def test_a_worker_with_the_scheduler_claims_the_period_in_the_stores_redis(
    tmp_path: Path, settings: dict[str, Any], redis_client: redis.Redis
) -> None:
    fast = {**settings, "scheduler_intervals": '{"decay": 30}', "scheduler_throttle_s": 0.1}
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), **settings) as kb:
        pool = Workers(fast, kb.home)
        try:
            pool.start("scheduler")
            # The worker's scheduler took this period: its claim is in the queue's Redis
            # (nobody else here claims), living the job's interval.
            store = kb.store
            key = f"{store.settings.redis_prefix}claim:{store._shared_id()}:period:default:decay"
            left = _wait("the worker's claim", lambda: redis_client.pttl(key) > 0, timeout=30)
            assert left and 0 < redis_client.pttl(key) <= 30_000
            assert 0 < store.claim("period:default:decay", 30, ns="default") <= 30
            # The run it made went through run_jobs, and let go of the job's lock.
            lock = store.lock("job:default:decay")
            assert lock.acquire(wait=10)
            lock.release()
        finally:
            pool.stop()


def test_an_unknown_job_in_the_workers_schedule_is_one_line(tmp_path: Path) -> None:
    done = _worker_cli(tmp_path, "--scheduler", KREDENC_SCHEDULER_INTERVALS='{"defrag": 5}')
    assert done.returncode == 2, done.stderr
    assert "defrag" in done.stderr and "Traceback" not in done.stderr
    assert len([line for line in done.stderr.splitlines() if line.startswith("error")]) == 1


@pytest.mark.timeout(180)
def test_a_client_ingest_no_worker_takes_is_announced_then_given_up_with_its_id(
    store: Kredenc,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``kredenc --url URL ingest`` against a server queueing to RQ with no worker: the
    job's event stream says nothing while it waits, so the client used to wait in
    silence. It says once that the job waits for a worker, then gives up after its
    bound naming 'kredenc worker' and the job, which stays queued on the server."""
    import logging
    import re

    from kredenc import client as client_module
    from kredenc.client import Client
    from kredenc.errors import DeadlineExceeded

    monkeypatch.setattr(client_module, "QUEUED_NOTICE_S", 0.5)
    note = tmp_path / "kestrels.md"
    note.write_text("# Kestrels\n\nThe kestrel nests on the old water tower.\n")
    config = ServerConfig(mcp=False, web=False, rate_per_minute=0)
    with (
        ServerThread(store, config) as url,
        Client(url, queued_timeout_s=3) as client,
        caplog.at_level(logging.WARNING, logger="kredenc.client"),
    ):
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded) as caught:
            client.ingest([note])
        assert 3 <= time.monotonic() - started < 30
        said = str(caught.value)
        assert "still queued after 3 s" in said and "kredenc worker" in said
        found = re.search(r"job_[0-9a-f]+", said)
        assert found, said
        with httpx.Client(base_url=url, timeout=10) as c:
            assert c.get(f"/ingest/jobs/{found.group()}").json()["state"] == "queued"
    notices = [r.getMessage() for r in caplog.records if r.name == "kredenc.client"]
    assert len(notices) == 1 and found.group() in notices[0], notices
    assert "kredenc worker" in notices[0]
