"""The recall reflex: latency per turn, quality at budget, proxy overhead.

Targets (2-core machine, the default budget: 8 items, 600 characters each, 1,800 in all):

* latency per turn, end to end through ``recall()`` including the query embedding
  (real MiniLM, distinct queries so the query cache never answers): p50 <= 10 ms and
  p99 <= 25 ms with 2,000 and with 100,000 filed memories; words only (``mode="lexical"``)
  p99 <= 3 ms at 2,000. Timed at the default 50 ms time budget; a dense leg that was not
  ready in time is counted (``timeouts``), never hidden.
* quality at budget on LoCoMo and LongMemEval (``../shared/data``): the share of
  questions whose evidence is inside the injected block, and the characters injected
  per turn. Each conversation (LoCoMo) or question's haystack (LongMemEval, user turns,
  as the official turn-level protocol) is filed as ``turn`` records in its own
  namespace; the question is the newest user message of a new session. The time budget
  is raised to 10 s here so that the machine's load cannot change what is measured.
* proxy overhead over a direct call to the same scripted loopback upstream: <= 15 ms p95
  (the proxy recalls from the 2,000-memory store, with real MiniLM, and files each turn
  off the response path). Each query is sent direct and through the proxy back to back
  on one keep-alive client, so the two see the same load; the overhead is the paired
  difference. The proxy's ``Server-Timing: recall;dur=`` header splits it into the
  recall and the rest (HTTP in and out, the thread hop, JSON).

The 2,000-memory store is built in a temporary directory from ``benchmarks/corpus.py``
(its cached MiniLM vectors seed the embedding cache, so building embeds nothing). With
``--n 100000`` the store built by ``bench_store.py`` under
``~/.cache/kredenc/bench/store-100k`` is opened read-only; without it that size is
reported as not run.

    .venv/bin/python benchmarks/bench_recall.py                   # n=2,000, everything
    .venv/bin/python benchmarks/bench_recall.py --n 100000 --no-quality --no-proxy
    .venv/bin/python benchmarks/bench_recall.py --words-only      # lexical latency only
    .venv/bin/python benchmarks/bench_recall.py --proxy-only      # proxy overhead only

Prints tables and writes benchmarks/results/recall.json (or recall-<n>.json for other n).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# onnxruntime must be in the process before usearch (see corpus.py).
import numpy as np
import onnxruntime  # noqa: F401

from _common import percentile, print_table, write_results

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data"
CACHE_DIR = Path(os.environ.get("KREDENC_BENCH_CACHE", "~/.cache/kredenc/bench")).expanduser()
EVAL_CACHE = Path("~/.cache/kredenc/eval-embeddings.db").expanduser()
SEED = 0
NS = "bench"
TARGETS = {"p50_ms": 10.0, "p99_ms": 25.0, "words_p99_ms_at_2000": 3.0, "proxy_p95_ms": 15.0}

Result = dict[str, Any]


def stats_ms(samples_s: Sequence[float]) -> Result:
    ms = [s * 1000 for s in samples_s]
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 50),
        "p95_ms": percentile(ms, 95),
        "p99_ms": percentile(ms, 99),
        "mean_ms": statistics.fmean(ms),
        "max_ms": max(ms),
    }


# --------------------------------------------------------------------------------------
# Stores
# --------------------------------------------------------------------------------------


@contextmanager
def bench_home(n: int, *, fresh: bool = False) -> Iterator[Path]:
    """A store directory with ``n`` corpus memories: bench_store.py's 100k, or built here
    (``fresh``: always built here, in a temporary directory, for a benchmark that writes;
    the corpus's cached vectors seed the embedding cache, so 100k take seconds)."""
    import corpus
    from kredenc import Kredenc
    from kredenc.storage.index.sqlite import embed_text_of, text_hash

    if n >= 100_000 and not fresh:
        cached = CACHE_DIR / f"store-{n // 1000}k"
        if not (cached / "store.json").exists():
            raise SystemExit(f"no {n:,}-memory store at {cached}: run bench_store.py first")
        yield cached
        return
    tmp = Path(tempfile.mkdtemp(prefix="kredenc-bench-recall-"))
    try:
        specs = corpus.specs(n, SEED)
        vectors = corpus.vectors(n, SEED)
        with Kredenc.open(tmp / "store", NS, durability="none") as kb:
            kb.index.cache_vectors(
                {
                    text_hash(embed_text_of({"text": s.text})): np.asarray(vectors[i])
                    for i, s in enumerate(specs)
                }
            )
            for b in range(0, n, 1000):
                kb.remember_many(
                    [
                        {"text": s.text, "kind": corpus.TEMPLATES[s.template][0]}
                        for s in specs[b : b + 1000]
                    ]
                )
        yield tmp / "store"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def open_store(home: Path, threads: int | None, spelling: bool = True) -> Any:
    """The bench store, read-only when it is bench_store.py's (it is not ours to change);
    ``spelling``: the ``recall_spelling`` setting."""
    from kredenc import Kredenc

    opts: dict[str, Any] = {"embed_threads": threads} if threads else {}
    opts["recall_spelling"] = spelling
    if home.parent == CACHE_DIR:
        return Kredenc.open(home, NS, read_only=True, **opts)
    return Kredenc.open(home, NS, durability="none", **opts)


def distinct_queries(n: int, m: int) -> list[str]:
    import corpus

    return list(dict.fromkeys(q for q, _ in corpus.queries(2 * m + 100, SEED, n)))


# --------------------------------------------------------------------------------------
# Latency
# --------------------------------------------------------------------------------------


def run_latency(kb: Any, queries: Sequence[str], mode: str, warm: int = 20) -> Result:
    from kredenc.recall import warm_up

    warm_up(kb.store)
    for i, q in enumerate(queries[:warm]):
        kb.recall([{"role": "user", "content": q}], session_id=f"warm-{mode}-{i}", mode=mode)
    samples: list[float] = []
    items: list[int] = []
    chars: list[int] = []
    legs: dict[str, list[float]] = {}
    timeouts = errors = 0
    for i, q in enumerate(queries[warm:]):
        messages = [{"role": "user", "content": q}]
        start = time.perf_counter()
        result = kb.recall(messages, session_id=f"lat-{mode}-{i}", mode=mode)
        samples.append(time.perf_counter() - start)
        items.append(len(result.items))
        chars.append(len(result.block))
        timeouts += result.timed_out
        errors += result.error is not None
        for leg, ms in result.timings_ms.items():
            legs.setdefault(leg, []).append(ms)
    out = stats_ms(samples)
    out.update(
        {
            "mode": mode,
            "timeouts": timeouts,
            "errors": errors,
            "items_mean": statistics.fmean(items),
            "chars_mean": statistics.fmean(chars),
            "legs_p50_ms": {k: statistics.median(v) for k, v in legs.items()},
        }
    )
    return out


# --------------------------------------------------------------------------------------
# Quality at budget
# --------------------------------------------------------------------------------------


def _ask(
    kb: Any, question: str, mode: str, asked_at: float | None = None
) -> tuple[set[str], int, int]:
    """Recall for ``question`` in a new session begun ``asked_at`` (default now):
    (eval ids injected, chars, items)."""
    result = kb.recall(
        [{"role": "user", "content": question}],
        session_id=f"q-{time.monotonic_ns()}",
        session_start=asked_at if asked_at is not None else time.time(),
        time_budget_ms=10_000,
        mode=mode,
        dry_run=True,  # what would be injected; nothing is counted
    )
    assert result.error is None, result.error
    ids = {str(i.meta.get("eval_id")) for i in result.items}
    return ids, len(result.block), len(result.items)


def _file(
    kb: Any,
    docs: Sequence[Any],
    session_of: Callable[[Any], str],
    said_at: Callable[[Any], float | None] = lambda d: None,
) -> None:
    """File ``docs`` as user turns of their sessions; ``said_at``: a turn's time (its
    ``at``), where the data has one."""
    by_session: dict[str, list[dict[str, Any]]] = {}
    for d in docs:
        if d.text.strip():
            turn = {"role": "user", "content": d.text, "meta": {"eval_id": d.id}}
            if (at := said_at(d)) is not None:
                turn["at"] = at
            by_session.setdefault(session_of(d), []).append(turn)
    for session, turns in by_session.items():
        for b in range(0, len(turns), 256):
            kb.file_turns(session, turns[b : b + 256])


def _round(interval: tuple[float, float]) -> list[float]:
    return [round(interval[0], 3), round(interval[1], 3)]


def _summary(name: str, mode: str, rows: list[tuple[bool, bool, int, int]]) -> Result:
    from kredenc.eval.metrics import bootstrap_ci

    chars = [c for _, _, c, _ in rows]
    anys = [float(a) for a, _, _, _ in rows]
    alls = [float(b) for _, b, _, _ in rows]
    return {
        "dataset": name,
        "mode": mode,
        "questions": len(rows),
        "evidence_any_in_block": statistics.fmean(anys),
        "evidence_any_ci95": _round(
            bootstrap_ci(lambda ix: statistics.fmean(anys[i] for i in ix), len(rows))
        ),
        "evidence_all_in_block": statistics.fmean(alls),
        "evidence_all_ci95": _round(
            bootstrap_ci(lambda ix: statistics.fmean(alls[i] for i in ix), len(rows))
        ),
        "evidence_any_per_question": [int(a) for a in anys],
        "chars_per_turn_mean": statistics.fmean(chars),
        "chars_per_turn_p95": percentile(chars, 95),
        "items_per_turn_mean": statistics.fmean(i for _, _, _, i in rows),
    }


def _asked(question: str, qid: str, typo: str | None) -> str:
    """The question as asked: as written, or with ``probe_typos.py``'s seeded typo
    (``swap`` or ``drop``, ``--typos``) in one of its content words."""
    if typo is None:
        return question
    from probe_typos import typo as with_typo

    return with_typo(question, qid, typo)


def quality_locomo(
    kb: Any,
    path: Path,
    modes: Sequence[str],
    *,
    dated: bool = False,
    typo: str | None = None,
) -> list[Result]:
    """Evidence in the block per LoCoMo question. Its questions have no date, so by
    default the turns are filed now. ``dated`` (``--locomo-dated``, a stress case):
    each turn at its session's date, the questions asked a day after the last session;
    their time phrases ("last weekend") are relative to the conversation, not to that
    day, so reading them against it can only mislead."""
    from kredenc.eval.locomo import ADVERSARIAL, date_seconds, load_locomo

    data = load_locomo(path)
    rows: dict[str, list[tuple[bool, bool, int, int]]] = {m: [] for m in modes}
    for g, group in enumerate(data.groups()):
        kb.use_namespace(f"recall-locomo-{os.getpid()}-{g}")
        prefix = f"locomo-{g}-s"
        said = (lambda d: date_seconds(d.meta["date"])) if dated else (lambda d: None)
        _file(kb, group.docs, lambda d, p=prefix: p + str(d.meta["session"]), said)
        latest = max((t for d in group.docs if (t := said(d)) is not None), default=None)
        asked = latest + 86_400 if latest is not None else None
        for q in group.queries:
            if data.category[q.qid] == ADVERSARIAL:
                continue
            evidence = set(data.evidence[q.qid])
            for mode in modes:
                ids, chars, items = _ask(kb, _asked(q.text, q.qid, typo), mode, asked)
                rows[mode].append((bool(ids & evidence), evidence <= ids, chars, items))
        print(f"  locomo conversation {g + 1}: {len(group.docs)} turns", file=sys.stderr)
    return [_summary("locomo", m, r) for m, r in rows.items()]


def quality_longmemeval(
    kb: Any,
    path: Path,
    modes: Sequence[str],
    *,
    dated: bool = True,
    typo: str | None = None,
) -> list[Result]:
    """Evidence in the block per LongMemEval question. ``dated``: each turn filed at its
    session's date and the question asked at its date, as the user lived it ("two
    months ago" read against the question's date); False: all filed and asked now (as
    before 2026-12-05). LoCoMo's questions have no date, so it is filed undated."""
    from kredenc.eval.longmemeval import load_longmemeval

    data = load_longmemeval(path, granularity="turn")
    rows: dict[str, list[tuple[bool, bool, int, int]]] = {m: [] for m in modes}
    for g, group in enumerate(data.groups()):
        kb.use_namespace(f"recall-lme-{os.getpid()}-{g}")
        said = (lambda d: d.meta.get("time")) if dated else (lambda d: None)
        _file(kb, group.docs, lambda d: str(d.meta["session_id"]), said)
        (q,) = group.queries
        asked = q.meta.get("asked_at") if dated else None
        hay = data.haystacks[q.qid]
        gold = {d.id for d, label in zip(hay.docs, hay.labels, strict=True) if "answer" in label}
        for mode in modes:
            ids, chars, items = _ask(kb, _asked(q.text, q.qid, typo), mode, asked)
            rows[mode].append((bool(ids & gold), gold <= ids, chars, items))
        if (g + 1) % 10 == 0:
            print(f"  longmemeval: {g + 1} questions", file=sys.stderr)
    return [_summary("longmemeval", m, r) for m, r in rows.items()]


def run_quality(
    modes: Sequence[str],
    datasets: Sequence[str] = ("locomo", "longmemeval"),
    data: Path = DATA,
    *,
    dated: bool = True,
    locomo_dated: bool = False,
    time_phrases: bool = False,
    spelling: bool = True,
    typo: str | None = None,
) -> list[Result]:
    """Evidence in the block on the dev sets; ``time_phrases`` turns the
    ``recall_time_phrases`` setting on (off by default), ``spelling`` is the
    ``recall_spelling`` one (on by default); ``typo`` asks each question with one seeded typo
    (``probe_typos.py``'s ``swap`` or ``drop``)."""
    from kredenc import Kredenc

    out: list[Result] = []
    tmp = Path(tempfile.mkdtemp(prefix="kredenc-bench-recall-q-"))
    EVAL_CACHE.parent.mkdir(parents=True, exist_ok=True)
    try:
        with Kredenc.open(
            tmp / "store",
            "q",
            durability="none",
            embed_cache=EVAL_CACHE,
            recall_time_phrases=time_phrases,
            recall_spelling=spelling,
        ) as kb:
            locomo = data / "locomo" / "locomo_dev.json"
            lme = data / "longmemeval" / "longmemeval_s_dev66.json.gz"
            lme_fn = functools.partial(quality_longmemeval, dated=dated, typo=typo)
            locomo_fn = functools.partial(quality_locomo, dated=locomo_dated, typo=typo)
            for name, path, fn in (
                ("locomo", locomo, locomo_fn),
                ("longmemeval", lme, lme_fn),
            ):
                if name not in datasets:
                    print(f"  {name}: not asked for (--datasets), skipped", file=sys.stderr)
                    out.append({"dataset": name, "skipped": "not asked for"})
                    continue
                if not path.exists():
                    print(f"  {name}: {path} not found, skipped", file=sys.stderr)
                    out.append({"dataset": name, "skipped": f"{path} not found"})
                    continue
                start = time.perf_counter()
                results = fn(kb, path, modes)
                for r in results:
                    r["seconds"] = time.perf_counter() - start
                out.extend(results)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# --------------------------------------------------------------------------------------
# Where the evidence goes, and the budget-packing levers (--levers)
# --------------------------------------------------------------------------------------

#: The baseline the levers are paired against: the budget before 2026-12-03 (3 items,
#: 600 / 1,800 characters; the default is 8 items since, measured against this).
BASE_BUDGET: dict[str, Any] = {"items": 3, "item_chars": 600, "total_chars": 1800}


def lever_configs() -> list[Result]:
    """Every candidate configuration, all within the default 1,800 characters: the item
    count, each with whole texts (cut at their head), head cuts at an equal share of the
    budget, and sentence-window snippets; then the relevance floor and the fusion weights
    at 3 whole items and at 5 snippets of 250."""
    out: list[Result] = []
    for items in (3, 4, 5, 6, 8):
        share = 1800 // items
        for text, extra in (
            ("whole", {}),
            (f"head{share}", {"item_chars": share}),
            ("snip400", {"snippet_chars": 400}),
            ("snip250", {"snippet_chars": 250}),
            ("snip160", {"snippet_chars": 160}),
        ):
            if text.startswith("head") and share >= 600:
                continue  # the same as whole
            out.append(
                {
                    "name": f"items{items}-{text}",
                    "budget": {**BASE_BUDGET, "items": items, **extra},
                    "settings": {},
                }
            )
    # Round 2 (after round 1 found equal head cuts best): more items, and snippets
    # within the equal share (the snippet centres the window, the share caps it).
    for items in (6, 8, 10, 12):
        share = 1800 // items
        if items >= 10:
            budget = {**BASE_BUDGET, "items": items, "item_chars": share}
            out.append({"name": f"items{items}-head{share}", "budget": budget, "settings": {}})
        budget = {**BASE_BUDGET, "items": items, "item_chars": share, "snippet_chars": share}
        out.append({"name": f"items{items}-head{share}-snip", "budget": budget, "settings": {}})
    # Round 4 (shorter record lines: no store ids, block-local session labels): more
    # whole items now fit the same characters; "-ids" puts the ids back (the lines of
    # before, less the "type" key), so the shorter line is measured against itself.
    for items in (10, 12, 16):
        budget = {**BASE_BUDGET, "items": items}
        out.append({"name": f"items{items}-whole", "budget": budget, "settings": {}})
    for items in (8, 10):
        budget = {**BASE_BUDGET, "items": items}
        settings = {"recall_show_ids": True}
        out.append({"name": f"items{items}-whole-ids", "budget": budget, "settings": settings})
    for items, extra in ((3, {}), (5, {"snippet_chars": 250})):
        text = "snip250" if extra else "whole"
        budget = {**BASE_BUDGET, "items": items, **extra}
        for floor in (0.1, 0.3, 0.4):
            settings = {"recall_min_similarity": floor}
            out.append(
                {
                    "name": f"items{items}-{text}-floor{floor}",
                    "budget": budget,
                    "settings": settings,
                }
            )
        for dense in (0.2, 0.6):  # search's tuned weights are 0.4 / 0.6
            settings = {"weight_dense": dense, "weight_lexical": round(1 - dense, 1)}
            out.append(
                {
                    "name": f"items{items}-{text}-wdense{dense}",
                    "budget": budget,
                    "settings": settings,
                }
            )
    return out


#: A missed question's evidence, by the furthest stage any of its evidence reached.
MISS_ORDER = (
    "chars",
    "near copy",
    "assistant",
    "own session",
    "empty",
    "items",
    "unread",
    "floor",
    "not a candidate",
)


def _miss_reason(fates: Sequence[Any], evidence: set[str]) -> tuple[str, int | None]:
    """The stage that cut the evidence closest to the block, and its best fused rank."""
    mine = [f for f in fates if str(f.meta.get("eval_id")) in evidence]
    if not mine:
        return "not a candidate", None
    best = min(mine, key=lambda f: (MISS_ORDER.index(f.stage), f.rank))
    return best.stage, min(f.rank for f in mine)


def _ask_with(
    kb: Any, question: str, mode: str, config: Result, trace: list[Any] | None = None
) -> tuple[set[str], set[str], int, str]:
    """The eval ids injected, those injected whole (not cut), the block's length and the
    records' texts as shown."""
    from kredenc.recall.reflex import recall

    settings = kb.store.settings
    kb.store.settings = settings.model_copy(update=config["settings"])
    try:
        result = recall(
            kb.store,
            kb.namespace,
            [{"role": "user", "content": question}],
            session_id=f"q-{time.monotonic_ns()}",
            session_start=time.time(),
            time_budget_ms=10_000,
            mode=mode,
            dry_run=True,
            budget=config["budget"],
            trace=trace,
        )
    finally:
        kb.store.settings = settings
    assert result.error is None, result.error
    assert len(result.block) <= config["budget"]["total_chars"], len(result.block)
    ids = {str(i.meta.get("eval_id")) for i in result.items}
    whole = {str(i.meta.get("eval_id")) for i in result.items if not i.truncated}
    return ids, whole, len(result.block), " ".join(i.text for i in result.items)


def _answers(name: str, path: Path) -> dict[str, str]:
    """The reference answers by qid, from the raw file (the loaders carry none)."""
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        raw = json.load(f)
    if name == "locomo":
        return {
            f"{sample.get('sample_id', s)}:{i}": str(qa.get("answer") or "")
            for s, sample in enumerate(raw)
            for i, qa in enumerate(sample.get("qa", []))
        }
    return {str(e["question_id"]): str(e.get("answer") or "") for e in raw}


def _answer_words(text: str) -> set[str]:
    from kredenc.retrieve.terms import STOPWORDS_EN, tokens

    return {t for t in tokens(text) if t not in STOPWORDS_EN}


def _lever_questions(kb: Any, name: str, path: Path) -> Iterator[tuple[str, set[str], str, str]]:
    """(question, evidence ids, group, answer) with the question's haystack filed in the
    current namespace (as --quality-only files them)."""
    answers = _answers(name, path)
    if name == "locomo":
        from kredenc.eval.locomo import ADVERSARIAL, load_locomo

        data = load_locomo(path)
        for g, group in enumerate(data.groups()):
            kb.use_namespace(f"levers-locomo-{os.getpid()}-{g}")
            prefix = f"locomo-{g}-s"
            _file(kb, group.docs, lambda d, p=prefix: p + str(d.meta["session"]))
            for q in group.queries:
                if data.category[q.qid] != ADVERSARIAL:
                    yield q.text, set(data.evidence[q.qid]), str(g), answers.get(q.qid, "")
            print(f"  locomo conversation {g + 1}", file=sys.stderr)
    else:
        from kredenc.eval.longmemeval import load_longmemeval

        lme = load_longmemeval(path, granularity="turn")
        for g, group in enumerate(lme.groups()):
            kb.use_namespace(f"levers-lme-{os.getpid()}-{g}")
            _file(kb, group.docs, lambda d: str(d.meta["session_id"]))
            (q,) = group.queries
            hay = lme.haystacks[q.qid]
            gold = {d.id for d, lab in zip(hay.docs, hay.labels, strict=True) if "answer" in lab}
            yield q.text, gold, str(g), answers.get(q.qid, "")
            if (g + 1) % 10 == 0:
                print(f"  longmemeval: {g + 1} questions", file=sys.stderr)


def run_levers(datasets: Sequence[str], data: Path, configs: Sequence[Result]) -> Result:
    """Per question and configuration, whether evidence reached the block (any, all),
    and for the default budget, where each missed question's evidence was cut."""
    from kredenc import Kredenc

    paths = {
        "locomo": data / "locomo" / "locomo_dev.json",
        "longmemeval": data / "longmemeval" / "longmemeval_s_dev66.json.gz",
    }
    out: Result = {"configs": list(configs), "datasets": {}}
    tmp = Path(tempfile.mkdtemp(prefix="kredenc-bench-recall-levers-"))
    EVAL_CACHE.parent.mkdir(parents=True, exist_ok=True)
    try:
        with Kredenc.open(tmp / "store", "q", durability="none", embed_cache=EVAL_CACHE) as kb:
            for name in datasets:
                start = time.perf_counter()
                rows: dict[str, dict[str, list[Any]]] = {}
                misses: dict[str, list[Any]] = {"hybrid": [], "lexical": []}
                groups: list[str] = []
                for question, evidence, group, answer in _lever_questions(kb, name, paths[name]):
                    groups.append(group)
                    wanted = _answer_words(answer)
                    for mode in ("hybrid", "lexical"):
                        for config in configs:
                            if mode == "lexical" and config["settings"]:
                                continue  # the floor and the weights are the dense leg's
                            base = config["budget"] == BASE_BUDGET and not config["settings"]
                            trace: list[Any] | None = [] if base else None
                            ids, whole, chars, shown = _ask_with(kb, question, mode, config, trace)
                            row = rows.setdefault(
                                f"{mode}:{config['name']}",
                                {"any": [], "all": [], "whole": [], "chars": [], "answer": []},
                            )
                            # The share of the answer's words in the texts shown (None:
                            # an answer with no content words).
                            row["answer"].append(
                                len(wanted & _answer_words(shown)) / len(wanted) if wanted else None
                            )
                            row["any"].append(int(bool(ids & evidence)))
                            row["whole"].append(int(bool(whole & evidence)))
                            row["all"].append(int(evidence <= ids))
                            row["chars"].append(chars)
                            if trace is not None:
                                misses[mode].append(
                                    None if ids & evidence else _miss_reason(trace, evidence)
                                )
                out["datasets"][name] = {
                    "questions": len(groups),
                    "groups": groups,
                    "rows": rows,
                    "misses": misses,
                    "seconds": time.perf_counter() - start,
                    "load_avg_1m": os.getloadavg()[0],
                }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _answer_mean(values: Sequence[float | None]) -> Result:
    """Mean share of the answer's words shown, with its 95 % bootstrap interval."""
    from kredenc.eval.metrics import bootstrap_ci

    known = [v for v in values if v is not None]
    if not known:
        return {"mean": None, "questions": 0}
    return {
        "mean": round(statistics.fmean(known), 4),
        "ci95": _round(bootstrap_ci(lambda ix: statistics.fmean(known[i] for i in ix), len(known))),
        "questions": len(known),
    }


def paired_delta(a: Sequence[float], b: Sequence[float]) -> tuple[float, list[float]]:
    """mean(b − a) and its 95 % paired bootstrap interval (the same questions resampled)."""
    from kredenc.eval.metrics import bootstrap_ci

    d = [y - x for x, y in zip(a, b, strict=True)]
    return statistics.fmean(d), _round(
        bootstrap_ci(lambda ix: statistics.fmean(d[i] for i in ix), len(d))
    )


def analyse_levers(out: Result) -> Result:
    """Choose the best hybrid configuration on each set, report it on the other (paired
    against the default), and tabulate the misses."""
    from kredenc.eval.metrics import bootstrap_ci

    sets = out["datasets"]
    summary: Result = {"tables": {}, "choices": []}
    for name, d in sets.items():
        table = []
        for key, row in d["rows"].items():
            anys = row["any"]
            table.append(
                {
                    "config": key,
                    "any": round(statistics.fmean(anys), 4),
                    "any_ci95": _round(
                        bootstrap_ci(
                            lambda ix, a=anys: statistics.fmean(a[i] for i in ix), len(anys)
                        )
                    ),
                    "all": round(statistics.fmean(row["all"]), 4),
                    "any_whole": round(statistics.fmean(row.get("whole", [0])), 4),
                    "answer_words": _answer_mean(row.get("answer", [])),
                    "chars_mean": round(statistics.fmean(row["chars"])),
                }
            )
        summary["tables"][name] = table
        counts: dict[str, dict[str, int]] = {}
        for mode, reasons in d["misses"].items():
            c: dict[str, int] = {}
            for r in reasons:
                if r is None:
                    continue
                stage, rank = r
                if stage in ("items", "unread") and rank is not None:
                    bucket = "4-5" if rank <= 5 else "6-10" if rank <= 10 else "11+"
                    stage = f"{stage} (best fused rank {bucket})"
                c[stage] = c.get(stage, 0) + 1
            counts[mode] = dict(sorted(c.items(), key=lambda kv: -kv[1]))
        summary["misses"] = summary.get("misses", {}) | {name: counts}
    names = list(sets)
    for chosen_on in names:
        for reported_on in names:
            if reported_on == chosen_on:
                continue
            rows = sets[chosen_on]["rows"]
            hybrid = [k for k in rows if k.startswith("hybrid:")]
            best = max(
                hybrid,
                key=lambda k: (statistics.fmean(rows[k]["any"]), statistics.fmean(rows[k]["all"])),
            )
            config = best.split(":", 1)[1]
            base = "items3-whole"
            other = sets[reported_on]["rows"]
            choice: Result = {"chosen_on": chosen_on, "reported_on": reported_on, "config": config}
            for metric in ("any", "all"):
                delta, ci = paired_delta(
                    other[f"hybrid:{base}"][metric], other[f"hybrid:{config}"][metric]
                )
                choice[f"{metric}_default"] = statistics.fmean(other[f"hybrid:{base}"][metric])
                choice[f"{metric}_chosen"] = statistics.fmean(other[f"hybrid:{config}"][metric])
                choice[f"{metric}_delta"] = round(delta, 4)
                choice[f"{metric}_delta_ci95"] = ci
            pairs = [
                (x, y)
                for x, y in zip(
                    other[f"hybrid:{base}"].get("answer", []),
                    other[f"hybrid:{config}"].get("answer", []),
                    strict=True,
                )
                if x is not None and y is not None
            ]
            if pairs:
                delta, ci = paired_delta([x for x, _ in pairs], [y for _, y in pairs])
                choice["answer_words_delta"] = round(delta, 4)
                choice["answer_words_delta_ci95"] = ci
            if f"lexical:{config}" in other:
                delta, ci = paired_delta(
                    other[f"lexical:{config}"]["any"], other[f"hybrid:{config}"]["any"]
                )
                choice["hybrid_over_words_any"] = round(delta, 4)
                choice["hybrid_over_words_ci95"] = ci
            summary["choices"].append(choice)
    return summary


# --------------------------------------------------------------------------------------
# Proxy overhead
# --------------------------------------------------------------------------------------


def _scripted_upstream(delay_s: float = 0.0) -> Any:
    """A loopback OpenAI-compatible upstream; ``delay_s`` before each answer (a model's
    time to the first token)."""
    from kredenc.testing.openai_server import LoopbackServer, Reply, Request

    reply = {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Noted."},
                "finish_reason": "stop",
            }
        ],
    }
    events = [
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "scripted",
            "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}],
        }
        for w in ("Noted", ".", " Thanks", "!")
    ]
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"

    def chat(request: Request) -> Reply:
        if request.json().get("stream"):
            return Reply.raw(sse, content_type="text/event-stream", delay=delay_s)
        return Reply.json(reply, delay=delay_s)

    server = LoopbackServer()
    server.route("POST", "/v1/chat/completions", chat)
    return server


