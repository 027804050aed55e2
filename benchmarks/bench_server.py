"""``kredenc serve`` under load: /search, /recall and the /v1 proxy, against in-process calls.

What it measures (issue 15, "Tests and benchmarks"):

* ``GET /search`` and ``POST /recall`` under 32 concurrent clients on a 100,000-memory
  store: requests/s and p50/p95/p99, beside the same calls made in-process on the facade
  by 32 threads (the same concurrency, no HTTP) and by one thread. Target: /search p95
  ≤ 2× the in-process p95 at the same concurrency.
* ``POST /v1/chat/completions`` through the server's proxy against a scripted loopback
  upstream at 8 concurrent clients: the proxy's added p95 (each request sent direct and
  through the server back to back by the same client: the paired difference). Target
  ≤ 15 ms. The upstream answers after ``--upstream-delay-ms`` (250: a fast hosted
  model's time to the first token), so 8 clients are 8 conversations, not 8 loops
  flooding an instant upstream (``--upstream-delay-ms 0`` measures that saturation).
* A writer while the /search load runs: one client files memories with unique tokens
  through ``POST /memories``; afterwards every acknowledged memory is read back once by
  id and found exactly once by its token (nothing lost, nothing duplicated).

The server runs in its own process (``kredenc.interfaces.server.run.serve``, as ``kredenc
serve`` runs it). The /search and /recall load is ``wrk`` (C; ``apt-get install wrk``)
with 2 threads, which costs the 2-core machine little beside the server; the writer and
the proxy's paired clients are httpx in this process. The store is built in a temporary
directory from ``benchmarks/corpus.py`` (its cached MiniLM vectors seed the embedding
cache: ``python benchmarks/corpus.py --embed 100000`` once, ~5 minutes).

    .venv/bin/python benchmarks/bench_server.py                # n = 100,000
    .venv/bin/python benchmarks/bench_server.py --n 2000 --seconds 5   # a quick look

Prints tables and writes ``benchmarks/results/server.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple

# onnxruntime must be in the process before usearch (see corpus.py).
import onnxruntime  # noqa: F401

from _common import machine, percentile, print_table, write_results
from bench_recall import NS, _scripted_upstream, bench_home, distinct_queries

HERE = Path(__file__).resolve().parent
TARGETS = {"search_p95_ratio": 2.0, "proxy_added_p95_ms": 15.0}
Result = dict[str, Any]

SERVE = """
import atexit, gc, json, logging, sys, time
from kredenc import Kredenc
from kredenc.interfaces.server.run import serve
from kredenc.interfaces.server.state import ServerConfig
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
home, ns, port, upstream, off, settings = sys.argv[1:7]
if "filing" in off:  # --no-filing: a diagnostic run, the turns are not handed to a filer
    from kredenc.recall.filing import TurnFiler
    TurnFiler.submit = lambda *args, **kwargs: None
if "freeze" in off:  # --no-freeze: the heap left unfrozen (the server before the fix)
    from kredenc.interfaces.server import proxy_mount
    proxy_mount.freeze_warm_heap = lambda: 0
pauses, began = [], [0.0]  # the full (generation 2) collections: they stop every thread
def timed_gc(phase, info):
    if info["generation"] == 2:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            ms = (time.perf_counter() - began[0]) * 1000
            pauses.append([round(time.time(), 3), round(ms, 1)])
gc.callbacks.append(timed_gc)
atexit.register(lambda: print("bench-gc: " + json.dumps({
    "full_collections": pauses, "frozen_objects": gc.get_freeze_count()}), file=sys.stderr))
with Kredenc.open(home, ns, **json.loads(settings)) as kb:
    serve(kb, ServerConfig(port=int(port), upstream=upstream or None, web=False,
                           rate_per_minute=0))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served(NamedTuple):
    url: str  # the server's base URL
    pid: int  # its process (for a profiler to attach to)
    gc: dict[str, Any]  # filled when it has stopped: its full garbage collections


