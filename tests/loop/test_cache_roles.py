"""The deterministic roles' own results in the operation cache (kind ``role``): a
repeated ask hits for grade, verify, generate and reflect and answers the same; a
change of an input, of a setting that shapes a role, or (verify) a write to the
namespace misses. On a real store in tmp_path with the real answer agent."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.loop.agents import library_for
from kredenc.loop.answer import Answer, ChunkVerdict
from kredenc.loop.cache import (
    LruTier,
    OpCache,
    cache_for,
    cached_role,
    cached_search,
    counting,
    digest,
    hit_digest,
    hits_part,
    one_ask,
    text_digest,
)
from kredenc.loop.cache_json import copy_hits, verdicts_from_json, verdicts_to_json
from kredenc.loop.mind import LocalMind
from kredenc.loop.orchestrator import run_agent
from kredenc.loop.registry import registry_for
from kredenc.loop.roles.grade import Grade
from kredenc.loop.roles.verify import Verify
from kredenc.loop.tool import Services
from kredenc.providers.llm.base import LLM, Completion, JsonSchema, Message, Usage
from kredenc.records import Hit, LegScore
from kredenc.testing.embedders import HashEmbedder

ROLES = ("grade", "verify", "generate", "reflect")
FACTS = [
    "Project Kalomi was started in 2014 in Lisbon. It is led by Ana Petrova.",
    "The approved budget of Project Kalomi is 450,000 euros, spread over three phases.",
    "Project Veltra was started in 2019 in Tallinn. It is led by Jonas Berg.",
    "The approved budget of Project Veltra is 1,200,000 euros, spread over two phases.",
    "At its peak, Project Veltra ran on 120 servers and served 9,000 users every month.",
    "The steering group reviewed the risks of each project every quarter.",
]
QUESTION = "What is the budget of Project Kalomi?"


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[Kredenc]:
    with Kredenc.open(tmp_path / "store", embedder=HashEmbedder(), durability="none") as store:
        store.add_passages([{"text": t} for t in FACTS], drawer="docs")
        yield store


def _role_counts(kb: Kredenc) -> tuple[int, int]:
    cache = cache_for(kb.store)
    assert cache is not None
    role = cache.counts["role"]
    return role.hits, role.misses


def _asked(
    kb: Kredenc, question: str = QUESTION, k: int = 12, **settings: Any
) -> tuple[Answer, int, int]:
    """The answer agent's run on ``question`` (settings overridden, nothing filed) and
    the role kind's hits and misses it made."""
    s = kb.settings.model_copy(update=settings)
    agent = library_for(None).get("answer")
    options = {"k": k, "context_k": s.ask_context_k, "types": ("chunk", "memory")}
    services = Services(
        store=kb.store, ns=kb.namespace, settings=s, cache=cache_for(kb.store), options=options
    )
    before = _role_counts(kb)
    answer = run_agent(
        agent, agent.plan(registry_for(None), s), services, question=question, max_iterations=3
    )
    hits, misses = _role_counts(kb)
    return answer, hits - before[0], misses - before[1]


def _ran(answer: Answer) -> list[str]:
    return [s.tool for s in answer.trace if s.tool in ROLES and s.status == "ok"]


def _same(a: Answer, b: Answer) -> None:
    assert a.text == b.text
    assert a.citations == b.citations
    assert a.verdicts == b.verdicts
    assert a.evaluation == b.evaluation
    assert a.iterations == b.iterations and a.gaps == b.gaps


