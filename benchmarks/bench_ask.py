"""The answer loop's speed: the operation cache's tiers, tracing's cost, and ``ask``.

Targets (issue 14; 2-core machine shared with others, so the load is printed beside
every figure):

* ``ask`` with the deterministic roles on a 100-document store: p95 <= 300 ms end to
  end (the reranker included when one is configured), and per step;
* ``ask`` with a scripted LLM for every role: per step (the LLM's own time is the
  script's, so this measures the loop's overhead around the calls);
* repeat-heavy: the same 50 questions asked 10 times: a repeated ask >= 200x faster
  than its cold first ask.

The store is built in a temporary directory from 100 synthetic documents generated
here (seeded; fictional projects, each a page of facts and filler: budgets, leads,
sites, dates), ingested as Markdown through the real pipeline with the bundled MiniLM;
the 50 questions ask for those facts. Nothing from ``../shared`` is used.

Parts (each runs when what it needs is in the tree):

1. ``cache``: the cost of a key, an in-memory hit, a cold hit from opcache.db (with
   backfill), a miss, a put, a generation read, and a cached search hit against the
   search it replaces; the cost of a span with tracing off and on.
2. ``ask``: needs ``Kredenc.ask`` (the loopcore and roles branches). With ``--rerank``
   the deterministic row alone, with a cross-encoder of MiniLM-L6's shape configured
   (:data:`RERANKERS`; ``--rerank-depth`` sets ``ask_rerank_depth``) and the cost of its
   rerank alone.
3. ``rerank-cost`` (only when asked): the reranker's forms interleaved, per pair.

    .venv/bin/python benchmarks/bench_ask.py            # everything that can run
    .venv/bin/python benchmarks/bench_ask.py --part cache --out /tmp/ask.json
    .venv/bin/python benchmarks/bench_ask.py --part ask --rerank minilm-shaped-onnx
    .venv/bin/python benchmarks/bench_ask.py --part rerank-cost

Prints tables and writes benchmarks/results/ask.json (or --out).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# onnxruntime must be in the process before usearch (see corpus.py).
import onnxruntime  # noqa: F401

from _common import machine, percentile, print_table, write_results

SEED = 0
NS = "bench"
N_DOCS = 100
N_QUESTIONS = 50
REPEATS = 10
PAUSE_S = 0.02  # between asks in the paced repeat run (a user's turn is seconds)
TARGETS = {"ask_p95_ms": 300.0, "repeat_speedup": 200.0}

Result = dict[str, Any]

# -- the synthetic corpus ------------------------------------------------------------
_SYLLABLES = [
    "ka",
    "lo",
    "ven",
    "tra",
    "mi",
    "sor",
    "bel",
    "quin",
    "dra",
    "pel",
    "zu",
    "ros",
    "tem",
    "hal",
    "nor",
    "vik",
    "sa",
    "ul",
    "ber",
    "gan",
]
_CITIES = [
    "Lisbon",
    "Tallinn",
    "Kraków",
    "Porto",
    "Ghent",
    "Bergen",
    "Turku",
    "Brno",
    "Aarhus",
    "Graz",
    "Ljubljana",
    "Split",
]
_PEOPLE = [
    "Ana Petrova",
    "Jonas Berg",
    "Mira Kovač",
    "Tomás Ruiz",
    "Lea Novak",
    "Ivo Horvat",
    "Sara Lind",
    "Olek Nowak",
    "Eva Dahl",
    "Piet Jansen",
    "Nina Holm",
    "Karel Dvořák",
]
_FILLER = [
    "The team met weekly to review progress against the plan and to agree on next steps.",
    "Most of the early work went into interviews with the people who would use the system.",
    "A steering group reviewed the risks each quarter and adjusted the scope when needed.",
    "Documentation was kept in the shared wiki, with a changelog for every release.",
    "Several pilots ran in parallel so that the approach could be compared across sites.",
    "The retrospective noted that smaller, more frequent releases reduced the rework.",
    "Suppliers were chosen by open tender, with criteria published before the call.",
    "Training sessions were recorded so that new staff could catch up on their own.",
]


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(3)).capitalize()


def documents(n: int = N_DOCS, seed: int = SEED) -> list[dict[str, Any]]:
    """``n`` fictional project reports, each with its facts (for the questions)."""
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = []
    used: set[str] = set()
    while len(docs) < n:
        name = _name(rng)
        if name in used:
            continue
        used.add(name)
        facts = {
            "budget": f"{rng.randint(2, 90) * 50_000:,} euros",
            "lead": rng.choice(_PEOPLE),
            "city": rng.choice(_CITIES),
            "year": str(rng.randint(2009, 2025)),
            "servers": str(rng.randint(3, 400)),
            "users": f"{rng.randint(1, 300) * 100:,}",
        }
        paras = [
            f"# Project {name}\n",
            f"Project {name} was started in {facts['year']} in {facts['city']}. "
            f"It is led by {facts['lead']}.",
            rng.choice(_FILLER),
            f"The approved budget of Project {name} is {facts['budget']}, spread over "
            f"three phases.",
            rng.choice(_FILLER) + " " + rng.choice(_FILLER),
            f"At its peak, Project {name} ran on {facts['servers']} servers and served "
            f"{facts['users']} users every month.",
            *rng.sample(_FILLER, 3),
        ]
        docs.append({"name": name, "text": "\n\n".join(paras) + "\n", "facts": facts})
    return docs


_ASKS = {
    "budget": "What is the budget of Project {name}?",
    "lead": "Who leads Project {name}?",
    "city": "In which city was Project {name} started?",
    "year": "When did Project {name} start?",
    "servers": "How many servers did Project {name} run on?",
}


def questions(docs: list[dict[str, Any]], m: int = N_QUESTIONS, seed: int = SEED) -> list[Result]:
    rng = random.Random(seed + 1)
    out = []
    for doc in rng.sample(docs, m):
        fact = rng.choice(sorted(_ASKS))
        out.append(
            {"q": _ASKS[fact].format(name=doc["name"]), "expect": doc["facts"][fact], "doc": doc}
        )
    return out


@contextmanager
def bench_store(**overrides: Any) -> Iterator[tuple[Any, list[Result]]]:
    """An open store with the 100 documents ingested, and the 50 questions."""
    from kredenc import Kredenc

    tmp = Path(tempfile.mkdtemp(prefix="kredenc-bench-ask-"))
    try:
        docs = documents()
        src = tmp / "docs"
        src.mkdir()
        for d in docs:
            (src / f"{d['name'].lower()}.md").write_text(d["text"], encoding="utf-8")
        kb = Kredenc.open(tmp / "store", NS, **overrides)
        try:
            kb.ingest(src)
            yield kb, questions(docs)
        finally:
            kb.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- timing helpers ---------------------------------------------------------------------
def per_call_us(fn: Callable[[], Any], n: int, *, rounds: int = 5) -> float:
    """The best of ``rounds`` medians-of-batches: microseconds per call of ``fn``."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def stats_ms(samples_s: list[float]) -> Result:
    ms = [s * 1000 for s in samples_s]
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 50),
        "p95_ms": percentile(ms, 95),
        "mean_ms": statistics.fmean(ms),
        "max_ms": max(ms),
    }


