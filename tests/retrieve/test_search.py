"""Search through the facade: modes, what each hit reports, drawers, forget, rebuild."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import DeadlineExceeded, InvalidInput, ProviderError
from kredenc.records import Hit
from kredenc.retrieve.relevance import WINDOW
from kredenc.retrieve.search import EMBED_WORKERS, Legs, SearchParams, run_legs
from kredenc.storage.index.filters import Filters
from kredenc.storage.index.lexical import Phrase
from kredenc.storage.index.vectors import F32
from kredenc.testing.embedders import HashEmbedder

VOCAB = (
    *("budget", "kestrel", "river", "meeting", "invoice", "garden", "python", "sqlite"),
    *("vector", "memory", "agent", "deadline", "coffee", "berlin", "tokyo", "quarterly"),
    *("review", "project", "alpha", "beta", "gamma", "delta"),
)
QUERIES = ("budget review", "kestrel river meeting", "python sqlite vector", "coffee", "zzz")


def open_store(home: Path, **settings: object) -> Kredenc:
    return Kredenc.open(home, embedder=HashEmbedder(), durability="none", **settings)


def fill(kb: Kredenc, n: int = 80) -> None:
    rng = random.Random(7)
    kb.remember_many(
        [
            {"text": " ".join(rng.choices(VOCAB, k=rng.randint(2, 9))), "drawer": d}
            for d in ("memories", "work")
            for _ in range(n // 2)
        ]
    )


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[Kredenc]:
    store = open_store(tmp_path / "s")
    fill(store)
    yield store
    store.close()


def view(hits: list[Hit]) -> list[tuple[str, float, dict[str, tuple[int, float]]]]:
    return [(h.id, h.score, {n: (v.rank, v.score) for n, v in h.legs.items()}) for h in hits]


def test_lexical_and_dense_modes_use_one_leg(kb: Kredenc) -> None:
    lexical = kb.search("budget review", k=20, mode="lexical")
    dense = kb.search("budget review", k=20, mode="dense")
    assert lexical and len(dense) == 20
    for mode, hits in (("lexical", lexical), ("dense", dense)):
        for rank, hit in enumerate(hits, start=1):
            assert set(hit.legs) == {mode}
            assert hit.legs[mode].rank == rank
            assert hit.score == hit.legs[mode].score
            assert hit.fused == 0.0
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
    # Every lexical hit holds a query word; dense scores are cosines.
    assert all({"budget", "review"} & set(h.text.split()) for h in lexical)
    assert all(-1.0 <= h.score <= 1.0 + 1e-6 for h in dense)


def test_a_single_leg_is_asked_only_as_deep_as_is_kept(
    kb: Kredenc, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[str, int]] = []
    for leg in ("lexical", "dense"):
        real = getattr(kb.index, leg)

        def spy(*args: object, _leg: str = leg, _real: object = real, **kw: object) -> object:
            asked.append((_leg, int(args[2])))  # type: ignore[call-overload]
            return _real(*args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(kb.index, leg, spy)
    leg_k = kb.settings.leg_k
    kb.search("budget review", k=5, mode="lexical")
    kb.search("budget review", k=5, mode="dense")
    assert asked == [("lexical", 5), ("dense", 5)]
    asked.clear()
    kb.search("budget review", k=5, mode="hybrid")  # fused: the normalising window
    kb.search("budget review", k=5, mode="lexical", hops=1)  # expanded: own scores
    kb.search("budget review", k=5, mode="dense", per_document=True)  # deduplicated
    assert asked == [("lexical", leg_k), ("dense", leg_k), ("lexical", leg_k), ("dense", leg_k)]
    # The first k of a deeper single-leg search are the same hits.
    assert (
        view(kb.search("budget review", k=5, mode="lexical"))
        == view(kb.search("budget review", k=20, mode="lexical"))[:5]
    )


def test_hybrid_hits_report_each_legs_rank_and_score(tmp_path: Path) -> None:
    k = 60  # rrf_k, weights 0.6 dense / 0.4 lexical (already summing to 1)
    kb = open_store(tmp_path / "rrf", fusion="rrf", weight_dense=0.6, weight_lexical=0.4)
    fill(kb)
    hits = kb.search("kestrel river meeting", k=30, mode="hybrid")
    lexical = {
        h.id: (r, h.score)
        for r, h in enumerate(kb.search("kestrel river meeting", k=50, mode="lexical"), 1)
    }
    dense = {
        h.id: (r, h.score)
        for r, h in enumerate(kb.search("kestrel river meeting", k=50, mode="dense"), 1)
    }
    assert len(hits) == 30
    assert any(len(h.legs) == 2 for h in hits)
    for hit in hits:
        assert hit.legs, hit.id
        expected = 0.0
        for name, weight, alone in (("lexical", 0.4, lexical), ("dense", 0.6, dense)):
            if name in hit.legs:
                leg = hit.legs[name]
                # The leg's rank and score are what that leg alone reports.
                assert (leg.rank, leg.score) == pytest.approx(alone[hit.id])
                expected += weight / (k + leg.rank)
            else:
                assert hit.id not in alone  # absent from a leg only if that leg missed it
        assert hit.score == pytest.approx(expected, rel=1e-12)
        assert hit.fused == hit.score
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    kb.close()


def test_default_minmax_fusion_by_hand(kb: Kredenc) -> None:
    """Default fusion: 0.4 x min-max(dense) + 0.6 x min-max(lexical) over each leg's list."""
    query = "kestrel river meeting"
    hits = kb.search(query, k=30, mode="hybrid")
    legs = {m: kb.search(query, k=50, mode=m) for m in ("lexical", "dense")}
    bounds = {m: (min(h.score for h in hs), max(h.score for h in hs)) for m, hs in legs.items()}
    for hit in hits:
        expected = 0.0
        for name, weight in (("lexical", 0.6), ("dense", 0.4)):
            if name in hit.legs:
                lo, hi = bounds[name]
                expected += weight * ((hit.legs[name].score - lo) / (hi - lo) if hi > lo else 1.0)
        assert hit.fused == pytest.approx(expected, rel=1e-9)
        # The rank score adds the hit's novel query coverage (retrieve/coverage.py).
        assert hit.score >= hit.fused
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    # Below the coverage window the fused order and scores are untouched.
    below = [h.fused for h in hits[WINDOW:]]
    assert [h.score for h in hits[WINDOW:]] == below
    assert below == sorted(below, reverse=True)