def test_a_repeated_ask_hits_for_each_role_and_answers_the_same(kb: Kredenc) -> None:
    first = kb.ask(QUESTION, session_id="s1")
    assert "450,000" in first.text
    roles = _ran(first)
    assert sorted(set(roles)) == sorted(ROLES)
    hits0, misses0 = _role_counts(kb)
    assert misses0 >= len(roles)
    again = kb.ask(QUESTION, session_id="s1")
    hits, misses = _role_counts(kb)
    _same(first, again)
    assert misses == misses0  # the filed turns of the first ask invalidate no role
    assert hits - hits0 == len(_ran(again))
    for step in again.trace:
        if step.tool in ROLES and step.status == "ok":
            assert step.cache_hits >= 1 and step.cache_misses == 0, step
    # The turns are filed each time: the session holds both questions and answers.
    history = kb.session_history("s1")
    assert [m["content"] for m in history if m["role"] == "user"] == [QUESTION, QUESTION]
    assert first.meta["filed"]["ids"] != again.meta["filed"]["ids"]


def test_an_input_or_a_setting_that_shapes_a_role_misses(kb: Kredenc) -> None:
    cold, _, misses = _asked(kb)
    assert misses == len(_ran(cold))
    warm, hits, misses = _asked(kb)
    _same(cold, warm)
    assert (hits, misses) == (len(_ran(warm)), 0)
    # Another question: another query for every role (a later iteration may find its
    # own first iteration's entry: the same inputs).
    other, hits, misses = _asked(kb, "Who leads Project Veltra?")
    assert misses >= len(set(_ran(other))) == len(ROLES)
    # grade's thresholds shape its verdicts: grade misses; what follows it hits when its
    # inputs come out the same, and misses when they do not.
    moved, hits, misses = _asked(kb, grade_upper=0.99)
    assert next(s.cache_misses for s in moved.trace if s.tool == "grade") == 1
    assert all(v.verdict != "CORRECT" for v in moved.verdicts if v.relevance < 0.99)
    back, hits, misses = _asked(kb)
    _same(cold, back)
    assert misses == 0


def test_a_write_to_the_namespace_misses_verify_only(kb: Kredenc) -> None:
    hits = kb.search("budget of Project Kalomi", k=3)
    verdicts = [ChunkVerdict(h.id, "AMBIGUOUS", 0.3, "relevance 0.30") for h in hits]
    cache = OpCache(generation_of=kb.store.generation)
    options = {"types": ("chunk", "memory")}
    services = Services(kb.store, kb.namespace, kb.settings, cache=cache, options=options)

    def verify() -> tuple[int, int, Any]:
        mind = LocalMind({"ask.question": QUESTION, "retrieve.chunks": hits,
                          "grade.verdicts": verdicts})  # fmt: skip
        Verify().run(mind, services)
        role = cache.counts["role"]
        return role.hits, role.misses, mind.read("verify.verdicts")

    assert verify()[:2] == (0, 1)
    h, m, first = verify()
    assert (h, m) == (1, 1)
    kb.file_turns("s2", [{"role": "user", "content": "The Kalomi budget was discussed."}])
    assert verify()[:2] == (2, 1)  # a turn: not a type the ask searches for evidence
    kb.remember("Invoices are due on the first of the month.", drawer="notes")
    h, m, after = verify()  # the same inputs, but the store it searches has changed
    assert (h, m) == (2, 2)
    assert after == first


def _services(kb: Kredenc, cache: OpCache | None) -> Services:
    return Services(store=kb.store, ns=kb.namespace, settings=kb.settings, cache=cache)


def test_cached_role_keys_what_it_is_given_and_counts_in_the_tally(kb: Kredenc) -> None:
    calls: list[int] = []
    verdicts = [ChunkVerdict("c1", "CORRECT", 0.9, "relevance 0.90")]

    def compute() -> list[ChunkVerdict]:
        calls.append(1)
        return list(verdicts)

    def run(services: Services, **inputs: Any) -> list[ChunkVerdict]:
        return cached_role(
            services,
            "grade",
            {"query": "q", **inputs},
            compute,
            verdicts_to_json,
            verdicts_from_json,
            shaped_by={"upper": 0.6},
        )

    services = _services(kb, OpCache())
    with counting() as tally:
        assert run(services) == verdicts
        assert run(services) == verdicts
        assert run(services, focus="f") == verdicts
    assert (tally.hits, tally.misses, len(calls)) == (1, 2, 2)
    assert run(_services(kb, None)) == verdicts and len(calls) == 3  # no cache: computed


