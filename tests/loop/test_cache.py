"""The operation cache: keys, the two tiers, backfill, invalidation, and the helpers the
roles call (on a real store in tmp_path; the one fake is a counting LLM at our seam)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, ProviderError
from kredenc.grounding.base import Evaluation, SentenceSupport
from kredenc.loop.cache import (
    LruTier,
    OpCache,
    cache_for,
    cached_complete,
    cached_judge,
    cached_search,
    counting,
    make_key,
)
from kredenc.loop.cache_json import hit_from_json, hit_to_json
from kredenc.loop.tool import Services
from kredenc.providers.llm.base import LLM, Completion, JsonSchema, Message, Usage
from kredenc.records import Hit, LegScore

OpenStore = Callable[..., Kredenc]


class CountingLLM(LLM):
    """Replies with the call number: a second real call shows as a different text."""

    name = "counting"

    def __init__(self, model: str = "m1") -> None:
        self.model = model
        self.calls = 0

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: JsonSchema | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion:
        self.calls += 1
        data = {"n": self.calls} if schema is not None else None
        return Completion(f"reply {self.calls}", self.model, Usage(10, 3, 0.002), "stop", data)


class CountingJudge:
    def __init__(self) -> None:
        self.calls = 0

    def judge(self, question: str, answer: str, contexts: Sequence[str]) -> Evaluation:
        self.calls += 1
        support = SentenceSupport(answer, 0, len(answer), 0.8, True, 0, contexts[0], "")
        return Evaluation(True, 80 + self.calls, False, "", "supported", (support,))


def _services(kb: Kredenc, **kw: Any) -> Services:
    return Services(store=kb.store, ns=kb.namespace, settings=kb.settings, **kw)


def _seed(kb: Kredenc) -> None:
    for text in (
        "The Transformer uses h = 8 parallel attention heads.",
        "The big model reaches 28.4 BLEU on WMT 2014 English-German.",
        "Adam with beta1 = 0.9 and beta2 = 0.98 was the optimizer.",
    ):
        kb.remember(text)


# -- keys and the in-memory tier ------------------------------------------------------
def test_keys_are_canonical_and_separate_what_differs() -> None:
    assert make_key("search", {"a": 1, "b": [1, 2]}) == make_key("search", {"b": (1, 2), "a": 1})
    assert make_key("search", "q") != make_key("llm", "q")
    assert make_key("search", "q", 1) != make_key("search", "q", 2)
    assert len(make_key("judge", "x")) == 64
    with pytest.raises(InvalidInput, match="not JSON"):
        make_key("search", object())


def test_a_key_is_the_standard_librarys_canonical_json() -> None:
    """orjson writes the keys; for what keys hold (texts, numbers, lists, dicts,
    dataclasses, datetimes, sets) its bytes are json.dumps's canonical form but for a
    float's exponent (1.5e-7, not 1.5e-07); an int past 64 bits falls back to it."""
    import json
    from dataclasses import dataclass
    from datetime import UTC, datetime

    from kredenc.loop.cache import canonical

    @dataclass
    class Params:
        upper: float = 0.4667
        coef: tuple[float, ...] = (1.2136, -5.031)
        name: str = "grade"

    parts = [
        "role", 2, "verify", {"k": 6, "b": None, "a": [True, 0.125, "é ☃ \u2028"]},
        Params(), datetime(2026, 12, 5, tzinfo=UTC), {"z", "a"},
    ]  # fmt: skip
    for given in (parts, [*parts, 2**70]):  # orjson's bytes; the fallback's
        plain = json.loads(json.dumps(given, default=_plain_for_test))
        expected = json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert canonical(given) == expected.encode("utf-8")
    assert canonical([1.5e-7]) == b"[1.5e-7]" != canonical([1.5e-8])


def _plain_for_test(value: Any) -> Any:
    from dataclasses import asdict, is_dataclass
    from datetime import datetime

    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, set):
        return sorted(value, key=repr)
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(type(value).__name__)