def test_fusion_settings_are_used(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", weight_dense=3, weight_lexical=1, rrf_k=10, fusion="rrf") as kb:
        fill(kb, 40)
        hits = kb.search("python sqlite vector", k=10)
        for hit in hits:
            want = sum(
                w / (10 + hit.legs[name].rank)
                for name, w in (("lexical", 0.25), ("dense", 0.75))
                if name in hit.legs
            )
            assert hit.score == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("mode", ["lexical", "dense", "hybrid"])
def test_drawer_filter_applies_to_every_leg(kb: Kredenc, mode: str) -> None:
    everywhere = kb.search("budget review", k=50, mode=mode)
    assert {h.drawer for h in everywhere} == {"memories", "work"}
    work = kb.search("budget review", k=50, mode=mode, drawer="work")
    assert work and {h.drawer for h in work} == {"work"}
    for hit in work:  # ranks are within the drawer
        assert all(1 <= leg.rank <= len(work) + 50 for leg in hit.legs.values())
    assert kb.search("budget review", mode=mode, drawer="no-such-drawer") == []


def test_k_limits_and_orders(kb: Kredenc) -> None:
    for k in (1, 5, 37):
        hits = kb.search("budget", k=k, mode="dense")
        assert len(hits) == k
    assert len(kb.search("budget", k=1000, mode="dense")) == 80  # all of them, no more


def test_forget_hides_from_every_leg_at_once(kb: Kredenc) -> None:
    query = "kestrel river meeting"
    before = {m: kb.search(query, k=50, mode=m) for m in ("lexical", "dense", "hybrid")}
    target = before["hybrid"][0].id
    assert all(target in {h.id for h in hits} for hits in before.values())
    kb.forget(target)
    for mode, hits in before.items():
        after = kb.search(query, k=50, mode=mode)
        assert target not in {h.id for h in after}, mode
        # In a single leg the others keep their order, and ranks close up (1, 2, 3, …
        # again). Hybrid min-max fusion rescales each leg without the forgotten record,
        # so there only the target's absence is certain.
        if mode != "hybrid":
            assert [h.id for h in after][: len(hits) - 1] == [h.id for h in hits if h.id != target][
                : len(after)
            ]
        for name in ("lexical", "dense"):
            ranks = sorted(h.legs[name].rank for h in after if name in h.legs)
            if mode == name:
                assert ranks == list(range(1, len(ranks) + 1))
    assert kb.stats()["records"] == 79


def test_rebuild_gives_identical_results(kb: Kredenc) -> None:
    for hit in kb.search("coffee", k=3):
        kb.forget(hit.id)
    kb.remember("coffee with the kestrel team", drawer="work")
    modes = ("lexical", "dense", "hybrid")
    before = {(q, m): view(kb.search(q, k=25, mode=m)) for q in QUERIES for m in modes}
    kb.rebuild()
    after = {(q, m): view(kb.search(q, k=25, mode=m)) for q in QUERIES for m in modes}
    assert after == before


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "fuzzy"}, "unknown search mode 'fuzzy'"),
        ({"mode": "HYBRID"}, "unknown search mode"),
        ({"k": 0}, "k must be"),
        ({"k": -3}, "k must be"),
        ({"k": 1001}, "k must be"),
        ({"k": 2.5}, "k must be"),
        ({"k": True}, "k must be"),
    ],
)
def test_bad_search_arguments(kb: Kredenc, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as info:
        kb.search("budget", **kwargs)  # type: ignore[arg-type]
    assert info.value.hint or "between 1 and 1000" in info.value.message


def test_query_must_be_text(kb: Kredenc) -> None:
    with pytest.raises(InvalidInput, match="query must be text"):
        kb.search(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="not valid UTF-8"):
        kb.search("caf\udce9")


# -- the legs runner with a deadline (what the recall reflex runs) ------------------------


def _legs(
    kb: Kredenc,
    query: str,
    embed: Callable[[str], F32],
    *,
    mode: str = "hybrid",
    deadline: float | None = None,
    terms: list[Phrase] | None = None,
    **params: Any,
) -> Legs:
    return run_legs(
        kb.index,
        kb.namespace,
        query,
        SearchParams(mode=mode, leg_k=20, k=20, **params),
        Filters(),
        embed,
        terms=terms,
        deadline=deadline,
    )


class SlowEmbed:
    """A query embedder that waits for ``release`` (or ``delay`` seconds) first."""

    def __init__(self, kb: Kredenc, delay: float = 5.0) -> None:
        self.kb, self.delay = kb, delay
        self.release = threading.Event()
        self.done: list[str] = []

    def __call__(self, text: str) -> F32:
        self.release.wait(self.delay)
        vector = self.kb.embedder.embed_query(text)
        self.done.append(text)
        return vector


def test_without_a_deadline_the_runner_waits_for_both_legs_and_times_them(kb: Kredenc) -> None:
    legs = _legs(kb, "kestrel river meeting", kb.embed_query)
    assert list(legs) == ["lexical", "dense"] and all(legs.values())
    assert (legs.late, legs.skipped, legs.failed) == ([], {}, {})
    assert set(legs.timings_ms) == {"lexical", "dense", "embed", "spelling"}
    assert legs.timings_ms["dense"] >= legs.timings_ms["embed"] >= 0
    # A deadline that is not reached changes nothing.
    later = _legs(kb, "kestrel river meeting", kb.embed_query, deadline=time.perf_counter() + 60)
    assert dict(later) == dict(legs)


def test_terms_replace_the_querys_own_for_the_lexical_leg(kb: Kredenc) -> None:
    own = _legs(kb, "kestrel", kb.embed_query, mode="lexical")
    given = _legs(kb, "kestrel", kb.embed_query, mode="lexical", terms=[Phrase("budget")])
    assert dict(given) == dict(_legs(kb, "budget", kb.embed_query, mode="lexical"))
    assert dict(given) != dict(own)


def test_a_late_embedding_is_reported_not_waited_for(kb: Kredenc) -> None:
    slow = SlowEmbed(kb)
    started = time.perf_counter()
    legs = _legs(kb, "kestrel river meeting", slow, deadline=started + 0.05)
    assert time.perf_counter() - started < 1.0  # never the embedding's 5 s
    assert legs.late == ["dense"] and "dense" not in legs and "embed" not in legs.timings_ms
    assert legs["lexical"]  # what was ready
    slow.release.set()  # the embedding finishes on its worker, after the call
    deadline = time.monotonic() + 10
    while not slow.done and time.monotonic() < deadline:
        time.sleep(0.01)
    assert slow.done == ["kestrel river meeting"]


def test_a_deadline_run_does_not_queue_behind_busy_embedders(kb: Kredenc) -> None:
    slow = SlowEmbed(kb)
    try:
        for i in range(EMBED_WORKERS):
            # (time for a worker to start it: a queued one whose caller gave up is
            # cancelled, and only a running one overruns)
            soon = time.perf_counter() + 0.2
            late = _legs(kb, f"kestrel {i}", slow, mode="dense", deadline=soon)
            assert late.late == ["dense"]
        refused = _legs(kb, "kestrel", slow, mode="dense", deadline=time.perf_counter() + 1)
        assert "dense" in refused.skipped and not refused.late and "dense" not in refused
    finally:
        slow.release.set()
    # Without a deadline the same runner waits its turn and gets the leg.
    assert _legs(kb, "kestrel river", kb.embed_query)["dense"]


def test_simultaneous_runs_with_healthy_embeddings_all_get_their_dense_leg(kb: Kredenc) -> None:
    """Eight conversations recalling at once (the proxy under load) queue behind each
    other's embeddings for a few milliseconds; none is refused its dense leg: only
    embeddings that overran their caller's deadline count against the bound."""
    n = 2 * EMBED_WORKERS
    gate = threading.Barrier(n)

    def embed(text: str) -> F32:
        time.sleep(0.05)  # a healthy, slowish embedding
        return kb.embedder.embed_query(text)

    def one(i: int) -> Legs:
        gate.wait(10)
        return _legs(kb, f"kestrel river {i}", embed, deadline=time.perf_counter() + 10)

    with ThreadPoolExecutor(n) as pool:
        runs = list(pool.map(one, range(n)))
    assert [r.skipped for r in runs] == [{}] * n
    assert all(r["dense"] and not r.late for r in runs)


def test_a_queued_embedding_whose_run_gave_up_is_never_run(kb: Kredenc) -> None:
    slow = SlowEmbed(kb)
    try:
        # Every worker busy with an embedding whose caller is still waiting...
        with ThreadPoolExecutor(EMBED_WORKERS) as pool:
            waiting = [
                pool.submit(_legs, kb, f"kestrel {i}", slow, deadline=time.perf_counter() + 2)
                for i in range(EMBED_WORKERS)
            ]
            time.sleep(0.2)  # the four embeddings are running
            # ...so this one queues; its deadline passes before any worker is free.
            queued = _legs(kb, "budget queued", slow, deadline=time.perf_counter() + 0.05)
            assert queued.late == ["dense"] and not queued.skipped
            slow.release.set()
            assert all(w.result(10)["dense"] for w in waiting)
    finally:
        slow.release.set()
    time.sleep(0.2)
    assert "budget queued" not in slow.done  # cancelled, never embedded
    assert sorted(slow.done) == sorted(f"kestrel {i}" for i in range(EMBED_WORKERS))


def test_a_provider_error_is_reported_with_a_deadline_and_raised_without(kb: Kredenc) -> None:
    def broken(_text: str) -> F32:
        raise ProviderError("model not installed", "install it")

    legs = _legs(kb, "kestrel river", broken, deadline=time.perf_counter() + 60)
    assert isinstance(legs.failed["dense"], ProviderError)
    assert legs["lexical"] and "dense" not in legs
    with pytest.raises(ProviderError):
        _legs(kb, "kestrel river", broken)


def test_the_index_stops_a_lexical_leg_at_its_deadline(kb: Kredenc) -> None:
    kb.remember_many([{"text": f"kestrel river note {i}"} for i in range(3000)])
    terms = [Phrase("kestrel"), Phrase("river"), Phrase("note")]
    with pytest.raises(DeadlineExceeded):
        kb.index.lexical(kb.namespace, terms, 20, Filters(), deadline=time.perf_counter())
    legs = _legs(kb, "kestrel river note", kb.embed_query, mode="lexical", deadline=0.0)
    assert legs.late == ["lexical"] and "lexical" not in legs
    # The reader connection is left as it was: the next query is not interrupted.
    assert len(kb.index.lexical(kb.namespace, terms, 20, Filters())) == 20


# -- spelling ------------------------------------------------------------------------------


def test_spelling_searches_a_misspelt_word_as_the_word_the_store_holds(kb: Kredenc) -> None:
    # Spelling is on by default.
    meant = view(kb.search("kestrel meeting quarterly", k=10))
    assert meant
    # Each leg searches the held words: the same hits, ranks and scores.
    typed = "Kestrl meting quartrely"
    assert view(kb.search(typed, k=10)) == meant
    assert kb.search(typed, k=10).corrections == {  # type: ignore[attr-defined]
        "kestrl": "kestrel",
        "meting": "meeting",
        "quartrely": "quarterly",
    }
    legs = _legs(kb, typed, kb.embed_query, spelling=True)
    assert legs.corrections == {"kestrl": "kestrel", "meting": "meeting", "quartrely": "quarterly"}
    assert legs.text == "kestrel meeting quarterly"
    assert legs.timings_ms["spelling"] >= 0
    assert _legs(kb, typed, kb.embed_query, mode="lexical", spelling=True)["lexical"] != []
    # Off, the misspelt words find nothing on the lexical leg, and nothing is looked up.
    off = _legs(kb, typed, kb.embed_query, mode="lexical", spelling=False)
    assert off["lexical"] == [] and off.corrections == {} and off.text == typed
    assert "spelling" not in off.timings_ms


@pytest.mark.parametrize("deadline", [None, 10.0])
def test_a_corrected_query_is_embedded_once_as_corrected(
    kb: Kredenc, deadline: float | None
) -> None:
    kb.search("kestrel meeting quarterly", k=10)
    embedded: list[str] = []

    def embed(text: str) -> Any:
        embedded.append(text)
        return kb.embed_query(text)

    until = None if deadline is None else time.perf_counter() + deadline
    legs = _legs(kb, "Kestrl meeting", embed, spelling=True, deadline=until)
    assert embedded == ["kestrel meeting"] and legs["dense"]


def test_spelling_leaves_a_query_of_held_words_as_it_is(kb: Kredenc) -> None:
    calls: list[list[str]] = []
    real = kb.index.corrections

    def spy(ns: str, words: list[str], filters: Filters) -> dict[str, str]:
        calls.append(list(words))
        return real(ns, words, filters)

    kb.index.corrections = spy  # type: ignore[method-assign]
    legs = _legs(kb, "budget review", kb.embed_query, spelling=True)
    plain = _legs(kb, "budget review", kb.embed_query, spelling=False)
    assert calls == [["budget", "review"]]  # asked once, for the query's words only
    assert legs.corrections == {} and legs.text == "budget review"
    assert dict(legs) == dict(plain)


def test_pairs_add_the_neighbouring_words_as_phrases_to_the_lexical_leg(kb: Kredenc) -> None:
    seen: list[list[str]] = []
    real = kb.index.lexical

    def spy(ns: str, phrases: list[Phrase], *args: object, **kwargs: object) -> object:
        seen.append([p.text for p in phrases])
        return real(ns, phrases, *args, **kwargs)  # type: ignore[arg-type]

    kb.index.lexical = spy  # type: ignore[method-assign]
    _legs(kb, "kestrel river", kb.embed_query, mode="lexical")
    _legs(kb, "kestrel river", kb.embed_query, mode="lexical", pairs=True)
    assert seen == [["kestrel", "river"], ["kestrel", "river", "kestrel river"]]