ENTRY = "import kredenc.interfaces.cli_recall; from kredenc.interfaces.cli import main; main()"


@contextmanager
def proxy_process(home: Path, upstream: str, threads: int | None) -> Iterator[str]:
    """``kredenc proxy`` on the store, in its own process (as it runs for real)."""
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KREDENC_")}
    if threads:
        env["KREDENC_EMBED_THREADS"] = str(threads)
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)  # noqa: SIM115
    args = ["--store", str(home), "--namespace", NS, "proxy", "--upstream", upstream]
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, *args, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=log,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while "Application startup complete" not in Path(log.name).read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("proxy did not start:\n" + Path(log.name).read_text())
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.send_signal(2)  # SIGINT: uvicorn shuts down cleanly
        proc.wait(timeout=60)
        log.close()
        os.unlink(log.name)


def _timings(response: Any) -> dict[str, float]:
    """The proxy's ``Server-Timing: recall;dur=MS, lexical;dur=MS, ...``."""
    steps = {}
    for metric in response.headers["server-timing"].split(","):
        name, _, duration = metric.strip().partition(";dur=")
        steps[name] = float(duration)
    assert "recall" in steps, response.headers["server-timing"]
    return steps


def run_proxy(
    home: Path, queries: Sequence[str], threads: int | None, pause_s: float = 0.05
) -> list[Result]:
    import httpx

    from kredenc.interfaces.proxy import server_stack

    out: list[Result] = []
    # (The loopback upstream writes each reply in one send with Nagle off: no ~40 ms
    # delayed-ACK stalls on either path.)
    with (
        _scripted_upstream() as upstream,
        proxy_process(home, upstream.base_url, threads) as base,
        httpx.Client(timeout=30) as client,
    ):
        half = len(queries) // 2  # distinct queries per run: no query-cache hits
        for stream, part in ((False, queries[:half]), (True, queries[half:])):
            direct: list[float] = []
            proxied: list[float] = []
            recall_ms: list[float] = []
            steps: dict[str, list[float]] = {"lexical": [], "embed": [], "dense": []}
            load = os.getloadavg()[0]
            for i, q in enumerate(part):
                body: dict[str, Any] = {
                    "model": "m",
                    "messages": [{"role": "user", "content": q}],
                }
                if stream:
                    body["stream"] = True
                for target, bucket in ((upstream.base_url, direct), (base, proxied)):
                    start = time.perf_counter()
                    r = client.post(target + "/chat/completions", json=body)
                    r.read()
                    elapsed = time.perf_counter() - start
                    assert r.status_code == 200, r.text
                    if i >= 10:  # the first requests open connections and warm up
                        bucket.append(elapsed)
                        if target == base:
                            timings = _timings(r)
                            recall_ms.append(timings["recall"])
                            for step, values in steps.items():
                                if step in timings:
                                    values.append(timings[step])
                time.sleep(pause_s)  # the proxy files the turn, as between real turns
            paired = [(b - a) * 1000 for a, b in zip(direct, proxied, strict=True)]
            rest = [o - r for o, r in zip(paired, recall_ms, strict=True)]
            row: Result = {"stream": stream, "requests": len(direct)}
            for name, values in (
                ("direct", [x * 1000 for x in direct]),
                ("proxy", [x * 1000 for x in proxied]),
                ("overhead", paired),
                ("recall", recall_ms),
                ("rest", rest),
                *steps.items(),
            ):
                if not values:
                    continue
                for pct in (50, 95, 99):
                    row[f"{name}_p{pct}_ms"] = percentile(values, pct)
            row["load_avg_1m"] = (load + os.getloadavg()[0]) / 2
            row["server"] = "/".join(server_stack())
            out.append(row)
    return out


