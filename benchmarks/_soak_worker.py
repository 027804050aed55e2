"""One worker process of ``bench_soak.py``: ``kredenc worker`` (``run_worker``) with the
HashEmbedder, so the worker files documents with the same vectors as the soak's
servers (``_soak_server.py``) and loads no model.

Run as ``python _soak_worker.py HOME NAME``; the backend, DSN, schema and the job
queue's Redis and prefix come from the ``KREDENC_*`` environment as they do for
``kredenc worker``. Prints one JSON line ``{"worker", "pid"}`` once it waits for jobs
and works until SIGINT/SIGTERM (the running job finishes first).
(``bench_soak.py --embedder minilm`` runs the real ``kredenc worker`` instead.)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys

from kredenc.config import load_settings
from kredenc.interfaces.server.worker import run_worker
from kredenc.testing.embedders import HashEmbedder


def main() -> None:
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    settings = load_settings(sys.argv[1])

    def ready(name: str, _where: str) -> None:
        print(json.dumps({"worker": name, "pid": os.getpid()}), flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        run_worker(settings, embedder=HashEmbedder(), name=sys.argv[2], on_ready=ready)


if __name__ == "__main__":
    main()
