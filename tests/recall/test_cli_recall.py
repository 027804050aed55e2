"""``kredenc recall`` and ``kredenc proxy``, end to end in fresh processes with the
real MiniLM embedder."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kredenc.engine import Kredenc
from kredenc.testing.chat_server import chat_route, sent_messages
from kredenc.testing.openai_server import LoopbackServer

from .blocks import parse

# The lead registers cli_recall in cli._register_subcommands; importing it does the same.
ENTRY = "import kredenc.interfaces.cli_recall; from kredenc.interfaces.cli import main; main()"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KREDENC_")}
    env["KREDENC_EMBED_THREADS"] = "1"
    return env


def kredenc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *args],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("cli-recall") / "store"
    with Kredenc.open(home, durability="none", embed_threads=1) as kb:
        tea = kb.remember("The user likes jasmine tea in the morning.", kind="preference")
        coffee = kb.remember("The user switched to black coffee in May.", kind="fact")
        kb.relate(coffee.id, tea.id, "contradicts")
        kb.remember("Deploys happen on Tuesdays.", kind="fact")
    return home


def test_recall_json(store: Path) -> None:
    proc = kredenc("--store", str(store), "recall", "tea or coffee?", "--session", "s", "--json")
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    assert data["query"] == "tea or coffee?"
    assert data["session"] == "s"
    assert data["dry_run"] is True and data["injected"] is False
    assert data["terms"] == ["tea", "coffee"]
    assert data["chars"] == len(data["block"]) <= 1800
    lines = parse(data["block"])
    assert [json.loads(i["line"]) for i in data["items"]] == lines
    tea = next(i for i in data["items"] if "jasmine tea" in i["text"])
    coffee = next(i for i in data["items"] if "black coffee" in i["text"])
    assert coffee["relations"] == [f"contradicts #{tea['n']}"]
    assert lines[coffee["n"] - 1]["relations"] == [f"contradicts #{tea['n']}"]
    assert lines[coffee["n"] - 1]["text"] == "The user switched to black coffee in May."
    first = data["items"][0]
    assert set(first) >= {"id", "kind", "type", "score", "legs", "line", "text", "truncated"}
    assert set(first["legs"]) <= {"lexical", "dense"} and first["legs"]
    assert data["budget"] == {
        "items": 8,
        "item_chars": 600,
        "total_chars": 1800,
        "item_tokens": None,
        "total_tokens": None,
        "snippet_chars": None,
    }
    assert data["error"] is None


def test_recall_human_and_budget_options(store: Path) -> None:
    proc = kredenc("--store", str(store), "recall", "tea or coffee?", "--items", "1")
    assert proc.returncode == 0, proc.stderr
    assert len(parse(proc.stdout.rstrip("\n"))) == 1
    assert "terms: tea coffee" in proc.stderr


def test_recall_without_a_store(tmp_path: Path) -> None:
    proc = kredenc("--store", str(tmp_path / "nope"), "recall", "tea")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: no store at ")
    assert "Traceback" not in proc.stderr


def test_proxy_needs_an_http_upstream(store: Path) -> None:
    proc = kredenc("--store", str(store), "proxy", "--upstream", "localhost:1234")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: upstream must be an http(s) URL")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def upstream() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        srv.route("POST", "/v1/chat/completions", chat_route("Tea it is."))
        yield srv


def test_proxy_serves_and_says_it_is_online(
    store: Path, tmp_path: Path, upstream: LoopbackServer
) -> None:
    port = free_port()
    err = tmp_path / "stderr.txt"
    with open(err, "w") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                ENTRY,
                "--store",
                str(store),
                "proxy",
                "--upstream",
                upstream.base_url,
                "--port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=_env(),
        )
    try:
        deadline = time.monotonic() + 60
        while "Application startup complete" not in err.read_text():
            assert proc.poll() is None, err.read_text()
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.1)
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "tea?"}]},
            timeout=30,
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert response.status_code == 200
    assert sent_messages(upstream.requests[-1])[-1]["role"] == "system"
    log = err.read_text()
    assert f"recall reflex online: store={store} (namespace default, " in log
    assert "budget=8 items × 600/1800 chars" in log and "dry_run=false" in log