# --------------------------------------------------------------------------------------


def print_proxy(results: list[Result]) -> None:
    print_table(
        "proxy overhead over a direct call (ms): p50 / p95 / p99",
        [
            {"stream": r["stream"], "requests": r["requests"]}
            | {
                name: " / ".join(f"{r[f'{name}_p{pct}_ms']:.1f}" for pct in (50, 95, 99))
                for name in ("direct", "proxy", "overhead", "recall", "rest", "embed")
                if f"{name}_p50_ms" in r
            }
            | {"load": round(r["load_avg_1m"], 1), "server": r["server"]}
            for r in results
        ],
    )


def print_quality(results: list[Result]) -> None:
    keys = (
        "dataset",
        "mode",
        "questions",
        "evidence_any_in_block",
        "evidence_any_ci95",
        "evidence_all_in_block",
        "evidence_all_ci95",
        "chars_per_turn_mean",
        "chars_per_turn_p95",
        "items_per_turn_mean",
    )
    print_table(
        "quality at the default budget (8 items, 600/1800 chars)",
        [{k: r.get(k) for k in keys} for r in results],
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="filed memories (2000 or 100000)")
    parser.add_argument("--queries", type=int, default=500, help="timed recalls per mode")
    parser.add_argument("--words-only", action="store_true", help="lexical latency only")
    parser.add_argument("--no-quality", action="store_true", help="skip LoCoMo/LongMemEval")
    parser.add_argument("--no-proxy", action="store_true", help="skip the proxy overhead")
    parser.add_argument("--quality-only", action="store_true", help="only LoCoMo/LongMemEval")
    parser.add_argument("--proxy-only", action="store_true", help="only the proxy overhead")
    parser.add_argument(
        "--configs",
        default="",
        help="--levers: only these candidates (comma-separated names; the default is kept)",
    )
    parser.add_argument(
        "--levers",
        action="store_true",
        help="where evidence is cut, and the budget-packing candidates (writes recall-levers.json)",
    )
    parser.add_argument("--proxy-requests", type=int, default=200)
    parser.add_argument(
        "--datasets",
        default="locomo,longmemeval",
        help="quality datasets, comma-separated (LongMemEval embeds ~3,000 sessions cold)",
    )
    parser.add_argument(
        "--data", type=Path, default=DATA, help=f"the evaluation data folder (default {DATA})"
    )
    parser.add_argument(
        "--embed-threads", type=int, default=None, help="onnxruntime threads (default: settings)"
    )
    parser.add_argument(
        "--locomo-dated",
        action="store_true",
        help="LoCoMo's turns at their sessions' dates, asked a day after the last (a stress case)",
    )
    parser.add_argument(
        "--time-phrases",
        action="store_true",
        help="recall_time_phrases on: a time the message names puts what was filed since first",
    )
    parser.add_argument(
        "--undated",
        action="store_true",
        help="LongMemEval's turns filed now and asked now (no dates: the time phrases unread)",
    )
    parser.add_argument(
        "--no-spelling",
        dest="spelling",
        action="store_false",
        help="recall_spelling off (on by default since 2026-12-06): a misspelt word of "
        "the message is searched as typed",
    )
    parser.add_argument(
        "--typos",
        choices=("swap", "drop"),
        help="quality: each question asked with one seeded typo (probe_typos.py's)",
    )
    args = parser.parse_args(argv)

    def quality(args: argparse.Namespace, modes: list[str]) -> list[Result]:
        return run_quality(
            modes,
            args.datasets.split(","),
            args.data,
            dated=not args.undated,
            locomo_dated=args.locomo_dated,
            time_phrases=args.time_phrases,
            spelling=args.spelling,
            typo=args.typos,
        )

    sys.path.insert(0, str(HERE))
    results: Result = {"n": args.n, "targets": TARGETS, "embed_threads": args.embed_threads}
    modes = ["lexical"] if args.words_only else ["hybrid", "lexical"]
    if args.n >= 100_000 and not (CACHE_DIR / f"store-{args.n // 1000}k" / "store.json").exists():
        print(f"no {args.n:,}-memory store under {CACHE_DIR}: not run (run bench_store.py)")
        results["latency"] = {"not_run": "no store built by bench_store.py"}
        write_results(f"recall-{args.n}", results)
        return 0
    if args.levers:
        wanted = set(filter(None, args.configs.split(","))) | {"items3-whole"}
        configs = [c for c in lever_configs() if not args.configs or c["name"] in wanted]
        levers = run_levers(args.datasets.split(","), args.data, configs)
        results["levers"] = levers | {"summary": analyse_levers(levers)}
        print(json.dumps(results["levers"]["summary"], indent=1))
        write_results("recall-levers", results)
        return 0
    if args.quality_only:
        results["quality"] = quality(args, modes)
        print_quality(results["quality"])
        name = "recall-quality"
        if args.typos:
            name += f"-typos-{args.typos}"
        if not args.spelling:
            name += "-no-spelling"
        write_results(name, results)
        return 0
    queries = distinct_queries(args.n, args.queries + 20 + 2 * args.proxy_requests)
    rest = queries[args.queries + 20 :]
    if args.proxy_only:
        with bench_home(args.n) as home:
            results["proxy"] = run_proxy(home, rest[: 2 * args.proxy_requests], args.embed_threads)
        print_proxy(results["proxy"])
        write_results("recall-proxy", results)
        return 0
    with bench_home(args.n) as home:
        kb = open_store(home, args.embed_threads, args.spelling)
        try:
            results["latency"] = [run_latency(kb, queries[: args.queries + 20], m) for m in modes]
        finally:
            kb.close()
        rows = [
            {k: r[k] for k in ("mode", "n", "p50_ms", "p95_ms", "p99_ms", "max_ms", "timeouts")}
            | {"lex_ms": r["legs_p50_ms"].get("lexical"), "dense_ms": r["legs_p50_ms"].get("dense")}
            for r in results["latency"]
        ]
        print_table(f"recall latency per turn, {args.n:,} memories (ms)", rows)
        if not args.no_proxy and not args.words_only and args.n < 100_000:
            results["proxy"] = run_proxy(home, rest[: 2 * args.proxy_requests], args.embed_threads)
            print_proxy(results["proxy"])
    if not args.no_quality and not args.words_only:
        results["quality"] = quality(args, modes)
        print_table(
            "quality at the default budget (8 items, 600/1800 chars)",
            [
                {
                    k: r.get(k)
                    for k in (
                        "dataset",
                        "mode",
                        "questions",
                        "evidence_any_in_block",
                        "evidence_all_in_block",
                        "chars_per_turn_mean",
                        "items_per_turn_mean",
                    )
                }
                for r in results["quality"]
            ],
        )
    name = "recall" if args.n == 2000 else f"recall-{args.n}"
    if args.embed_threads:
        name += f"-threads{args.embed_threads}"
    if args.words_only:
        name += "-words"
    write_results(name, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