def test_the_lru_is_bounded_by_entries_and_by_bytes() -> None:
    lru = LruTier(entries=3, max_bytes=100)
    for i in range(4):
        lru.put("k", str(i), "x")
    assert lru.get("k", "0") is None and lru.get("k", "3") == "x"
    lru.get("k", "1")  # used: it outlives 2
    lru.put("k", "big", "y" * 95)
    assert lru.stats()["bytes"] <= 100
    assert lru.get("k", "big") is not None and lru.get("k", "2") is None
    lru.put("k", "huge", "z" * 101)  # larger than the whole tier: not kept
    assert lru.get("k", "huge") is None


def test_a_cold_hit_in_the_file_backfills_the_lru(open_store: OpenStore) -> None:
    with open_store() as kb:
        first = OpCache(kb.store.opcache_tier())
        key = first.key("llm", "fp", "hello")
        first.put("llm", key, {"text": "hi"})
        # Another process (a new OpCache on the same file) starts with an empty LRU.
        second = OpCache(kb.store.opcache_tier())
        assert second.lru.get("llm", key) is None
        with counting() as tally:
            assert second.get("llm", key) == {"text": "hi"}
            assert second.lru.get("llm", key) is not None
            assert second.get("llm", key) == {"text": "hi"}
            assert second.get("llm", "missing") is None
        assert (tally.hits, tally.misses) == (2, 1)
        assert second.stats()["kinds"]["llm"] == {"hits": 2, "misses": 1, "backfills": 1}


def test_values_come_back_as_fresh_objects() -> None:
    cache = OpCache()
    cache.put("search", "k", [{"a": [1]}])
    got = cache.get("search", "k")
    got[0]["a"].append(2)
    assert cache.get("search", "k") == [{"a": [1]}]


def test_a_hit_survives_json_field_by_field() -> None:
    hit = Hit(
        id="r1", text="t", score=0.5, kind="fact", drawer="d", type="chunk",
        legs={"lexical": LegScore(1, 3.5), "dense": LegScore(2, 0.7)}, fused=0.9,
        rerank=0.1, meta={"x": {"y": [1, 2]}}, tags=("a", "b"), seq=7, offset=99,
        created_at=1.5, title="T", origin="/p.pdf", page=3, start_s=1.25, doc_id="d1",
        graph="related_to of r0", user_id="u1", agent_id="a1", run_id="r9", relevance=0.42,
    )  # fmt: skip
    back = hit_from_json(hit_to_json(hit))
    assert back == hit
    # Every field has a non-default value above, so a field the codec forgets fails here.
    defaults = Hit(id="", text="", score=0.0, kind="", drawer="")
    assert all(getattr(hit, f.name) != getattr(defaults, f.name) for f in fields(Hit))


# -- cached_search --------------------------------------------------------------------
def test_a_repeated_search_is_a_hit_equal_to_the_search(open_store: OpenStore) -> None:
    with open_store() as kb:
        _seed(kb)
        services = _services(kb, cache=cache_for(kb.store))
        with counting() as tally:
            first = cached_search(services, "attention heads", k=2)
            again = cached_search(services, "attention heads", k=2)
            other = cached_search(services, "attention heads", k=1)  # other options: a miss
        assert (tally.hits, tally.misses) == (1, 2)
        assert again == first == kb.search("attention heads", k=2)
        assert len(other) == 1
        again[0].text = "changed by a caller"
        assert cached_search(services, "attention heads", k=2) == first