# -- part 1: the cache layer -------------------------------------------------------------
def part_cache() -> Result:
    from kredenc.loop.cache import OpCache, cache_for, cached_search, make_key
    from kredenc.loop.cache_json import hit_to_json
    from kredenc.loop.tool import Services
    from kredenc.loop.tracing import OFF, Tracer, span
    from kredenc.retrieve import query as queries

    out: Result = {}
    with bench_store() as (kb, qs):
        store, ns = kb.store, kb.namespace
        cache = cache_for(store)
        assert cache is not None
        services = Services(store=store, ns=ns, settings=kb.settings, cache=cache)
        texts = [q["q"] for q in qs]
        # Uncached search (query vectors warm: what a repeat would cost without the cache).
        for t in texts:
            queries.search(store, ns, t, k=12)
        uncached = []
        for t in texts:
            t0 = time.perf_counter()
            queries.search(store, ns, t, k=12)
            uncached.append(time.perf_counter() - t0)
        for t in texts:  # fill the cache
            cached_search(services, t, k=12)
        hits = []
        for t in texts:
            t0 = time.perf_counter()
            cached_search(services, t, k=12)
            hits.append(time.perf_counter() - t0)
        sample = [hit_to_json(h) for h in queries.search(store, ns, texts[0], k=12)]
        value_chars = len(json.dumps(sample))
        opts = {"k": 12, "mode": "hybrid"}
        fp = {"params": {"leg_k": 50}, "model": store.meta.model_id, "rerank": "none"}
        key = make_key("search", ns, 7, texts[0], opts, fp)
        cache.put("search", key, sample)
        tier = store.opcache_tier()
        assert tier is not None
        cold = OpCache(tier)

        def cold_hit() -> None:
            cold.lru.clear()
            cold.get("search", key)

        rows = [
            (
                "key (SHA-256 of canonical JSON)",
                per_call_us(lambda: make_key("search", ns, 7, texts[0], opts, fp), 2000),
            ),
            ("generation(ns) read", per_call_us(lambda: store.generation(ns), 2000)),
            (
                "in-memory hit (12 hits, decode)",
                per_call_us(lambda: cache.get("search", key), 2000),
            ),
            ("opcache.db hit + backfill", per_call_us(cold_hit, 500)),
            ("opcache.db get alone", per_call_us(lambda: tier.get("search", key), 2000)),
            ("miss (both tiers)", per_call_us(lambda: cache.get("search", "0" * 64), 2000)),
            ("put (both tiers)", per_call_us(lambda: cache.put("search", key, sample), 500)),
            ("cached_search hit (end to end)", statistics.median(hits) * 1e6),
            ("search, uncached (warm query vector)", statistics.median(uncached) * 1e6),
        ]
        out["cache_us"] = {name: round(us, 2) for name, us in rows}
        out["search_value_chars"] = value_chars
        out["cached_search_speedup"] = round(
            statistics.median(uncached) / statistics.median(hits), 1
        )
        print_table(
            f"operation cache, per call ({value_chars:,}-character search value, 12 hits)",
            [{"operation": n, "us": round(us, 2)} for n, us in rows],
        )
        print(f"  cached search hit is {out['cached_search_speedup']}x faster than the search")

    spans: list[tuple[str, float]] = [
        ("span(None, ...)", per_call_us(lambda: span(None, "tool.x", k=1).__enter__(), 20000)),
    ]

    def off_span() -> None:
        with OFF.span("tool.grade", iteration=1):
            pass

    spans.append(("Tracer off: with span(...)", per_call_us(off_span, 20000)))
    try:
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        out["span_on_us"] = None
    else:
        exporter = InMemorySpanExporter()
        on = Tracer(exporter=exporter)

        def on_span() -> None:
            with on.span("tool.grade", iteration=1):
                pass

        spans.append(("Tracer on (in-memory exporter)", per_call_us(on_span, 2000)))
        exporter.clear()
    out["span_us"] = {name: round(us, 3) for name, us in spans}
    print_table("tracing, per span", [{"span": n, "us": round(us, 3)} for n, us in spans])
    return out


