"""The scripted loopback server answers without the ~40 ms Nagle/delayed-ACK stall.

A reply written as two small sends (headers, then body) on a socket with Nagle's
algorithm on waits for the client's delayed ACK before the body leaves: about 40 ms
on Linux, per request, once the connection has left quick-ACK mode. Every latency
measured against this server (the proxy benchmark's "direct" call) would carry it.
"""

from __future__ import annotations

import statistics
import time

import httpx

from kredenc.testing.openai_server import LoopbackServer, Reply


def test_keep_alive_replies_do_not_stall() -> None:
    with LoopbackServer() as server:
        server.route("POST", "/v1/echo", lambda r: Reply.json({"n": len(r.body)}))
        times = []
        with httpx.Client(timeout=10) as client:
            for i in range(30):
                start = time.perf_counter()
                response = client.post(server.base_url + "/echo", content=b"x" * i)
                times.append(time.perf_counter() - start)
                assert response.json() == {"n": i}
    # Stalled replies take ~40 ms each; unstalled ones well under 5 ms on an idle
    # machine (20 ms leaves room for a loaded one).
    assert statistics.median(times[5:]) < 0.020, [round(t * 1000, 1) for t in times]
