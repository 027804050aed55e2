"""Sessions' hot history in Redis (the real Redis on loopback, a key prefix per test):
another handle or process reads a session from Redis without a store query; a turn
filed or forgotten and ``clear`` invalidate the copy; a copy from a read that raced a
filing is never stored; Redis down means the store, said once; invalidations that
could not be sent are sent before the cache is used again."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from kredenc.engine import Kredenc
from kredenc.storage import redis_sessions
from kredenc.storage.redis_client import client_for
from kredenc.storage.redis_sessions import SessionCache
from kredenc.testing.redis import closed_port_url

pytestmark = pytest.mark.integration

OpenStore = Callable[..., Kredenc]


@pytest.fixture
def opts(redis_url: str, redis_prefix: str) -> dict[str, Any]:
    return {"redis_url": redis_url, "redis_prefix": redis_prefix, "opcache": False}


def _turns(n: int, start: int = 0) -> list[dict[str, str]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
        for i in range(start, start + n)
    ]


def _no_store_reads(kb: Kredenc, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> Any:
        raise AssertionError("the store was asked for a session")

    monkeypatch.setattr(kb.store.index, "session_turns", refuse)


def test_another_handle_reads_from_redis_and_sees_each_filing(
    open_store: OpenStore, opts: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(**opts) as writer, open_store(read_only=True, **opts) as reader:
        writer.file_turns("s1", _turns(24))
        expected = [{"role": t["role"], "content": t["content"]} for t in _turns(24)[-20:]]
        assert reader.session_history("s1") == expected  # a miss: from the store, kept
        with monkeypatch.context() as m:
            _no_store_reads(reader, m)
            assert reader.session_history("s1") == expected  # from Redis
            assert reader.session_history("s1", limit=3) == expected[-3:]
            assert writer.session_history("s1") == expected  # the writer shares the copy
        writer.file_turns("s1", _turns(2, start=24))  # a turn filed: the copy is stale
        fresh = reader.session_history("s1")
        assert fresh[-1] == {"role": "assistant", "content": "message 25"} and len(fresh) == 20


def test_a_forgotten_turn_and_clear_invalidate(open_store: OpenStore, opts: dict[str, Any]) -> None:
    with open_store(**opts) as writer, open_store(read_only=True, **opts) as reader:
        ids = writer.file_turns("s1", _turns(4))
        writer.file_turns("s2", _turns(2))
        assert len(reader.session_history("s1")) == 4 and len(reader.session_history("s2")) == 2
        writer.forget(ids[-1])
        assert [m["content"] for m in reader.session_history("s1")] == [
            "message 0",
            "message 1",
            "message 2",
        ]
        assert writer.clear_session("s1") == 3
        assert reader.session_history("s1") == []
        assert len(reader.session_history("s2")) == 2  # another session's copy stands


def test_a_short_session_is_served_whole_for_any_limit(
    open_store: OpenStore, opts: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(**opts) as kb:
        kb.file_turns("s1", _turns(3))
        assert len(kb.session_history("s1")) == 3
        _no_store_reads(kb, monkeypatch)
        assert len(kb.session_history("s1", limit=100)) == 3  # complete: no store query
        assert kb.session_history("s1", limit=0) == []


def test_another_process_reads_the_session_without_a_store_query(
    open_store: OpenStore, opts: dict[str, Any], store_dir: Path
) -> None:
    script = textwrap.dedent(
        """
        import json, sys
        from kredenc.engine import Kredenc
        from kredenc.testing.embedders import HashEmbedder
        opts = json.loads(sys.argv[2])
        kb = Kredenc.open(sys.argv[1], embedder=HashEmbedder(), read_only=True, **opts)
        def refuse(*args):
            raise AssertionError("the store was asked for a session")
        kb.store.index.session_turns = refuse
        print(json.dumps(kb.session_history("s1")))
        kb.close()
        """
    )
    with open_store(**opts) as kb:
        kb.file_turns("s1", _turns(5))
        expected = kb.session_history("s1")  # this process made the copy
        done = subprocess.run(
            [sys.executable, "-c", script, str(store_dir), json.dumps(opts)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == expected


def test_a_copy_from_a_read_that_raced_a_filing_is_never_stored(
    redis_url: str, redis_prefix: str
) -> None:
    cache = SessionCache(redis_url, store="s", prefix=redis_prefix, depth=20)
    found, token = cache.get("ns", "s1", 20)
    assert found is None and token == "0"
    stale = [{"role": "user", "content": "before"}]
    cache.invalidate([("ns", "s1")])  # a writer filed while the reader read the store
    cache.put("ns", "s1", token, stale, complete=True)
    assert cache.get("ns", "s1", 20)[0] is None  # refused: the version moved
    found, token = cache.get("ns", "s1", 20)
    cache.put("ns", "s1", str(token), stale, complete=True)
    assert cache.get("ns", "s1", 20)[0] == stale


def test_keys_have_a_ttl(redis_url: str, redis_prefix: str) -> None:
    cache = SessionCache(redis_url, store="s", prefix=redis_prefix, ttl_s=77)
    cache.invalidate([("ns", "s1")])
    cache.put("ns", "s1", cache.get("ns", "s1", 5)[1] or "0", [], complete=True)
    client = client_for(redis_url)
    names = list(client.scan_iter(match=redis_prefix + "*"))
    assert len(names) == 2 and all(0 < client.ttl(n) <= 77 for n in names)


def test_redis_down_means_the_store_said_once(
    open_store: OpenStore, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        open_store(redis_url=closed_port_url(), opcache=False) as kb,
        caplog.at_level(logging.WARNING, logger="kredenc.storage.redis_sessions"),
    ):
        kb.file_turns("s1", _turns(3))
        for _ in range(5):
            assert len(kb.session_history("s1")) == 3
        assert kb.clear_session("s1") == 3
        assert kb.session_history("s1") == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "session history: Redis at redis://127.0.0.1:" in warnings[0]
    assert "sessions are read from the store" in warnings[0]


def test_invalidations_that_failed_are_sent_before_the_cache_is_used_again(
    redis_url: str, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_sessions, "RETRY_S", 0.0)
    cache = SessionCache(redis_url, store="s", prefix=redis_prefix)
    _, token = cache.get("ns", "s1", 20)
    cache.put("ns", "s1", str(token), [{"role": "user", "content": "old"}], complete=True)
    good = cache._client
    cache._client = redis.Redis.from_url(closed_port_url(), socket_connect_timeout=0.2)
    cache.invalidate([("ns", "s1")])  # Redis is away: the invalidation is owed
    cache._client = good  # it answers again (a copy made earlier is still there)
    assert cache.get("ns", "s1", 20)[0] is None  # the owed invalidation went first


def test_clear_drops_every_copy_of_the_store_only(redis_url: str, redis_prefix: str) -> None:
    mine = SessionCache(redis_url, store="a", prefix=redis_prefix)
    other = SessionCache(redis_url, store="b", prefix=redis_prefix)
    for cache in (mine, other):
        cache.invalidate([("ns", "s1")])  # version 1
        cache.put("ns", "s1", "1", [{"role": "user", "content": "x"}], complete=True)
        assert cache.get("ns", "s1", 5)[0] is not None
    mine.clear()
    assert mine.get("ns", "s1", 5)[0] is None and other.get("ns", "s1", 5)[0] is not None
    _, token = mine.get("ns", "s1", 5)
    assert token == "2"  # the version moved on, never back to 0