# -- part 2: ask -------------------------------------------------------------------------
ROLES = ("decide", "rewrite", "retrieve", "grade", "verify", "generate", "judge", "reflect")


def _has_ask() -> bool:
    return importlib.util.find_spec("kredenc.loop.ask") is not None


class SchemaLLM:
    """A scripted LLM for every role: a reply that fits whatever schema a role asks
    for (the first enum value, true, 0.5, "", [] ...), an answer citing [1] when none
    is asked for. Instant, so what is timed is the loop around the calls."""

    name = "scripted"
    model = "schema-v1"

    def __init__(self) -> None:
        self.calls = 0

    @staticmethod
    def _value(schema: dict[str, Any]) -> Any:
        if "enum" in schema:
            return schema["enum"][0]
        kind = schema.get("type")
        kind = kind[0] if isinstance(kind, list) else kind
        if kind == "object":
            props = schema.get("properties") or {}
            return {k: SchemaLLM._value(v) for k, v in props.items()}
        return {"boolean": True, "integer": 1, "number": 0.5, "array": [], "string": ""}.get(
            str(kind)
        )

    def complete(self, messages: Any, *, schema: Any = None, **_kw: Any) -> Any:
        from kredenc.providers.llm.base import Completion, Usage

        self.calls += 1
        if schema is None:
            return Completion("The answer is in the first source [1].", self.model, Usage(200, 12))
        data = self._value(dict(schema))
        return Completion(json.dumps(data), self.model, Usage(150, 20), "stop", data)

    def stream(self, messages: Any, **kw: Any) -> Any:
        from kredenc.providers.llm.base import Stream

        done = self.complete(messages)
        return Stream(iter([done.text]), lambda _t: done)

    def fingerprint(self) -> str:
        return f"{self.name}:{self.model}"

    def describe(self) -> str:
        return self.model

    def close(self) -> None:
        pass