def test_a_write_to_what_a_search_reads_invalidates_it(open_store: OpenStore) -> None:
    with open_store() as kb:
        _seed(kb)
        services = _services(kb, cache=cache_for(kb.store))
        before = cached_search(services, "optimizer momentum", k=5, types=["memory"])
        kb.file_turns("s1", [{"role": "user", "content": "optimizer momentum please"}])
        with counting() as tally:  # a filed turn does not touch a memory-only search
            assert cached_search(services, "optimizer momentum", k=5, types=["memory"]) == before
        assert tally.hits == 1
        new = kb.remember("The optimizer momentum was warmed up over 4000 steps.").id
        after = cached_search(services, "optimizer momentum", k=5, types=["memory"])
        assert new in [h.id for h in after] and new not in [h.id for h in before]
        kb.forget(new)
        assert new not in [h.id for h in cached_search(services, "optimizer momentum", k=5)]


def test_the_cache_is_per_store_and_off_with_the_setting(
    open_store: OpenStore, tmp_path: Path
) -> None:
    with open_store() as kb:
        assert cache_for(kb.store) is cache_for(kb.scoped("other").store)
        services = _services(kb.scoped("other"), cache=cache_for(kb.store))
        _seed(kb)
        assert cached_search(services, "attention heads") == []  # namespaces stay apart
    with open_store(tmp_path / "off", opcache=False) as kb:
        assert cache_for(kb.store) is None
        _seed(kb)
        assert cached_search(_services(kb), "attention heads", k=1)  # straight through


def test_rebuild_and_purge_empty_the_lru_too(open_store: OpenStore, store_dir: Path) -> None:
    with open_store() as kb:
        secret = kb.remember("the vault code is zebracanary 4921").id
        kb.remember("an ordinary note about the garden")
        cache = cache_for(kb.store)
        services = _services(kb, cache=cache)
        assert secret in [h.id for h in cached_search(services, "vault code", k=2)]
        kb.rebuild()
        with counting() as tally:
            cached_search(services, "vault code", k=2)
        assert tally.misses == 1  # same generation after the replay, but the LRU was emptied
        kb.forget(secret)
        cached_search(services, "vault code", k=2)
        kb.compact(purge=True)
        assert cache is not None and cache.lru.stats()["entries"] == 0
    held = [p for p in store_dir.rglob("*") if p.is_file() and b"zebracanary" in p.read_bytes()]
    assert held == []


# -- cached_complete and cached_judge -------------------------------------------------
def test_an_llm_call_is_cached_by_model_messages_and_schema(open_store: OpenStore) -> None:
    with open_store() as kb:
        llm = CountingLLM()
        services = _services(kb, cache=cache_for(kb.store), llm=llm)
        msgs = [{"role": "user", "content": "hello"}]
        with counting() as tally:
            one = cached_complete(services, msgs)
            two = cached_complete(services, msgs)
        assert llm.calls == 1 and two.text == one.text == "reply 1"
        assert one.usage == Usage(10, 3, 0.002) and two.usage == Usage()  # a hit costs nothing
        assert (tally.hits, tally.misses) == (1, 1)
        schema = {"type": "object"}
        assert cached_complete(services, msgs, schema=schema).data == {"n": 2}
        assert cached_complete(services, msgs, schema=schema).data == {"n": 2}
        assert cached_complete(services, [{"role": "user", "content": "other"}]).text == "reply 3"
        services.llm = CountingLLM(model="m2")  # another model: a miss
        assert cached_complete(services, msgs).text == "reply 1"
        assert services.llm.calls == 1


def test_an_unusable_reply_is_a_provider_error_and_never_cached(open_store: OpenStore) -> None:
    """An empty reply (or, with a schema, one holding no JSON object) is no answer: it
    must not be served again once the LLM recovers."""

    class Flaky(CountingLLM):
        def __init__(self) -> None:
            super().__init__()
            self.bad = True

        def complete(self, messages: Sequence[Message], **kw: Any) -> Completion:
            done = super().complete(messages, **kw)
            return Completion("  \n", self.model) if self.bad else done

    with open_store() as kb:
        llm = Flaky()
        cache = cache_for(kb.store)
        services = _services(kb, cache=cache, llm=llm)
        msgs = [{"role": "user", "content": "hello"}]
        with pytest.raises(ProviderError, match="empty reply"):
            cached_complete(services, msgs)
        with pytest.raises(ProviderError, match="no JSON object"):
            cached_complete(services, msgs, schema={"type": "object"})
        llm.bad = False  # the LLM recovers: it is asked again
        assert cached_complete(services, msgs).text == "reply 3" and llm.calls == 3
        # An unusable reply a cache already holds (written before this check) is a miss.
        assert cache is not None
        other = [{"role": "user", "content": "other"}]
        cache.put("llm", cache.key("llm", llm.fingerprint(), other, None, {}), {
            "text": "", "model": "m1", "usage": [1, 1, 0.0], "finish_reason": "stop",
            "data": None,
        })  # fmt: skip
        assert cached_complete(services, other).text == "reply 4"


