"""``<store>/server.json``: a running ``kredenc serve`` says where it listens.

The server holds the store's write lock for its whole life, so a second process
cannot write to it. While it serves it advertises ``{url, pid, started_at}`` in the
store directory (mode 0600, written atomically, removed on a clean stop); a CLI
command that finds the store locked reads it and goes through the server instead
(``kredenc --url``). A file whose pid is dead, or is not the lock's holder, is stale
(a server that was killed) and ignored.

No FastAPI here: the CLI reads this without the server extra installed.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from kredenc.storage import layout

FILE = "server.json"


@dataclass(frozen=True)
class Advert:
    url: str
    pid: int
    started_at: float


def write(home: Path, url: str) -> Path:
    """Advertise ``url`` for this process in ``home`` (replacing any older file)."""
    path = home / FILE
    body = json.dumps({"url": url, "pid": os.getpid(), "started_at": time.time()})
    tmp = home / f".{FILE}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, body.encode("utf-8") + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)  # readers see the old file or the whole new one
    return path


def remove(home: Path) -> None:
    """Take this process's advertisement down (another process's stays)."""
    found = read(home, live_only=False)
    if found is not None and found.pid == os.getpid():
        (home / FILE).unlink(missing_ok=True)


def read(home: Path, *, live_only: bool = True) -> Advert | None:
    """The advertised server, or None: no file, an unreadable one, or (``live_only``)
    one whose process is gone or does not hold the store's lock."""
    try:
        data = json.loads((home / FILE).read_text("utf-8"))
        found = Advert(str(data["url"]), int(data["pid"]), float(data["started_at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if live_only and not (pid_alive(found.pid) and _holds_lock(home, found.pid)):
        return None
    return found


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (someone else's counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _holds_lock(home: Path, pid: int) -> bool:
    """Whether the store's lock file names ``pid`` (the writer writes its pid there)."""
    try:
        holder = (home / layout.LOCK_FILE).read_text("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return False
    return holder == str(pid)