def _asker(kb: Any, *, cache: bool, llm: Any = None, file: bool = True) -> Callable[[str], Any]:
    """The loop's ask with the given cache and LLM; filing each turn, ``Kredenc.ask``
    itself (the facade's cache, turns filed on its background thread as users get it)."""
    from kredenc.loop.ask import ask

    if cache and file and llm is None:
        return kb.ask  # type: ignore[no-any-return]
    from kredenc.loop.cache import cache_for

    opcache = cache_for(kb.store) if cache else None
    return lambda q: ask(kb.store, kb.namespace, q, llm=llm, cache=opcache, file=file)


def _timed_asks(
    asker: Callable[[str], Any], qs: list[Result], pause_s: float = 0.0
) -> tuple[list[float], Result]:
    """Each question asked once, timed; ``pause_s`` untimed between asks (a user's turn:
    what the facade files in the background is filed in it, as bench_recall's proxy part
    pauses for the proxy's filing)."""
    times: list[float] = []
    per_step: dict[str, list[float]] = {}
    hits: dict[str, int] = {}
    found = 0
    for q in qs:
        t0 = time.perf_counter()
        answer = asker(q["q"])
        elapsed = time.perf_counter() - t0
        times.append(elapsed)
        if pause_s:
            time.sleep(pause_s)
        found += q["expect"] in answer.text
        in_tools = 0.0
        for step in answer.trace:
            per_step.setdefault(step.tool, []).append(step.ms / 1000)
            hits[step.tool] = hits.get(step.tool, 0) + step.cache_hits
            in_tools += step.ms / 1000
        per_step.setdefault("(outside the tools: filing, setup)", []).append(elapsed - in_tools)
    steps = {t: {**stats_ms(v), "cache_hits": hits.get(t, 0)} for t, v in per_step.items()}
    return times, {"steps": steps, "answers_with_the_fact": f"{found}/{len(qs)}"}


def _latency(kb: Any, qs: list[Result], label: str, **how: Any) -> Result:
    asker = _asker(kb, cache=False, **how)
    asker("warm up: what is this store about?")
    times, res = _timed_asks(asker, qs)
    res["total"] = stats_ms(times)
    rows = [{"step": "ask (end to end)", **_round(res["total"])}]
    rows += [{"step": t, **_round(s)} for t, s in res["steps"].items()]
    print_table(f"ask latency, {label} ({len(qs)} distinct questions, cache off)", rows)
    print(f"  answers containing the expected fact: {res['answers_with_the_fact']}")
    return res


