"""The CLI beside a running writer (a real second process holding the store).

Read commands (``search``, ``graph``, ``get``, ``recall``, ``stats``, ``check``) work
while the writer appends; a write command is refused with a hint that is true: it
names the process that holds the store and does not suggest opening it read-only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from .test_cli import _env, kredenc, ok_json, one_error_line

HOLDER = """
import sys, time
from kredenc.engine import Kredenc
kb = Kredenc.open(sys.argv[1])
first = kb.remember("The kestrel nests on the old water tower", kind="fact")
print(first.id, flush=True)
i = 0
while True:
    kb.remember(f"live note {i}: the writer keeps filing while readers read")
    i += 1
    time.sleep(0.02)
"""


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("live") / "store"
    ok_json("--store", str(home), "init")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None
        first_id = proc.stdout.readline().strip()
        assert first_id, proc.stderr.read() if proc.stderr else ""
        yield {"home": home, "pid": proc.pid, "first": first_id, "proc": proc}
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL  # the writer ran all along


def test_read_commands_work_while_a_writer_runs(held: dict[str, Any]) -> None:
    home = str(held["home"])
    hits = ok_json("--store", home, "search", "kestrel water tower")
    assert held["first"] in [h["id"] for h in hits["hits"]]
    graph = ok_json("--store", home, "graph", "kestrel")
    assert graph is not None
    got = ok_json("--store", home, "get", held["first"])
    assert got["id"] == held["first"]
    stats = ok_json("--store", home, "stats")
    assert stats["log_records"] >= 1
    # A generous budget: this asserts what recall finds, not how fast on a busy machine.
    recall = ok_json(
        "--store", home, "recall", "where does the kestrel nest?", "--time-budget-ms", "10000"
    )
    assert "kestrel" in json_text(recall)
    check = kredenc("--store", home, "check", "--json")
    assert check.returncode == 0, check.stdout + check.stderr
    assert held["proc"].poll() is None  # the writer is still writing


def test_a_write_beside_the_writer_is_refused_with_a_true_hint(held: dict[str, Any]) -> None:
    home = str(held["home"])
    for args in (("remember", "a second writer"), ("forget", held["first"])):
        proc = kredenc("--store", home, *args)
        assert proc.returncode == 1, proc.stderr
        line = one_error_line(proc.stderr)
        assert f"pid {held['pid']}" in line
        assert "read-only" not in line
        assert "writes go through" in line


def json_text(data: Any) -> str:
    import json

    return json.dumps(data)
