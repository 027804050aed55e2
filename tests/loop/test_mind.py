"""The blackboard's two backends run the Mind conformance suite: LocalMind in the
process, RedisMind on the real Redis on loopback (a key prefix per test). Then what
only a Redis mind does: its hash and TTL, values refused at the write, a Redis that
does not answer, the setting that chooses it, and whole asks on it (the same answer
as in-process; nothing left behind; concurrent asks apart)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
import redis

from kredenc.config import Settings
from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, StoreError
from kredenc.loop import mind_json
from kredenc.loop.mind import LocalMind, Mind, RedisMind, new_mind, open_mind
from kredenc.storage.redis_board import RedisBoard
from kredenc.testing.conformance import MindConformance
from kredenc.testing.conformance.mind import sample_values
from kredenc.testing.redis import closed_port_url

OpenStore = Callable[..., Kredenc]


class TestLocalMind(MindConformance):
    def make_mind(self) -> Mind:
        return LocalMind()


def _keys(client: redis.Redis, prefix: str) -> list[bytes]:
    return list(client.scan_iter(match=prefix + "*"))


@pytest.mark.integration
class TestRedisMind(MindConformance):
    @pytest.fixture(autouse=True)
    def _redis(self, redis_url: str, redis_prefix: str) -> None:
        self.url, self.prefix = redis_url, redis_prefix

    def make_mind(self) -> Mind:
        return RedisMind(RedisBoard(self.url, prefix=self.prefix, ttl_s=60))


def test_the_json_form_keeps_types_and_never_imports_a_name() -> None:
    values = sample_values()
    for key, value in values.items():
        back = mind_json.loads(mind_json.dumps(value))
        assert back == value and type(back) is type(value), key
    with pytest.raises(InvalidInput, match=r"unknown type 'os\.system'"):
        mind_json.loads('{"$t": "os.system", "v": {}}')
    with pytest.raises(InvalidInput, match=r"retrieve\.chunks holds a PosixPath"):
        from pathlib import Path

        mind_json.dumps([Path("/etc")], where="retrieve.chunks")
    with pytest.raises(InvalidInput, match="keys that are not text"):
        mind_json.dumps({1: "a"})


def test_a_plugin_registers_its_own_result_type() -> None:
    @dataclass(frozen=True)
    class PluginScore:
        value: float
        label: str = ""

    with pytest.raises(InvalidInput, match="PluginScore"):
        mind_json.dumps(PluginScore(0.5))
    mind_json.register(PluginScore)
    try:
        assert mind_json.loads(mind_json.dumps([PluginScore(0.5, "x")])) == [PluginScore(0.5, "x")]
        with pytest.raises(InvalidInput, match="registered already"):

            @mind_json.register
            @dataclass
            class PluginScore:  # type: ignore[no-redef]  # another class, the same name
                value: float
    finally:
        mind_json.TYPES.pop("PluginScore", None)


@pytest.mark.integration
def test_a_run_is_one_hash_with_a_ttl_deleted_when_the_run_ends(
    redis_url: str, redis_prefix: str, redis_client: redis.Redis
) -> None:
    settings = Settings(
        mind_backend="redis", redis_url=redis_url, redis_prefix=redis_prefix, mind_ttl_s=90
    )
    with open_mind(settings) as mind:
        assert isinstance(mind, RedisMind)
        mind.write("retrieve.mode", "hybrid")
        (name,) = _keys(redis_client, redis_prefix)
        assert name == f"{redis_prefix}mind:{mind.run_id}".encode() and len(mind.run_id) == 32
        assert redis_client.type(name) == b"hash" and 0 < redis_client.ttl(name) <= 90
        assert redis_client.hget(name, "retrieve.mode") == b'"hybrid"'
    assert _keys(redis_client, redis_prefix) == []


@pytest.mark.integration
def test_a_value_that_is_not_json_is_refused_and_nothing_is_written(
    redis_url: str, redis_prefix: str
) -> None:
    mind = RedisMind(RedisBoard(redis_url, prefix=redis_prefix))
    try:
        with pytest.raises(InvalidInput, match=r"retrieve\.chunks holds a object"):
            mind.write("retrieve.chunks", [object()])
        assert mind.list_keys() == []
    finally:
        mind.close()


def test_a_redis_that_does_not_answer_fails_the_call_with_one_clear_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mind = RedisMind(RedisBoard(closed_port_url()))
    with pytest.raises(StoreError) as caught:
        mind.write("retrieve.mode", "x")
    assert "the blackboard's Redis at redis://127.0.0.1:" in caught.value.message
    assert "mind_backend = 'local'" in (caught.value.hint or "")
    with caplog.at_level(logging.WARNING, logger="kredenc.loop.mind"):
        mind.close()  # the run ends anyway: its TTL would remove it
    assert "expires by itself" in caplog.text


def test_the_setting_chooses_the_backend_and_redis_needs_a_url() -> None:
    assert isinstance(new_mind(Settings()), LocalMind)
    with pytest.raises(ValueError, match="mind_backend = 'redis' needs redis_url"):
        Settings(mind_backend="redis")
    with pytest.raises(ValueError, match="redis_url must start with redis://"):
        Settings(redis_url="http://127.0.0.1:6379")


FACTS = (
    "The Transformer uses h = 8 parallel attention heads.",
    "The big model reaches 28.4 BLEU on WMT 2014 English-German.",
    "Adam with beta1 = 0.9, beta2 = 0.98 and epsilon = 1e-9 was the optimizer.",
)
QUESTIONS = (
    "How many attention heads does the Transformer use?",
    "What BLEU does the big model reach on WMT 2014 English-German?",
    "Who won the FIFA World Cup 2026?",
)


@pytest.mark.integration
def test_asks_on_a_redis_mind_answer_as_in_process_and_leave_nothing(
    open_store: OpenStore, redis_url: str, redis_prefix: str, redis_client: redis.Redis
) -> None:
    local = open_store(opcache=False)
    for text in FACTS:
        local.remember(text)
    expected = {q: local.ask(q) for q in QUESTIONS}
    local.close()
    kb = open_store(
        opcache=False, mind_backend="redis", redis_url=redis_url, redis_prefix=redis_prefix
    )
    with ThreadPoolExecutor(3) as pool:  # concurrent asks: each on its own hash
        got = dict(zip(QUESTIONS, pool.map(kb.ask, QUESTIONS), strict=True))
    for q in QUESTIONS:
        a, b = expected[q], got[q]
        assert (b.text, b.citations, b.verdicts, b.evaluation) == (
            a.text,
            a.citations,
            a.verdicts,
            a.evaluation,
        ), q
        assert [(s.tool, s.status) for s in b.trace] == [(s.tool, s.status) for s in a.trace]
    # Every run's hash is gone (the sessions' hot history has keys of its own).
    assert _keys(redis_client, redis_prefix + "mind:") == []
    during: list[int] = []
    kb.ask(
        QUESTIONS[0],
        on_step=lambda step: during.append(len(_keys(redis_client, redis_prefix + "mind:"))),
    )
    assert during and set(during) == {1}  # the run's state was in Redis, in one hash
    assert _keys(redis_client, redis_prefix + "mind:") == []
