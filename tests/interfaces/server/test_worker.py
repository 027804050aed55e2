"""The worker process's housekeeping: folders that killed workers left behind are
removed at the next worker's start, only those whose owner no longer runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rq")

from kredenc.interfaces.server.worker import FOLDER_PREFIX, remove_stale_folders


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(30)
    return proc.pid


def test_only_the_folders_of_workers_that_no_longer_run_are_removed(tmp_path: Path) -> None:
    dead = tmp_path / f"{FOLDER_PREFIX}{_dead_pid()}-abc"
    (dead / "store").mkdir(parents=True)
    (dead / "store" / "upload.txt").write_text("left by a killed worker")
    live = tmp_path / f"{FOLDER_PREFIX}{os.getpid()}-def"
    live.mkdir()
    nameless = tmp_path / f"{FOLDER_PREFIX}q1w2e3"  # an older worker's name: no pid in it
    nameless.mkdir()
    other = tmp_path / "kredenc-eval-123-x"
    other.mkdir()
    assert remove_stale_folders(tmp_path) == [dead]
    assert not dead.exists()
    assert live.is_dir() and nameless.is_dir() and other.is_dir()
    assert remove_stale_folders(tmp_path) == []
