"""One server process of ``bench_soak.py``: ``kredenc serve``'s app over a store opened
with the HashEmbedder (no model: the soak measures the storage and the server, and
every process gets the same vectors).

Run as ``python _soak_server.py HOME``; the backend, DSN, Redis URL and limits come
from the ``KREDENC_*`` environment as they do for ``kredenc serve``. It binds a free
loopback port, prints one JSON line ``{"url", "pid"}`` and serves until SIGINT/SIGTERM.
(``bench_soak.py --embedder minilm`` runs the real ``kredenc serve`` instead.)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

from kredenc.engine import Kredenc
from kredenc.interfaces.proxy import listen
from kredenc.interfaces.server.run import serve
from kredenc.interfaces.server.state import ServerConfig
from kredenc.testing.embedders import HashEmbedder


def main() -> None:
    home = Path(sys.argv[1])
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sock = listen("127.0.0.1", 0)
    sock.listen(2048)
    with Kredenc.open(home, embedder=HashEmbedder()) as kb:
        port = sock.getsockname()[1]
        print(json.dumps({"url": f"http://127.0.0.1:{port}", "pid": os.getpid()}), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            serve(kb, ServerConfig(port=port, web=False, mcp=False), sock=sock)


if __name__ == "__main__":
    main()