@contextmanager
def server_process(
    home: Path,
    upstream: str,
    *,
    off: Sequence[str] = (),
    settings: Mapping[str, Any] | None = None,
) -> Iterator[Served]:
    """The server on ``home`` in its own process, once /health answers. ``off``: for a
    diagnostic run, what to switch off (``filing``, ``freeze``: see ``--no-filing``);
    ``settings``: overrides for the store's settings (``--embed-threads``)."""
    import httpx

    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)  # noqa: SIM115
    env = {k: v for k, v in os.environ.items() if not k.startswith("KREDENC_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SERVE,
            str(home),
            NS,
            str(port),
            upstream,
            ",".join(off) or "-",
            json.dumps(dict(settings or {})),
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    served = Served(url, proc.pid, {})
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start:\n" + Path(log.name).read_text())
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        yield served
    finally:
        proc.send_signal(2)  # SIGINT: uvicorn stops cleanly, the store closes
        proc.wait(timeout=120)
        for line in Path(log.name).read_text().splitlines():
            if line.startswith("bench-gc: "):
                served.gc.update(json.loads(line.removeprefix("bench-gc: ")))
        log.close()
        os.unlink(log.name)


def summary(samples_s: Sequence[float], seconds: float) -> Result:
    ms = [s * 1000 for s in samples_s]
    return {
        "requests": len(ms),
        "rps": round(len(ms) / seconds, 1) if seconds else 0.0,
        "p50_ms": round(percentile(ms, 50), 2),
        "p95_ms": round(percentile(ms, 95), 2),
        "p99_ms": round(percentile(ms, 99), 2),
    }


# --------------------------------------------------------------------------------------
# In-process: the facade called by N threads
# --------------------------------------------------------------------------------------


def _threads(call: Any, queries: Sequence[str], threads: int, seconds: float) -> Result:
    """``call(query)`` by ``threads`` threads for ``seconds``: the latency of each call."""
    samples: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    counter = itertools.count()

    def work() -> None:
        while time.monotonic() < stop:
            q = queries[next(counter) % len(queries)]
            start = time.perf_counter()
            call(q)
            elapsed = time.perf_counter() - start
            with lock:
                samples.append(elapsed)

    began = time.monotonic()
    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return summary(samples, time.monotonic() - began)


def in_process(home: Path, queries: Sequence[str], threads: int, seconds: float) -> Result:
    from kredenc import Kredenc

    with Kredenc.open(home, NS) as kb:
        kb.search(queries[0], k=10)  # the model and the shards loaded

        def recall(q: str) -> Any:
            return kb.recall([{"role": "user", "content": q}], session_id="bench")

        return {
            "search": _threads(lambda q: kb.search(q, k=10), queries, threads, seconds),
            "recall": _threads(recall, queries, threads, seconds),
        }


# --------------------------------------------------------------------------------------
# Over HTTP: asyncio clients
# --------------------------------------------------------------------------------------


WRK_SCRIPT = r"""
-- One request per line of QUERIES (GET /search?q=... or POST /recall), in turn;
-- done() prints the latency percentiles and the non-2xx count as one JSON line.
local lines, n, bad = {}, 0, 0
for line in io.lines(os.getenv("KREDENC_BENCH_REQUESTS")) do lines[#lines + 1] = line end
local method = os.getenv("KREDENC_BENCH_METHOD")
request = function()
  n = n + 1
  local line = lines[(n % #lines) + 1]
  if method == "GET" then return wrk.format("GET", line) end
  return wrk.format("POST", "/recall", {["Content-Type"] = "application/json"}, line)
end
response = function(status, headers, body) if status >= 300 then bad = bad + 1 end end
done = function(summary, latency, requests)
  io.write(string.format(
    '{"requests": %d, "seconds": %.3f, "p50_ms": %.2f, "p95_ms": %.2f, "p99_ms": %.2f, ' ..
    '"errors": %d, "socket_errors": %d}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000,
    latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    summary.errors.status, summary.errors.connect + summary.errors.read +
    summary.errors.write + summary.errors.timeout))
end
"""


def wrk(url: str, method: str, lines: Sequence[str], clients: int, seconds: float) -> Result:
    """``wrk`` (C, two threads) as the load: ``clients`` connections for ``seconds``.
    Its own CPU is small beside Python clients', so the server gets the machine."""
    import json

    if shutil.which("wrk") is None:
        raise SystemExit("bench_server needs wrk: apt-get install wrk")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "bench.lua"
        script.write_text(WRK_SCRIPT)
        requests = Path(tmp) / "requests.txt"
        requests.write_text("\n".join(lines) + "\n")
        env = {**os.environ, "KREDENC_BENCH_REQUESTS": str(requests)}
        env["KREDENC_BENCH_METHOD"] = method
        out = subprocess.run(
            ["wrk", "-t2", f"-c{clients}", f"-d{seconds:.0f}s", "--timeout", "30s",
             "-s", str(script), url],
            capture_output=True, text=True, env=env, check=True,
        )  # fmt: skip
    row: Result = json.loads(out.stdout.strip().splitlines()[-1])
    row["rps"] = round(row["requests"] / row["seconds"], 1)
    return row


def http_load(
    url: str, queries: Sequence[str], clients: int, seconds: float, *, writer: bool
) -> Result:
    import json
    import urllib.parse

    import httpx

    for q in queries[:20]:  # warm: the first calls paid
        httpx.get(url + "/search", params={"q": q, "k": 10}, timeout=60).raise_for_status()
    filed: list[tuple[str, str]] = []
    stop = threading.Event()

    def file_memories() -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            while not stop.is_set():
                token = "zq" + uuid.uuid4().hex[:12]
                r = http.post("/memories", json={"text": f"bench canary {token}"})
                if r.status_code == 201:
                    filed.append((r.json()["id"], token))

    gets = [f"/search?q={urllib.parse.quote(q)}&k=10" for q in queries]
    thread = threading.Thread(target=file_memories) if writer else None
    if thread is not None:
        thread.start()
    try:
        out: Result = {"search": wrk(url, "GET", gets, clients, seconds)}
    finally:
        stop.set()
        if thread is not None:
            thread.join()
    bodies = [
        json.dumps({"messages": [{"role": "user", "content": q}], "session_id": "bench"})
        for q in queries
    ]
    out["recall"] = wrk(url, "POST", bodies, clients, seconds)
    if filed:
        out["search"]["writes"] = asyncio.run(_check(url, filed))
    return out


async def _check(url: str, filed: list[tuple[str, str]]) -> Result:
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        return await check_writes(http, filed)


async def check_writes(http: Any, filed: list[tuple[str, str]]) -> Result:
    """Every acknowledged write readable by id and found exactly once by its token."""
    lost = duplicated = 0
    for rid, token in filed:
        got = await http.get(f"/memories/{rid}")
        hits = (await http.get("/search", params={"q": token, "k": 5, "mode": "lexical"})).json()
        found = [h for h in hits["hits"] if token in h["text"]]
        if got.status_code != 200 or not found:
            lost += 1
        elif len(found) > 1:
            duplicated += 1
    return {"acknowledged": len(filed), "lost": lost, "duplicated": duplicated}


PROXY_QUESTIONS = 2000  # distinct questions the proxy's clients ask, in turn


def proxy_questions(n: int, m: int = PROXY_QUESTIONS) -> list[str]:
    """``m`` distinct questions about the corpus of ``n`` (as the /search load asks):
    one repeated question would be answered by the query cache and the embedding
    coalescer after its first time, which flatters the proxy."""
    return distinct_queries(min(n, 100_000), m)[:m]


def _timing(header: str) -> dict[str, float]:
    """``Server-Timing: recall;dur=12.3, lexical;dur=2.1`` as ``{"recall": 12.3, ...}``."""
    out: dict[str, float] = {}
    for part in header.split(","):
        name, sep, dur = part.strip().partition(";dur=")
        if sep:
            out[name] = float(dur)
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (all its threads): what a
    request costs the machine, which a loaded machine's wall times do not show."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def quiet_cpu_seconds(pid: int, *, step_s: float = 0.25, timeout_s: float = 10.0) -> float:
    """:func:`cpu_seconds` of ``pid`` once it has gone quiet (under 5 ms of CPU in a
    ``step_s``; at most ``timeout_s``): the turns a run filed after its last answer
    (a filer that lingers or batches) are counted in that run, not in the next."""
    deadline = time.monotonic() + timeout_s
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(step_s)
        now = cpu_seconds(pid)
        if now - last < 0.005:
            return now
        last = now
    return last


def _p(values: Sequence[float], q: float) -> float | None:
    return round(percentile(values, q), 2) if values else None


async def proxy_load(
    url: str,
    upstream: str,
    clients: int,
    requests: int,
    think_s: float = 0.0,
    questions: Sequence[str] = ("when do we deploy?",),
    *,
    offset: int = 0,
    pid: int | None = None,
) -> Result:
    """Each client sends a chat request direct and through the server, in turn.

    Request ``j`` of client ``i`` asks ``questions[(offset + i * requests + j) % len]``:
    varied questions, so that no cache answers the recall (pass each run its own
    ``offset``). ``pid``: the server's process, whose CPU time per proxied request
    (warm-up included) is reported. ``think_s`` 0: the clients stay in
    lockstep (every upstream answer takes the same time, so all of them reach the proxy
    within a millisecond: the worst case, a burst of ``clients`` recalls at once).
    Otherwise each client starts after a random pause and pauses a random 0..``think_s``
    between its pairs, as independent chats do."""
    import random

    import httpx

    paired: list[float] = []
    direct: list[float] = []
    proxied: list[float] = []
    steps: dict[str, list[float]] = {}
    rest: list[float] = []  # added minus the recall: everything but the recall
    rng = random.Random(7)
    limits = httpx.Limits(max_connections=2 * clients, max_keepalive_connections=2 * clients)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:

        async def one(i: int) -> None:
            if think_s:
                await asyncio.sleep(rng.random() * think_s)
            for j in range(requests):
                question = questions[(offset + i * requests + j) % len(questions)]
                body = {"model": "m", "messages": [{"role": "user", "content": question}]}
                sample = []
                for target in (upstream, url + "/v1"):
                    start = time.perf_counter()
                    r = await http.post(
                        target + "/chat/completions",
                        json=body,
                        headers={"X-Kredenc-Session": f"bench-{i}-{j}"},
                    )
                    sample.append(time.perf_counter() - start)
                    r.raise_for_status()
                if j >= 5:  # the first requests open connections
                    direct.append(sample[0] * 1000)
                    proxied.append(sample[1] * 1000)
                    paired.append((sample[1] - sample[0]) * 1000)
                    timing = _timing(r.headers.get("server-timing", ""))
                    for name, ms in timing.items():
                        steps.setdefault(name, []).append(ms)
                    if "recall" in timing:
                        rest.append(paired[-1] - timing["recall"])
                if think_s:
                    await asyncio.sleep(rng.random() * think_s)

        cpu = cpu_seconds(pid) if pid is not None else 0.0
        await asyncio.gather(*(one(i) for i in range(clients)))
        cpu = await quiet_cpu_seconds(pid) - cpu if pid is not None else 0.0
    out: Result = {
        "clients": clients,
        "think_ms": round(think_s * 1000),
        "questions": len(set(questions)),
        "requests": len(paired),
    }
    for name in ("recall", "embed", "dense", "lexical"):
        out[f"{name}_p50_ms"] = _p(steps.get(name, []), 50)
        out[f"{name}_p95_ms"] = _p(steps.get(name, []), 95)
    if pid is not None:
        out["server_cpu_ms_per_request"] = round(cpu * 1000 / (clients * requests), 2)
    out["not_recall_p50_ms"] = _p(rest, 50)
    out["not_recall_p95_ms"] = _p(rest, 95)
    out["direct_p95_ms"] = _p(direct, 95)
    out["proxied_p95_ms"] = _p(proxied, 95)
    out["added_p50_ms"] = _p(paired, 50)
    out["added_p95_ms"] = _p(paired, 95)
    out["added_p99_ms"] = _p(paired, 99)
    return out


@contextmanager
def _home(args: argparse.Namespace) -> Iterator[Path]:
    if args.home is not None:
        yield args.home
        return
    with bench_home(args.n, fresh=True) as home:
        yield home


@contextmanager
def profiled(pid: int, out: Path | None, rate: int = 250) -> Iterator[None]:
    """``py-spy record`` of process ``pid`` (all its threads, idle ones left out) while
    the block runs, written to ``out`` (speedscope JSON, or raw stacks for ``.txt``);
    nothing when ``out`` is ``None``. Sampled profiles stay meaningful under load."""
    if out is None:
        yield
        return
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise SystemExit("--profile needs py-spy: pip install py-spy")
    fmt = "raw" if out.suffix == ".txt" else "speedscope"
    cmd = [spy, "record", "-p", str(pid), "-r", str(rate), "-f", fmt, "-o", str(out)]
    proc = subprocess.Popen([*cmd, "--threads", "--nonblocking"], stdout=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the load begins
    try:
        yield
    finally:
        proc.send_signal(2)  # SIGINT: py-spy writes what it sampled
        proc.wait(timeout=60)


def proxy_only(args: argparse.Namespace) -> int:
    """The /v1 part alone, in lockstep and with independent clients, ``--rounds`` times.

    Without ``--home`` it serves a copy of ``proxy_store.py``'s store (built once under
    /tmp, copied for each run)."""
    import proxy_store

    results: Result = {"machine": machine(), "n": args.n, "runs": []}
    results["upstream_delay_ms"] = args.upstream_delay_ms
    questions = proxy_questions(args.n)
    off = [name for name in ("filing", "freeze") if getattr(args, f"no_{name}")]
    results["switched_off"] = off
    overrides = {"embed_threads": args.embed_threads} if args.embed_threads else {}
    results["settings"] = overrides
    clients, requests = args.proxy_clients, args.proxy_requests
    offsets = itertools.count(0, clients * requests)
    with (
        nullcontext(args.home) if args.home else proxy_store.scratch(n=args.n) as home,
        _scripted_upstream(args.upstream_delay_ms / 1000) as upstream,
        server_process(home, upstream.base_url, off=off, settings=overrides) as served,
        profiled(served.pid, args.profile),
    ):
        url, pid = served.url, served.pid
        load_began = time.time()
        for _ in range(args.rounds):
            for think in (0.0, args.think_ms / 1000):
                run = asyncio.run(
                    proxy_load(
                        url,
                        upstream.base_url,
                        clients,
                        requests,
                        think,
                        questions,
                        offset=next(offsets),
                        pid=pid,
                    )
                )
                run["load_avg_1m"] = round(os.getloadavg()[0], 2)
                results["runs"].append(run)
        load_ended = time.time()
    print_table("the /v1 proxy's added latency", results["runs"])
    collections = served.gc.get("full_collections", [])
    during = [ms for at, ms in collections if load_began <= at <= load_ended]
    results["server_gc"] = {**served.gc, "during_the_load_ms": during}
    print(f"the server's full garbage collections during the load: {len(during)}, ms: {during}")
    print(f"(all: {served.gc})")
    results["targets"] = TARGETS
    out = args.out or HERE / "results" / "server-proxy.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories in the store")
    parser.add_argument("--clients", type=int, default=32, help="concurrent HTTP clients")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds per load run")
    parser.add_argument("--proxy-clients", type=int, default=8)
    parser.add_argument("--proxy-requests", type=int, default=40, help="per proxy client")
    parser.add_argument(
        "--upstream-delay-ms",
        type=float,
        default=250.0,
        help="the scripted model's time to answer (a real one takes this or more)",
    )
    parser.add_argument(
        "--think-ms",
        type=float,
        default=200.0,
        help="the proxy clients' random pause between requests (the lockstep run has none)",
    )
    parser.add_argument(
        "--proxy-only", action="store_true", help="only the /v1 proxy part (no wrk load)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="--proxy-only rounds")
    parser.add_argument(
        "--home",
        type=Path,
        default=None,
        help="an existing scratch store to serve (written to) instead of building one",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="--proxy-only: py-spy record the server into this file (.txt: raw stacks)",
    )
    parser.add_argument(
        "--no-filing",
        action="store_true",
        help="--proxy-only diagnostic: the server files no turns (what filing costs)",
    )
    parser.add_argument(
        "--no-freeze",
        action="store_true",
        help="--proxy-only diagnostic: the server leaves its heap unfrozen (as before)",
    )
    parser.add_argument(
        "--embed-threads",
        type=int,
        default=None,
        help="--proxy-only: the server's embed_threads (onnxruntime threads; default: the store's)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.proxy_only:
        return proxy_only(args)

    queries = distinct_queries(min(args.n, 100_000), 2000)
    results: Result = {"machine": machine(), "n": args.n, "clients": args.clients}
    results["upstream_delay_ms"] = args.upstream_delay_ms
    load = [os.getloadavg()[0]]
    with (
        _home(args) as home,
        _scripted_upstream(args.upstream_delay_ms / 1000) as upstream,
    ):
        results["in_process_threads"] = in_process(home, queries, args.clients, args.seconds)
        results["in_process_one"] = in_process(home, queries, 1, args.seconds / 2)
        load.append(os.getloadavg()[0])
        with server_process(home, upstream.base_url) as (url, _pid, _gc):
            results["http"] = http_load(url, queries, args.clients, args.seconds, writer=True)
            load.append(os.getloadavg()[0])
            questions = proxy_questions(args.n)
            results["proxy"] = asyncio.run(
                proxy_load(
                    url,
                    upstream.base_url,
                    args.proxy_clients,
                    args.proxy_requests,
                    questions=questions,
                )
            )
            results["proxy_independent"] = asyncio.run(
                proxy_load(
                    url,
                    upstream.base_url,
                    args.proxy_clients,
                    args.proxy_requests,
                    args.think_ms / 1000,
                    questions,
                )
            )
    results["load_avg_1m"] = [round(x, 2) for x in load]
    rows = []
    for name in ("search", "recall"):
        for where, key in (
            ("in-process, 1 thread", "in_process_one"),
            (f"in-process, {args.clients} threads", "in_process_threads"),
            (f"HTTP, {args.clients} clients", "http"),
        ):
            rows.append({"call": name, "where": where, **results[key][name]})
    print_table(f"kredenc serve, {args.n:,} memories", rows)
    ratio = results["http"]["search"]["p95_ms"] / results["in_process_threads"]["search"]["p95_ms"]
    results["search_p95_ratio"] = round(ratio, 2)
    results["targets"] = TARGETS
    print(f"/search p95 over in-process p95 ({args.clients} each): {ratio:.2f}x (target ≤ 2x)")
    print_table("the /v1 proxy's added latency", [results["proxy"], results["proxy_independent"]])
    writes = results["http"]["search"].get("writes", {})
    print(f"writes during the search load: {writes}")
    path = write_results("server", results) if args.out is None else args.out
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