def _round(s: Result) -> Result:
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in s.items()}


def _repeat(
    kb: Any, qs: list[Result], *, file: bool, llm: SchemaLLM | None = None, pause_s: float = 0.0
) -> Result:
    asker = _asker(kb, cache=True, file=file, llm=llm)
    cold, _ = _timed_asks(asker, qs, pause_s)  # a fresh store: nothing cached, no query vector yet
    cold_calls = llm.calls if llm is not None else 0
    warm: list[float] = []
    res: Result = {}
    for _ in range(REPEATS - 1):
        times, res = _timed_asks(asker, qs, pause_s)
        warm += times
    speedup = statistics.median(cold) / statistics.median(warm)
    out = {
        "files_turns": file,
        "pause_between_asks_ms": pause_s * 1000,
        "cold": stats_ms(cold),
        "repeated": stats_ms(warm),
        "speedup_median": round(speedup, 1),
        "target_speedup": TARGETS["repeat_speedup"],
        "repeated_steps_last_round": res["steps"],
        "answers_with_the_fact_last_round": res["answers_with_the_fact"],
    }
    if llm is not None:
        out["llm_calls_cold"] = cold_calls
        out["llm_calls_repeated"] = llm.calls - cold_calls
    rows = [{"what": "cold (first ask)", **_round(out["cold"])}]
    rows += [{"what": "repeated ask", **_round(out["repeated"])}]
    rows += [{"what": f"  {t}", **_round(s)} for t, s in res["steps"].items()]
    label = "filing each turn (Kredenc.ask)" if file else "file=False"
    if pause_s:
        label += f", {pause_s * 1000:.0f} ms between asks"
    if llm is not None:
        label += f", scripted LLM for every role ({out['llm_calls_cold']} LLM calls cold, "
        label += f"{out['llm_calls_repeated']} repeated)"
    print_table(f"repeat-heavy, {label}: {len(qs)} questions x {REPEATS}", rows)
    print(f"  repeated ask: {speedup:.1f}x faster than cold (target {TARGETS['repeat_speedup']}x)")
    return out


def part_repeat(only_filed: bool = False) -> Result:
    out: Result = {}
    for file in (True, False):
        with bench_store() as (kb, qs):
            out["repeat_filed" if file else "repeat_unfiled"] = _repeat(kb, qs, file=file)
        if only_filed:
            return out
    # Between real turns there is a user: the background filing runs in that gap
    # instead of sharing the interpreter with the next ask.
    with bench_store() as (kb, qs):
        out["repeat_filed_paced"] = _repeat(kb, qs, file=True, pause_s=PAUSE_S)
    with bench_store(**{f"role_{r}": "llm" for r in ROLES}) as (kb, qs):
        out["repeat_llm_unfiled"] = _repeat(kb, qs, file=False, llm=SchemaLLM())
    return out


#: ``--rerank`` choices: the reranker of MiniLM-L6's shape and how it runs.
RERANKERS = {
    "minilm-shaped": "sentence-transformers on torch (the rerank extra)",
    "minilm-shaped-onnx": "ONNX export, its int8 copy (rerank_quantized, the default)",
    "minilm-shaped-onnx-fp32": "ONNX export, float32 (rerank_quantized = false)",
}
PAIRS = 12  # the pairs of one rerank in the answer loop (ask_rerank_depth)


def minilm_shaped_cross_encoder(folder: Path) -> Path:
    """A cross-encoder of ms-marco-MiniLM-L-6-v2's shape (6 layers, 384 wide), random
    weights: no cross-encoder weights ship in any package reachable here, and the cost
    of a rerank depends on the shape, not on the weights (``--rerank minilm-shaped``)."""
    from kredenc.testing.tiny_models import save_tiny_bert

    return save_tiny_bert(folder, hidden=384, intermediate=1536, num_labels=1, layers=6, heads=12)


