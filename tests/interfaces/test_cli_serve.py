"""``kredenc serve`` as a real process: the URL line, the advertisement, a clean stop on
SIGINT and SIGTERM, a busy port in one line, the sample data filed once, and two
servers on one PostgreSQL store."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest

ENTRY = "from kredenc.interfaces.cli import main; main()"
URL_LINE = "kredenc serving "


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KREDENC_")}
    env["KREDENC_EMBED_THREADS"] = "1"
    env["KREDENC_DURABILITY"] = "none"
    return env


class Serving:
    """A ``kredenc serve`` process: its URL once printed, its output read by threads
    (a pipe read with a deadline, whatever the buffering)."""

    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ENTRY, "--store", str(home), "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env() | (env or {}),
        )
        self.out: queue.Queue[str] = queue.Queue()
        self.err: list[str] = []
        self._err_lines: queue.Queue[str] = queue.Queue()
        self._pumps = [
            threading.Thread(target=_pump, args=(stream, sink), daemon=True)
            for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self._err_lines))
        ]
        for pump in self._pumps:
            pump.start()
        try:
            line = self.out.get(timeout=120)
        except queue.Empty:
            line = ""
        if "--json" in args:  # one JSON line: url, store, pid
            found = json.loads(line)
            assert (found["store"], found["pid"]) == (str(home), self.proc.pid)
            self.url = found["url"].rstrip("/")
            return
        assert line.startswith(URL_LINE), line + self.drain()
        self.url = line[len(URL_LINE) :].split()[0].rstrip("/")
        assert f"(store {home})" in line

    def drain(self) -> str:
        while not self._err_lines.empty():
            self.err.append(self._err_lines.get())
        return "".join(self.err)

    def wait_err(self, text: str, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(text in line for line in self.err):
            try:
                self.err.append(self._err_lines.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"no {text!r} on stderr: {self.drain()}") from None

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, str]:
        self.proc.send_signal(sig)
        self.proc.wait(timeout=90)
        for pump in self._pumps:
            pump.join(timeout=10)  # each reads its pipe to the end
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return self.proc.returncode, self.drain()


def _pump(stream: IO[str] | None, sink: queue.Queue[str]) -> None:
    assert stream is not None
    for line in stream:
        sink.put(line)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "store"


def test_serve_prints_the_url_advertises_it_and_stops_cleanly(home: Path) -> None:
    server = Serving(home, "--no-sample", "--allow-host", "kredenc.test")
    try:
        assert httpx.get(server.url + "/health", timeout=60).json()["status"] == "ok"
        named = httpx.get(server.url + "/health", headers={"Host": "kredenc.test"})
        assert named.status_code == 200
        other = httpx.get(server.url + "/health", headers={"Host": "elsewhere.test"})
        assert other.status_code == 403
        advert = home / "server.json"
        assert advert.stat().st_mode & 0o777 == 0o600
        found = json.loads(advert.read_text("utf-8"))
        assert (found["url"], found["pid"]) == (server.url, server.proc.pid)
    finally:
        code, err = server.stop(signal.SIGINT)
    assert code == 0, err
    assert "Traceback" not in err and "error" not in err.lower()
    assert not (home / "server.json").exists()


def test_sigterm_is_a_clean_stop_too(home: Path) -> None:
    server = Serving(home, "--no-sample", "--json")
    httpx.get(server.url + "/health", timeout=60)
    code, err = server.stop(signal.SIGTERM)
    assert code == 0, err
    assert not (home / "server.json").exists()


def test_a_busy_port_fails_at_once_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-c", ENTRY, "--store", str(tmp_path / "s"), "serve",
             "--port", str(port)],
            check=False, capture_output=True, text=True, env=_env(), timeout=120,
        )  # fmt: skip
    assert proc.returncode == 1 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"error: cannot listen on 127.0.0.1:{port}")
    assert time.monotonic() - t0 < 30  # before any model loads
    assert not (tmp_path / "s").exists()


def test_no_keys_means_loopback_only(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", ENTRY, "--store", str(tmp_path / "s"), "serve",
         "--host", "0.0.0.0", "--port", "0"],
        check=False, capture_output=True, text=True, env=_env(), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert "loopback only" in line
    # The hint works as written: on a store not made yet, it says to make it first
    # ('keys add' alone failed with "no store at").
    store = tmp_path / "s"
    assert f"'kredenc --store {store} init', then 'kredenc --store {store} keys add" in line
    for step in (["init"], ["keys", "add", "--namespace", "team"]):
        done = subprocess.run(
            [sys.executable, "-c", ENTRY, "--store", str(store), *step],
            check=False, capture_output=True, text=True, env=_env(), timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_sample_data_is_filed_once(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such.pdf"
    server = Serving(home, "--sample-pdf", str(missing))
    try:
        server.wait_err("sample data filed")
        stats = httpx.get(server.url + "/stats", timeout=60).json()
        kinds = {(d["drawer"], d["type"]): d["records"] for d in stats["drawers"]}
        assert kinds[("memories", "memory")] == 20
        assert kinds[("documents", "document")] == 4  # the four sample notes
        hits = httpx.get(server.url + "/search", params={"q": "when are production deploys"})
        assert any("Tuesdays" in h["text"] for h in hits.json()["hits"])
    finally:
        code, err = server.stop()
    assert code == 0, err
    assert f"sample PDF {missing} not found; skipped" in err
    assert (home / "samples.json").exists()

    again = Serving(home)
    try:
        stats_again = httpx.get(again.url + "/stats", timeout=60).json()
    finally:
        code, err = again.stop()
    assert code == 0, err
    assert "filing sample data" not in err
    assert stats_again["records"] == stats["records"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_while_it_starts_is_clean_too(home: Path, sig: int) -> None:
    # Right after the URL line: the app is still being built and the model loading,
    # before uvicorn has taken the signals over.
    server = Serving(home, "--no-sample")
    code, err = server.stop(sig)
    assert code == 0, err
    assert "Traceback" not in err
    assert not (home / "server.json").exists()


@pytest.mark.postgres
def test_two_servers_share_one_postgres_store(home: Path, postgres_dsn: str) -> None:
    pg = {
        "KREDENC_BACKEND": "postgres",
        "KREDENC_POSTGRES_DSN": postgres_dsn,
        "KREDENC_POSTGRES_SCHEMA": "t_serve_two_servers",
    }
    servers = [Serving(home, "--no-sample", env=pg)]
    try:
        servers.append(Serving(home, "--no-sample", env=pg))  # the same store directory
        # Neither holds the store alone: no advert (a CLI command writes directly).
        assert not (home / "server.json").exists()
        filed: dict[str, str] = {}
        for n in range(6):
            by = servers[n % 2]
            text = f"lighthouse keeper note {n} from server {n % 2}"
            r = httpx.post(by.url + "/memories", json={"text": text}, timeout=60)
            assert r.status_code == 201, r.text
            filed[r.json()["id"]] = text
        for n, (rid, text) in enumerate(filed.items()):
            other = servers[(n + 1) % 2]  # read through the server that did not file it
            got = httpx.get(f"{other.url}/memories/{rid}", timeout=60)
            assert got.status_code == 200 and got.json()["text"] == text
        for server in servers:
            hits = httpx.get(
                server.url + "/search", params={"q": "lighthouse keeper", "k": 20}, timeout=60
            ).json()["hits"]
            assert {h["id"] for h in hits} == set(filed)
    finally:
        results = [server.stop(signal.SIGINT) for server in servers]
    for code, err in results:
        assert code == 0, err
        assert "Traceback" not in err


FAST_JOBS = {"KREDENC_SCHEDULER_INTERVALS": '{"decay": 0.5}', "KREDENC_SCHEDULER_THROTTLE_S": "0.1"}


def _last_runs(url: str) -> dict[str, float | None]:
    items = httpx.get(url + "/jobs", timeout=60).json()["items"]
    return {j["name"]: j["last_run"] for j in items}


def test_serve_runs_the_lifecycle_jobs_on_a_schedule_and_no_scheduler_runs_none(
    home: Path,
) -> None:
    for args, scheduled in ((("--no-scheduler",), False), ((), True)):
        server = Serving(home, "--no-sample", *args, env=FAST_JOBS)
        try:
            deadline = time.monotonic() + (60 if scheduled else 2)
            runs = _last_runs(server.url)
            while runs["decay"] is None and time.monotonic() < deadline:
                time.sleep(0.1)
                runs = _last_runs(server.url)
            assert (runs["decay"] is not None) is scheduled, runs
        finally:
            code, err = server.stop(signal.SIGTERM)
        assert code == 0, err
        assert "Traceback" not in err


def test_an_unknown_job_in_scheduler_intervals_is_one_line(home: Path) -> None:
    env = _env() | {"KREDENC_SCHEDULER_INTERVALS": '{"defrag": 5}'}
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, "--store", str(home), "serve", "--port", "0"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "defrag" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2, done.stderr
    assert not home.exists() or not (home / "server.json").exists()


def test_a_busy_port_has_its_own_error_code_in_json(tmp_path: Path) -> None:
    """A script reading ``--json`` tells a busy port from any other failure."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-c", ENTRY, "--json", "--store", str(tmp_path / "s"), "serve",
             "--port", str(port)],
            check=False, capture_output=True, text=True, env=_env(), timeout=120,
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    error = json.loads(proc.stderr or proc.stdout)["error"]
    assert error["code"] == "cannot_listen", error
    assert str(port) in error["message"] and "--port" in error["hint"]


