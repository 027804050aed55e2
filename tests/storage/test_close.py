"""Closing a store that other threads are using: close() waits for the calls in flight,
later calls raise ``StoreClosed`` (a ``KredencError``), never a raw sqlite3 error and
never a crash. The race runs in a child process so that a segfault fails the test."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import KredencError, StoreClosed

OpenStore = Callable[..., Kredenc]
RACE = Path(__file__).with_name("_close_race_proc.py")


@pytest.mark.parametrize("seconds", [0.0, 0.3])
def test_close_while_threads_hammer_the_store(store_dir: Path, seconds: float) -> None:
    proc = subprocess.run(
        [sys.executable, str(RACE), str(store_dir), "8", str(seconds)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["alive"] == 0
    for result in report["threads"]:
        assert result["type"] == "StoreClosed", result
        assert result["module"] == "kredenc.errors"
        assert result["message"] == "store is closed"
        assert "Kredenc.open" in result["hint"]
    assert "ProgrammingError" not in proc.stderr
    assert "Traceback" not in proc.stderr


def test_every_call_after_close_raises_store_closed(open_store: OpenStore) -> None:
    kb = open_store()
    mem = kb.remember("a note before closing")
    view = kb.scoped("other")
    kb.close()
    kb.close()  # idempotent
    calls: list[Callable[[], object]] = [
        lambda: kb.remember("after close"),
        lambda: kb.search("note"),
        lambda: kb.get(mem.id),
        lambda: kb.forget(mem.id),
        kb.stats,
        lambda: kb.file_turns("s1", [{"role": "user", "content": "hi"}]),
        lambda: view.search("note"),
        kb.rebuild,
        kb.compact,
    ]
    for call in calls:
        with pytest.raises(StoreClosed) as exc:
            call()
        assert isinstance(exc.value, KredencError)
        assert exc.value.message == "store is closed"


def test_close_waits_for_a_call_in_flight(open_store: OpenStore) -> None:
    """A search that is running when close() starts finishes with its answer."""
    kb = open_store()
    for i in range(200):
        kb.remember(f"harbour note {i}")
    inside = threading.Event()
    release = threading.Event()
    outcome: list[object] = []
    original = kb.store.embed_query

    def slow_query(text: str) -> object:
        inside.set()
        release.wait(10)
        return original(text)

    kb.store.embed_query = slow_query  # type: ignore[method-assign]
    worker = threading.Thread(target=lambda: outcome.append(kb.search("harbour", k=3)))
    worker.start()
    assert inside.wait(10)
    closer = threading.Thread(target=kb.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive(), "close() did not wait for the search in flight"
    release.set()
    closer.join(10)
    worker.join(10)
    assert not closer.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], list) and len(outcome[0]) == 3
    assert kb.store.closed