def reranker_setting(choice: str, folder: Path) -> tuple[str, dict[str, Any]]:
    """The ``rerank`` setting (and others) for a ``--rerank`` choice, its model made in
    ``folder``: the torch folder, or its ONNX export with the int8 copy beside it."""
    if choice == "none":
        return "none", {}
    bert = minilm_shaped_cross_encoder(folder / "bert")
    if choice == "minilm-shaped":
        return str(bert), {}
    from kredenc.testing.tiny_models import export_cross_encoder_onnx

    onnx = export_cross_encoder_onnx(bert, folder / "onnx")
    return f"onnx:{onnx}", {"rerank_quantized": choice != "minilm-shaped-onnx-fp32"}


def rerank_cost(kb: Any, qs: list[Result], rounds: int = 10) -> Result:
    """The configured reranker alone: ``rounds`` reranks of :data:`PAIRS` pairs (a
    question and the chunks its search finds), the median per rerank and per pair."""
    from kredenc.retrieve.query import reranker_for
    from kredenc.retrieve.rerank import pair_texts

    reranker = reranker_for(kb.store, None)
    assert reranker is not None
    times = []
    tokens: list[int] = []
    for q in qs[:rounds]:
        hits = kb.search(q["q"], k=PAIRS, rerank="none")
        texts = pair_texts(hits)
        model = getattr(reranker, "model", None)
        if model is not None:  # the ONNX reader: the pairs' lengths in word pieces
            tokens += [int(b.mask.sum()) for _, b in model.batches([(q["q"], t) for t in texts], 1)]
        t0 = time.perf_counter()
        reranker.score(q["q"], texts)
        times.append(time.perf_counter() - t0)
    per = statistics.median(times) * 1000
    out = {"pairs": PAIRS, "rerank_p50_ms": per, "per_pair_ms": per / PAIRS}
    if tokens:
        out["pair_tokens_mean"] = statistics.fmean(tokens)
    print(f"  rerank alone: {per:.1f} ms per {PAIRS} pairs, {per / PAIRS:.2f} ms a pair")
    return out


def part_rerank_cost(rounds: int = 8) -> Result:
    """The reranker alone, its three forms interleaved (the same pairs, the same minutes,
    so the machine's load falls on all alike): torch, the ONNX export in float32, its
    int8 copy, and the int8 copy with pairs cut to 256 and 128 word pieces. Each round
    reranks one question's :data:`PAIRS` chunks (its search's best, as the loop's
    retrieve finds them) with each form, in a rotating order."""
    from kredenc.providers.rerank import CrossEncoderReranker
    from kredenc.providers.rerank.onnx import OnnxCrossEncoder
    from kredenc.retrieve.rerank import pair_texts
    from kredenc.testing.tiny_models import export_cross_encoder_onnx

    with tempfile.TemporaryDirectory(prefix="kredenc-bench-rerank-") as model_dir:
        bert = minilm_shaped_cross_encoder(Path(model_dir) / "bert")
        onnx = export_cross_encoder_onnx(bert, Path(model_dir) / "onnx")
        forms: dict[str, Any] = {
            "torch (sentence-transformers)": CrossEncoderReranker(str(bert)),
            "onnx float32": OnnxCrossEncoder(onnx),
            "onnx int8": OnnxCrossEncoder(onnx, quantized=True),
            "onnx int8, pairs cut to 256": OnnxCrossEncoder(onnx, quantized=True, max_tokens=256),
            "onnx int8, pairs cut to 128": OnnxCrossEncoder(onnx, quantized=True, max_tokens=128),
        }
        with bench_store() as (kb, qs):
            pairs = [(q["q"], pair_texts(kb.search(q["q"], k=PAIRS))) for q in qs[: rounds + 1]]
        tokens = [
            int(b.mask.sum())
            for q, texts in pairs
            for _, b in forms["onnx float32"].model.batches([(q, t) for t in texts], 1)
        ]
        for form in forms.values():  # load the graph or model, warm up
            form.score(*pairs[0])
        times: dict[str, list[float]] = {name: [] for name in forms}
        names = list(forms)
        for r, (q, texts) in enumerate(pairs[1:]):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                t0 = time.perf_counter()
                forms[name].score(q, texts)
                times[name].append(time.perf_counter() - t0)
    out: Result = {"pairs": PAIRS, "rounds": rounds, "pair_tokens_mean": statistics.fmean(tokens)}
    rows = []
    for name, samples in times.items():
        ms = statistics.median(samples) * 1000
        out[name] = {"rerank_p50_ms": ms, "per_pair_ms": ms / PAIRS}
        rows.append(
            {"form": name, "rerank p50 ms": round(ms, 1), "ms a pair": round(ms / PAIRS, 2)}
        )
    print_table(
        f"rerank cost, {PAIRS} pairs of ~{out['pair_tokens_mean']:.0f} word pieces, interleaved",
        rows,
    )
    return out


