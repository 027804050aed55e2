"""One writer per store: a second writer is refused at once; a killed one frees the store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import StoreLocked
from kredenc.storage.housekeeper import StoreLock

OpenStore = Callable[..., Kredenc]
WRITER = Path(__file__).with_name("_writer_proc.py")


def _start(mode: str, home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), mode, str(home), "0", "0", "none"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], *, kill: bool = True) -> tuple[str, str]:
    """Kill (SIGKILL) or wait for a child; always reap it and close its pipes."""
    try:
        if kill and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out, err


def _try_open_in_child(home: Path) -> dict[str, object]:
    proc = _start("try-open", home)
    out, err = _finish(proc, kill=False)
    assert proc.returncode == 0, err
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def test_second_lock_in_the_same_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    first = StoreLock(path)
    try:
        with pytest.raises(StoreLocked) as exc:
            StoreLock(path)
        assert exc.value.message == f"store is locked by pid {os.getpid()}"
        assert path.read_text() == f"{os.getpid()}\n"
    finally:
        first.release()
    assert path.read_text() == ""
    StoreLock(path).release()  # free again


def test_second_writer_is_refused_until_the_first_is_killed(
    store_dir: Path, open_store: OpenStore
) -> None:
    with open_store() as kb:
        kb.remember("made by the parent")
    holder = _start("hold", store_dir)
    try:
        line = holder.stdout.readline() if holder.stdout else ""
        assert line.strip() == "ready", holder.stderr.read() if holder.stderr else ""
        expected = f"store is locked by pid {holder.pid}"

        # A second writer in another process: refused within a second.
        child = _try_open_in_child(store_dir)
        assert child["error"] == "StoreLocked", child
        assert child["message"] == expected
        assert isinstance(child["elapsed"], float) and child["elapsed"] < 1.0, child

        # And in this process.
        started = time.monotonic()
        with pytest.raises(StoreLocked) as exc:
            open_store()
        assert time.monotonic() - started < 1.0
        assert exc.value.message == expected

        # Readers do not take the lock.
        with open_store(read_only=True) as reader:
            assert reader.search("parent", mode="lexical")

        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=60)
        assert holder.returncode == -signal.SIGKILL
    finally:
        _finish(holder)

    # The kernel dropped the dead writer's lock: a new writer opens, and finds the
    # memory the killed writer filed before it said "ready".
    with open_store() as kb:
        assert (store_dir / "lock").read_text() == f"{os.getpid()}\n"
        assert len(kb.search("held by the first writer", mode="lexical")) == 1
        kb.remember("made by the second writer")
    assert (store_dir / "lock").read_text() == ""
    child = _try_open_in_child(store_dir)
    assert child["error"] is None, child
