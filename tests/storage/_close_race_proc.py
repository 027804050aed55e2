"""Threads hammer a store while the main thread closes it (run by test_close.py).

Run as ``python _close_race_proc.py STORE THREADS SECONDS``. Eight threads remember,
search, relate and forget their own records in a loop until a call raises; the main
thread closes the store after SECONDS. Prints one JSON line: each thread's calls that
succeeded and the error that stopped it (type, message, hint). A crash (a segfault)
shows as a non-zero exit status.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> int:
    from kredenc.engine import Kredenc
    from kredenc.testing.embedders import HashEmbedder

    home, threads, seconds = Path(argv[0]), int(argv[1]), float(argv[2])
    kb = Kredenc.open(home, embedder=HashEmbedder(), durability="none")
    for i in range(50):
        kb.remember(f"seed note {i} about harbours and ferries")
    results: list[dict[str, Any]] = [{} for _ in range(threads)]
    started = threading.Barrier(threads + 1)

    def work(n: int) -> None:
        calls = 0
        started.wait()
        try:
            while True:
                a = kb.remember(f"thread {n} note {calls} on ferries")
                kb.search("ferries harbours", k=5)
                b = kb.remember(f"thread {n} other {calls}")
                kb.relate(a.id, b.id, "supports")
                kb.search("note", k=3, mode="lexical")
                kb.forget(b.id)
                kb.get(a.id)
                calls += 7
        except BaseException as exc:  # noqa: BLE001 - the report names whatever stopped it
            results[n] = {
                "calls": calls,
                "type": type(exc).__name__,
                "module": type(exc).__module__,
                "message": getattr(exc, "message", str(exc)),
                "hint": getattr(exc, "hint", ""),
            }

    pool = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    started.wait()
    time.sleep(seconds)
    began = time.monotonic()
    kb.close()
    closed_in = time.monotonic() - began
    for t in pool:
        t.join(60)
    alive = sum(t.is_alive() for t in pool)
    sys.stdout.write(json.dumps({"threads": results, "alive": alive, "close_s": closed_in}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