def part_ask(rerank: str = "none", rerank_depth: int | None = None) -> Result:
    out: Result = {}
    with tempfile.TemporaryDirectory(prefix="kredenc-bench-rerank-") as model_dir:
        setting, extra = reranker_setting(rerank, Path(model_dir))
        if rerank_depth is not None:
            extra["ask_rerank_depth"] = rerank_depth
        with bench_store(rerank=setting, **extra) as (kb, qs):
            label = "deterministic roles" + (f", reranker {rerank}" if rerank != "none" else "")
            out["rules"] = _latency(kb, qs, label)
            out["rules"]["target_p95_ms"] = TARGETS["ask_p95_ms"]
            out["rules"]["rerank"] = rerank
            out["rules"]["ask_rerank_depth"] = kb.settings.ask_rerank_depth
            if rerank != "none":
                out["rules"]["rerank_how"] = RERANKERS[rerank]
                out["rules"]["rerank_alone"] = rerank_cost(kb, qs)
        if rerank != "none":
            return out
    llm_roles = {f"role_{r}": "llm" for r in ROLES}
    with bench_store(**llm_roles) as (kb, qs):
        llm = SchemaLLM()
        out["scripted_llm"] = _latency(kb, qs, "a scripted LLM for every role", llm=llm)
        out["scripted_llm"]["llm_calls"] = llm.calls
    out.update(part_repeat())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--part", choices=["cache", "ask", "repeat", "rerank-cost", "all"], default="all"
    )
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here")
    parser.add_argument(
        "--only-filed",
        action="store_true",
        help="--part repeat: the filed Kredenc.ask row alone (issue 14's number)",
    )
    parser.add_argument(
        "--rerank",
        choices=["none", *RERANKERS],
        default="none",
        help="--part ask: the deterministic row with a reranker of MiniLM-L6's shape: "
        + "; ".join(f"{k}: {v}" for k, v in RERANKERS.items()),
    )
    parser.add_argument(
        "--rerank-depth",
        type=int,
        default=None,
        help="--part ask with --rerank: the ask_rerank_depth setting (default 12)",
    )
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    results: Result = {"targets": TARGETS, "corpus": f"{N_DOCS} synthetic documents (seed {SEED})"}
    if args.part in ("cache", "all"):
        results["cache"] = part_cache()
    if args.part == "rerank-cost":
        results["rerank_cost"] = part_rerank_cost()
    if args.part in ("ask", "repeat", "all"):
        if _has_ask():
            results["ask"] = (
                part_ask(args.rerank, args.rerank_depth)
                if args.part != "repeat"
                else part_repeat(only_filed=args.only_filed)
            )
        else:
            results["ask"] = "not run: kredenc.loop.ask is not in this tree (loopcore branch)"
            print(f"\n{results['ask']}")
    if args.out is not None:
        payload = {"benchmark": "ask", "machine": machine(), **results}
        args.out.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
        print(f"\nwrote {args.out}")
    else:
        write_results("ask", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