def test_hits_part_is_one_digest_that_moves_with_each_field_and_extra() -> None:
    hit = Hit("c1", "a long chunk text " * 200, 1.0, "passage", "docs", type="chunk")
    part = hits_part([hit])
    assert len(part) == 64 and hit.text not in part
    assert hit_digest(hit) == digest([hit.id, hit.type, hit.title, text_digest(hit.text)])
    assert text_digest(hit.text) == hashlib.sha256(hit.text.encode()).hexdigest()
    other = Hit("c2", "another text", 1.0, "passage", "docs", type="chunk")
    changed = [
        Hit("c1", hit.text + ".", 1.0, "passage", "docs", type="chunk"),  # the text
        Hit("c9", hit.text, 1.0, "passage", "docs", type="chunk"),  # the id
        Hit("c1", hit.text, 1.0, "passage", "docs", type="memory"),  # the type
        Hit("c1", hit.text, 1.0, "passage", "docs", type="chunk", title="T"),  # the title
    ]
    assert len({part, *(hits_part([c]) for c in changed)}) == 5
    assert hits_part([hit, other]) != hits_part([other, hit])  # the order
    assert hits_part([hit], [[1, 2]]) != hits_part([hit], [[2, 1]]) != part  # the extras
    with pytest.raises(ValueError, match="1 extras for 2 hits"):
        hits_part([hit, other], [[1, 2]])


def test_a_changed_search_setting_misses_between_asks_of_one_settings_object(
    kb: Kredenc,
) -> None:
    # The search fingerprint is remembered for one ask only: a setting changed in place
    # between two asks (the same Settings object) reaches the next ask's keys.
    cache = OpCache(generation_of=kb.store.generation)
    services = Services(kb.store, kb.namespace, kb.settings, cache=cache)
    with one_ask():
        cached_search(services, "budget of Project Kalomi", k=3)
        cached_search(services, "budget of Project Kalomi", k=3)
    assert (cache.counts["search"].hits, cache.counts["search"].misses) == (1, 1)
    old = kb.settings.leg_k
    try:
        kb.settings.leg_k = old + 7
        with one_ask():
            cached_search(services, "budget of Project Kalomi", k=3)
        assert cache.counts["search"].misses == 2
    finally:
        kb.settings.leg_k = old
    with one_ask():
        cached_search(services, "budget of Project Kalomi", k=3)
    assert cache.counts["search"].hits == 2


def test_a_search_hit_in_memory_skips_the_decode_and_shares_nothing(kb: Kredenc) -> None:
    cache = OpCache(generation_of=kb.store.generation)
    services = _services(kb, cache)
    with counting() as tally:
        cold = cached_search(services, "budget of Project Kalomi", k=3)
        first = cached_search(services, "budget of Project Kalomi", k=3)  # decoded, attached
        first[0].meta["mine"] = [1]
        first[0].legs.clear()
        first[0].text = "changed"
        again = cached_search(services, "budget of Project Kalomi", k=3)  # the copy
    assert (tally.hits, tally.misses) == (2, 1)
    assert again == cold and again[0] is not first[0]
    assert cache.lru.stats()["bytes"] == 2 * len(next(iter(cache.lru._data.values())))


def test_an_attached_value_counts_and_leaves_with_its_entry() -> None:
    lru = LruTier(entries=2, max_bytes=100)
    lru.put("search", "a", "x" * 30)
    lru.attach("search", "a", ["decoded"])
    assert lru.stats() == {"entries": 1, "bytes": 60}
    assert lru.get_object("search", "a") == ["decoded"]
    lru.put("search", "b", "y" * 30)  # 90 bytes: both stay
    lru.put("search", "c", "z" * 30)  # 3 entries: "a" (and its object) go
    assert lru.get_object("search", "a") is None and lru.get("search", "a") is None
    assert lru.stats() == {"entries": 2, "bytes": 60}
    lru.put("search", "b", "w" * 10)  # a new value drops the old one's object
    assert lru.get_object("search", "b") is None and lru.stats()["bytes"] == 40


