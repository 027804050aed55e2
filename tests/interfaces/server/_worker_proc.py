"""A ``kredenc worker`` process the RQ tests start, kill and outlive.

Run as ``python _worker_proc.py STORE NAME [scheduler]``: the settings of STORE (its
``KREDENC_*`` environment: backend, DSN, schema, Redis, prefix, heartbeat) and
``run_worker`` with the HashEmbedder (no model is loaded), with ``scheduler`` also its
lifecycle scheduler. Prints ``ready NAME`` once it waits for jobs.
"""

from __future__ import annotations

import sys

from kredenc.config import load_settings
from kredenc.interfaces.server.worker import run_worker
from kredenc.testing.embedders import HashEmbedder


def main() -> None:
    settings = load_settings(sys.argv[1])

    def ready(name: str, _where: str) -> None:
        print(f"ready {name}", flush=True)

    scheduler = sys.argv[3:] == ["scheduler"]
    run_worker(
        settings, embedder=HashEmbedder(), name=sys.argv[2], on_ready=ready, scheduler=scheduler
    )


if __name__ == "__main__":
    main()