def test_a_sampled_call_is_never_cached(open_store: OpenStore) -> None:
    with open_store() as kb:
        llm = CountingLLM()
        services = _services(kb, cache=cache_for(kb.store), llm=llm)
        msgs = [{"role": "user", "content": "a poem"}]
        cached_complete(services, msgs, temperature=0.7)
        cached_complete(services, msgs, temperature=0.7)
        assert llm.calls == 2


def test_no_llm_is_a_one_line_error(open_store: OpenStore) -> None:
    with open_store() as kb, pytest.raises(ProviderError, match="none is configured"):
        cached_complete(_services(kb, cache=cache_for(kb.store)), [])


def test_a_judgement_is_cached_by_judge_and_inputs(open_store: OpenStore) -> None:
    with open_store() as kb:
        judge = CountingJudge()
        services = _services(kb, cache=cache_for(kb.store))
        first = cached_judge(services, judge, "q", "The answer.", ["The answer, in context."])
        again = cached_judge(services, judge, "q", "The answer.", ["The answer, in context."])
        assert judge.calls == 1 and again == first and again.sentences == first.sentences
        other = cached_judge(services, judge, "q", "The answer.", ["Another context."])
        assert judge.calls == 2 and other.confidence_score == 82
        cached_judge(_services(kb), judge, "q", "The answer.", ["x"])  # no cache: a call
        assert judge.calls == 3


def test_the_cache_does_not_keep_its_store_alive(open_store: OpenStore) -> None:
    import gc
    import weakref

    with open_store() as kb:
        assert cache_for(kb.store) is not None
        ref = weakref.ref(kb.store)
    del kb
    gc.collect()
    assert ref() is None


def test_an_ask_reports_its_cache_hits_per_step(open_store: OpenStore) -> None:
    with open_store() as kb:
        _seed(kb)
        kb.ask("How many attention heads does the Transformer use?")
        again = kb.ask("How many attention heads does the Transformer use?")
    steps = {s.tool: s for s in again.trace}
    assert steps["judge"].cache_hits + steps["retrieve"].cache_hits >= 1, again.trace


def test_a_garbled_cache_file_never_fails_a_search(open_store: OpenStore, store_dir: Path) -> None:
    with open_store() as kb:
        _seed(kb)
    (store_dir / "opcache.db").write_bytes(b"\x00garbage, not SQLite" * 500)
    with open_store() as kb:
        services = _services(kb, cache=cache_for(kb.store))
        hits = cached_search(services, "attention heads", k=1)
        assert hits and cached_search(services, "attention heads", k=1) == hits
    assert any(p.name.startswith("opcache.db.bad-") for p in store_dir.iterdir())


def test_a_judges_params_are_part_of_its_key(open_store: OpenStore) -> None:
    from dataclasses import dataclass

    from kredenc.loop.cache import judge_fingerprint

    @dataclass(frozen=True)
    class Params:
        floor: float = 0.5

    judge = CountingJudge()
    plain = judge_fingerprint(judge)
    judge.params = Params()  # type: ignore[attr-defined]
    first = judge_fingerprint(judge)
    judge.params = Params(floor=0.6)  # type: ignore[attr-defined]
    assert len({plain, first, judge_fingerprint(judge)}) == 3