def test_copy_hits_copies_what_a_caller_could_change() -> None:
    hit = Hit("c1", "t", 1.0, "passage", "docs", legs={"dense": LegScore(1, 0.5)},
              meta={"role": "user", "n": [1, {"a": 2}]})  # fmt: skip
    (copied,) = copy_hits([hit])
    assert copied == hit and copied is not hit
    copied.meta["n"][1]["a"] = 3
    copied.legs["lexical"] = LegScore(2, 0.1)
    assert hit.meta["n"][1]["a"] == 2 and "lexical" not in hit.legs


def test_the_plan_is_built_once_while_no_tools_folder_is_set(kb: Kredenc, tmp_path: Path) -> None:
    from kredenc.loop.ask import _planned

    agent = library_for(None).get("answer")
    first = _planned(agent, kb.settings)
    again = _planned(agent, kb.settings)
    assert [t.name for t in first] == list(agent.tools)
    assert all(a is b for a, b in zip(first, again, strict=True)) and first is not again
    other = kb.settings.model_copy(update={"grade_upper": 0.9})  # other settings: planned anew
    assert all(a is not b for a, b in zip(first, _planned(agent, other), strict=True))
    tools = tmp_path / "tools"
    tools.mkdir()
    folder = kb.settings.model_copy(update={"tools_dir": tools})
    one, two = _planned(agent, folder), _planned(agent, folder)
    assert all(a is not b for a, b in zip(one, two, strict=True))


class _NoVerdicts(LLM):
    """Replies with no verdicts (grade falls back to the rules' class); counts calls."""

    name = "noverdicts"
    model = "nv-1"
    calls = 0

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: JsonSchema | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion:
        self.calls += 1
        return Completion('{"verdicts": []}', self.model, Usage(5, 2), "stop", {"verdicts": []})


def test_the_llm_grade_caches_the_rules_relevance_beside_its_call(kb: Kredenc) -> None:
    hits = kb.search("budget of Project Kalomi", k=3)
    llm = _NoVerdicts()
    cache = OpCache(generation_of=kb.store.generation)
    settings = kb.settings.model_copy(update={"role_grade": "llm"})
    services = Services(kb.store, kb.namespace, settings, llm=llm, cache=cache)

    def grade() -> list[ChunkVerdict]:
        mind = LocalMind({"ask.question": QUESTION, "retrieve.chunks": hits})
        Grade().run(mind, services)
        verdicts: list[ChunkVerdict] = mind.read("grade.verdicts")
        return verdicts

    first = grade()
    assert (cache.counts["role"].misses, cache.counts["role"].hits, llm.calls) == (1, 0, 1)
    assert grade() == first
    assert (cache.counts["role"].misses, cache.counts["role"].hits, llm.calls) == (1, 1, 1)


def test_a_role_value_kept_decoded_is_handed_out_as_a_copy(kb: Kredenc) -> None:
    services = _services(kb, OpCache())
    verdicts = [ChunkVerdict("c1", "CORRECT", 0.9, "relevance 0.90")]

    def run() -> list[ChunkVerdict]:
        return cached_role(
            services, "grade", {"query": "q"}, lambda: list(verdicts),
            verdicts_to_json, verdicts_from_json, copy=list, shaped_by={},
        )  # fmt: skip

    with counting() as tally:
        run()
        second = run()  # decoded, and a copy kept
        second.append(ChunkVerdict("c2", "INCORRECT", 0.1))
        third = run()  # the copy's copy, no decode
    assert third == verdicts and (tally.hits, tally.misses) == (2, 1)