@pytest.mark.parametrize(
    ("env", "code", "says"),
    [
        ({}, 2, "jobs_queue = 'rq' needs backend = 'postgres'"),
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
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_jobs_queue_rq_refused_before_the_url_line(
    home: Path, env: dict[str, str], code: int, says: str, json_flag: list[str]
) -> None:
    """A server that cannot queue to RQ refuses before it announces itself: a script
    waiting for the URL line (or the --json one) is never told to use a server that
    then stops."""
    from kredenc.testing.redis import closed_port_url

    env = {k: closed_port_url() if v == "CLOSED" else v for k, v in env.items()}
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *json_flag, "--store", str(home), "serve", "--port", "0"],
        check=False,
        capture_output=True,
        text=True,
        env=_env() | {"KREDENC_JOBS_QUEUE": "rq"} | env,
        timeout=120,
    )
    assert done.returncode == code, done.stderr
    assert done.stdout == "", done.stdout  # no URL line, no {"url": ...}
    assert says in done.stderr and "Traceback" not in done.stderr
    assert "kredenc stopped" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (home / "server.json").exists()


def test_a_read_only_server_answers_reads_refuses_writes_and_leaves_the_writer_free(
    home: Path,
) -> None:
    """scale.md: a server beside the writer (or on a PostgreSQL replica) serves reads
    from a read-only handle. ``serve --read-only`` had no such mode: it took the store's
    writer lock, and on a read-only database it failed to start."""
    seed = subprocess.run(
        [sys.executable, "-c", ENTRY, "--store", str(home), "remember", "The kestrel nests high"],
        capture_output=True, text=True, env=_env(), timeout=120, check=False,
    )  # fmt: skip
    assert seed.returncode == 0, seed.stderr
    server = Serving(home, "--read-only")
    try:
        hits = httpx.get(server.url + "/search", params={"q": "kestrel"}, timeout=60).json()
        assert [h["text"] for h in hits["hits"]] == ["The kestrel nests high"]
        refused = httpx.post(server.url + "/memories", json={"text": "x"}, timeout=60)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "store_read_only"
        # the writer is free: a CLI write beside the server files at once, and is served
        wrote = subprocess.run(
            [sys.executable, "-c", ENTRY, "--store", str(home), "remember", "Owls hunt at night"],
            capture_output=True, text=True, env=_env(), timeout=120, check=False,
        )  # fmt: skip
        assert wrote.returncode == 0, wrote.stderr
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = httpx.get(server.url + "/search", params={"q": "owls hunt"}, timeout=60)
            if any("Owls" in h["text"] for h in found.json()["hits"]):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the read-only server never saw the new memory")
        assert not (home / "server.json").exists()  # a reader does not advertise itself
    finally:
        code, err = server.stop(signal.SIGINT)
    assert code == 0 and "Traceback" not in err, err
