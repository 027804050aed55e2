"""The rate limit's token bucket (a fake clock): a minute's worth of requests, then
a refusal saying how long to wait, refilled as time passes; callers apart; a key's
bucket named by its digest, never the key."""

from __future__ import annotations

from starlette.datastructures import Headers

from kredenc.interfaces.server.limits import Buckets, caller_of


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_bucket_spends_then_refuses_then_refills() -> None:
    clock = Clock()
    buckets = Buckets(60, clock=clock)  # one a second
    assert [buckets.take("a") for _ in range(60)] == [0.0] * 60
    wait = buckets.take("a")
    assert 0.9 < wait <= 1.0
    assert buckets.take("b") == 0.0  # another caller has its own bucket
    clock.now += 0.5
    assert 0.4 < buckets.take("a") <= 0.5
    clock.now += 0.5
    assert buckets.take("a") == 0.0
    assert buckets.take("a") > 0


def test_caller_is_the_key_digest_or_the_address() -> None:
    keyed = caller_of({"client": ("10.0.0.1", 5)}, Headers({"authorization": "Bearer kr_secret"}))
    assert keyed.startswith("key:") and "kr_secret" not in keyed
    assert caller_of({"client": ("10.0.0.1", 5)}, Headers({})) == "addr:10.0.0.1"
