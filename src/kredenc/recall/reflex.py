"""The recall reflex: memories answer back before every model call.

:func:`recall` takes an OpenAI-style message list and returns it with **one** system
message appended at the tail, holding the memories that the newest user message calls
for. Nothing before the tail changes (the same message objects, in the same order), so
a provider's prompt cache stays valid.

How it finds them: terms of the newest user message (:mod:`kredenc.recall.terms`)
search the index cards by words (FTS5), the message's embedding searches them by
meaning (vectors); the two ranked lists are fused by weighted RRF. Only ``memory``
and ``turn`` records filed before the session began are eligible, and turns of the
session itself never are, so the agent is not told what it just said.

Guarantees:

* **Read-only.** The recall path reads the index and the log; it never writes. The ids
  it recalls are handed to the facade's access counter (``note_access``), which the
  housekeeper files in batches.
* **Never breaks a turn.** Any failure returns the messages unchanged and logs a
  WARNING with the cause. There is one broad ``except`` and it is in :func:`recall`.
* **A time budget** (default 50 ms). The dense leg (embedding + vector search) runs on
  a worker thread while the lexical leg runs on the caller's; past the budget the
  reflex stops waiting and fuses what is ready. An embedding call cannot be
  interrupted: one that overruns finishes on its worker (at most ``_DENSE_WORKERS``
  at a time; past that the dense leg is skipped) and warms the query cache.
* **Dry run** (``recall_dry_run``): search, time and log what would be injected, and
  change nothing (no message, no access counts).
* **A startup line** (:func:`announce`): ``recall reflex online: store=…, budget=…,
  dry_run=…``, so that a silent misconfiguration is visible.

Session start: the caller may pass ``session_start`` (Unix seconds); otherwise the
first time this process sees a ``session_id`` is taken as its start
(:data:`kredenc.recall.conversation.SESSIONS`).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kredenc.errors import InvalidInput, KredencError
from kredenc.recall.budget import Budget, budget_from
from kredenc.recall.conversation import SESSIONS, newest_user_text
from kredenc.recall.terms import Term, recall_terms
from kredenc.records import LegScore
from kredenc.retrieve.fuse import weighted_rrf
from kredenc.retrieve.search import hit_from_payload
from kredenc.retrieve.terms import tokens
from kredenc.storage.index.filters import Filters

if TYPE_CHECKING:
    from kredenc.engine import Kredenc
    from kredenc.records import Hit

log = logging.getLogger("kredenc.recall")

MODES = ("hybrid", "lexical", "dense")
PREAMBLE = (
    "Memories recalled from earlier conversations (they may be outdated; "
    "use them only where they help):"
)
# The message text that is embedded is cut to this many characters.
_EMBED_CHARS = 2000
_DENSE_WORKERS = 4
# SQLite virtual-machine steps between checks of the deadline in the lexical leg.
_PROGRESS_STEPS = 2000

# Settings the reflex reads (getattr with these defaults until config.py has them).
DEFAULTS: dict[str, Any] = {
    "recall_dry_run": False,
    "recall_items": 3,
    "recall_item_chars": 600,
    "recall_total_chars": 1800,
    "recall_item_tokens": 0,
    "recall_total_tokens": 0,
    "recall_time_budget_ms": 50,
    "recall_mode": "hybrid",
    "recall_types": ("memory", "turn"),
    "recall_leg_k": 20,
    "recall_min_similarity": 0.2,
}


_SETTINGS: dict[int, tuple[Any, dict[str, Any]]] = {}


def setting(kb: Kredenc, name: str) -> Any:
    """A recall setting of ``kb`` (its default while the settings do not declare it).

    Read once per settings object (they do not change; pydantic's misses are slow).
    """
    cached = _SETTINGS.get(id(kb.settings))
    if cached is None or cached[0] is not kb.settings:
        values = {key: getattr(kb.settings, key, default) for key, default in DEFAULTS.items()}
        values["budget"] = Budget.from_settings(kb.settings)
        if len(_SETTINGS) > 64:
            _SETTINGS.clear()
        cached = _SETTINGS[id(kb.settings)] = (kb.settings, values)
    return cached[1][name]


# -- results -------------------------------------------------------------------------


@dataclass(frozen=True)
class RecallItem:
    """One recalled memory: what was injected (``line``) and why (its legs' ranks)."""

    n: int  # its number in the block: "#n"
    id: str
    type: str  # memory | turn
    kind: str  # a memory's kind; a turn's speaker role
    score: float  # fused score (the leg's own score when one leg ran)
    legs: dict[str, LegScore]
    created_at: float
    line: str  # the line as injected
    truncated: bool
    relations: tuple[str, ...] = ()  # e.g. ("contradicts #2",)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "id": self.id,
            "type": self.type,
            "kind": self.kind,
            "score": self.score,
            "legs": {n: {"rank": v.rank, "score": v.score} for n, v in self.legs.items()},
            "created_at": self.created_at,
            "line": self.line,
            "truncated": self.truncated,
            "relations": list(self.relations),
            "meta": self.meta,
        }


@dataclass
class RecallResult:
    """The messages to send, and what was recalled and why.

    ``messages`` is the input with one system message (``block``) appended, or the
    input unchanged when nothing was recalled, in a dry run, or on any failure
    (``skipped`` then says why).
    """

    messages: list[Any]
    items: list[RecallItem] = field(default_factory=list)
    block: str = ""
    injected: bool = False
    dry_run: bool = False
    terms: list[str] = field(default_factory=list)
    session_start: float | None = None
    elapsed_ms: float = 0.0
    timings_ms: dict[str, float] = field(default_factory=dict)
    skipped: str | None = None
    error: str | None = None
    timed_out: bool = False  # the dense leg was not ready within the time budget
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "injected": self.injected,
            "dry_run": self.dry_run,
            "block": self.block,
            "chars": len(self.block),
            "items": [i.to_dict() for i in self.items],
            "terms": self.terms,
            "session_start": self.session_start,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "skipped": self.skipped,
            "error": self.error,
            "timed_out": self.timed_out,
            "warnings": self.warnings,
        }


# -- the dense leg's workers -----------------------------------------------------------


class _Workers:
    """A few threads for dense legs; refuses work when all are busy (bounded overrun)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._busy = 0
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[[], Any]) -> Future[Any] | None:
        with self._lock:
            if self._busy >= self.size:
                return None
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.size, thread_name_prefix="kredenc-recall")
            self._busy += 1
        future = self._pool.submit(fn)
        future.add_done_callback(self._done)
        return future

    def _done(self, _future: Future[Any]) -> None:
        with self._lock:
            self._busy -= 1


_WORKERS = _Workers(_DENSE_WORKERS)


Ranked = list[tuple[int, float]]


class _DenseJob:
    """Embedding + vector search on a worker thread, abandoned at the deadline.

    Only the embedding may outlive the call: a job whose caller gave up before its
    vector search began never touches the index, and a search that has begun is
    waited for (it is short), so no worker reads a store its caller may have closed.
    """

    def __init__(self, kb: Kredenc, ns: str, text: str, k: int, filters: Filters) -> None:
        self.kb, self.ns, self.text, self.k, self.filters = kb, ns, text, k, filters
        self._lock = threading.Lock()
        self._abandoned = False
        self._searching = False
        self._future: Future[tuple[Ranked, float, float] | None] | None = None

    def start(self) -> bool:
        self._future = _WORKERS.submit(self._run)
        return self._future is not None

    def _run(self) -> tuple[Ranked, float, float] | None:
        """The ranked rowids, the leg's milliseconds and the embedding's."""
        t0 = time.perf_counter()
        vec = np.asarray(self.kb.embed_query(self.text), dtype=np.float32)
        embedded = time.perf_counter()
        with self._lock:
            if self._abandoned:
                return None
            self._searching = True
        ranked = self.kb.index.dense(self.ns, vec, self.k, self.filters)
        return ranked, (time.perf_counter() - t0) * 1000, (embedded - t0) * 1000

    def wait(self, seconds: float) -> tuple[Ranked, float, float] | None:
        """The leg's result, or None when it was not ready in ``seconds``."""
        assert self._future is not None
        try:
            return self._future.result(timeout=max(0.0, seconds))
        except FutureTimeout:
            with self._lock:
                if not self._searching:
                    self._abandoned = True
                    return None
            return self._future.result()


# -- configuration -------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    budget: Budget
    dry_run: bool
    time_budget_ms: float
    mode: str
    types: tuple[str, ...]
    leg_k: int
    min_similarity: float


def _plan(
    kb: Kredenc,
    budget: Budget | Mapping[str, Any] | None,
    dry_run: bool | None,
    time_budget_ms: float | None,
    mode: str | None,
) -> _Plan:
    chosen_mode = str(mode if mode is not None else setting(kb, "recall_mode"))
    if chosen_mode not in MODES:
        raise InvalidInput(f"unknown recall mode {chosen_mode!r}", f"use one of {', '.join(MODES)}")
    ms = float(
        time_budget_ms if time_budget_ms is not None else setting(kb, "recall_time_budget_ms")
    )
    if not ms > 0:
        raise InvalidInput(f"the recall time budget must be positive, not {ms} ms")
    return _Plan(
        budget=setting(kb, "budget") if budget is None else budget_from(budget, kb.settings),
        dry_run=bool(dry_run if dry_run is not None else setting(kb, "recall_dry_run")),
        time_budget_ms=ms,
        mode=chosen_mode,
        types=tuple(setting(kb, "recall_types")),
        leg_k=int(setting(kb, "recall_leg_k")),
        min_similarity=float(setting(kb, "recall_min_similarity")),
    )


# -- the startup line ------------------------------------------------------------------

_ANNOUNCED: weakref.WeakSet[Any] = weakref.WeakSet()


def announce(
    kb: Kredenc,
    *,
    budget: Budget | Mapping[str, Any] | None = None,
    dry_run: bool | None = None,
    time_budget_ms: float | None = None,
    mode: str | None = None,
) -> str:
    """Log (INFO) and return ``recall reflex online: store=…, budget=…, dry_run=…``.

    A store whose index cannot be read is named in the line, which is then a WARNING.
    :func:`recall` calls this once per open store; integrations call it at startup.
    """
    plan = _plan(kb, budget, dry_run, time_budget_ms, mode)
    level = logging.INFO
    try:
        stats = kb.index.stats(kb.namespace)
        count = sum(d["records"] for d in stats["drawers"] if d["type"] in plan.types)
        store = f"{kb.home} (namespace {kb.namespace}, {count} memories and turns)"
    except (KredencError, sqlite3.Error, OSError, AttributeError) as exc:
        store = f"{kb.home} (unreadable: {exc})"
        level = logging.WARNING
    line = (
        f"recall reflex online: store={store}, budget={plan.budget.describe()}, "
        f"time_budget={plan.time_budget_ms:g} ms, mode={plan.mode}, "
        f"model={kb.embedder.describe()}, "
        f"dry_run={str(plan.dry_run).lower()}"
    )
    log.log(level, "%s", line)
    _ANNOUNCED.add(kb)
    return line


def warm_up(kb: Kredenc) -> float:
    """Load the embedding model and the vector shards now (their first use costs up to
    seconds, which a recall would otherwise spend past its time budget). Seconds taken."""
    started = time.perf_counter()
    kb.embedder.embed(["kredenc recall warm-up"])  # the model that files turns
    kb.embedder.embed_query("kredenc recall warm-up")  # the one that recalls
    kb.index.shards()
    return time.perf_counter() - started


# -- the reflex ------------------------------------------------------------------------


def recall(
    kb: Kredenc,
    messages: Sequence[Any],
    *,
    session_id: str,
    budget: Budget | Mapping[str, Any] | None = None,
    dry_run: bool | None = None,
    time_budget_ms: float | None = None,
    session_start: float | None = None,
    mode: str | None = None,
) -> RecallResult:
    """``messages`` with the memories the newest user message calls for appended at the
    tail as one system message. Never raises; see the module doc for the guarantees.

    ``budget``: a :class:`Budget` (or a mapping of its fields); default from the
    settings (3 items, 600 characters each, 1,800 in all). ``dry_run``,
    ``time_budget_ms`` and ``mode`` (hybrid, lexical, dense) override the settings.
    ``session_start`` (Unix seconds) overrides the in-process session registry.
    """
    started = time.perf_counter()
    try:
        return _recall(
            kb,
            messages,
            session_id=session_id,
            plan=_plan(kb, budget, dry_run, time_budget_ms, mode),
            session_start=session_start,
            started=started,
        )
    except Exception as exc:  # noqa: BLE001 - the reflex must never break a turn
        log.warning(
            "recall reflex skipped; the turn goes on without memories: %s: %s",
            type(exc).__name__,
            exc,
        )
        cause = f"{type(exc).__name__}: {exc}"
        return RecallResult(
            messages=list(messages) if isinstance(messages, list | tuple) else messages,  # type: ignore[arg-type]
            skipped=cause,
            error=cause,
            elapsed_ms=(time.perf_counter() - started) * 1000,
        )


def _recall(
    kb: Kredenc,
    messages: Sequence[Any],
    *,
    session_id: str,
    plan: _Plan,
    session_start: float | None,
    started: float,
) -> RecallResult:
    if not isinstance(messages, list | tuple):
        raise InvalidInput("messages must be a list of chat messages")
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInput("session_id must be a non-empty string")
    if kb not in _ANNOUNCED:
        announce(kb, budget=plan.budget, dry_run=plan.dry_run)
    msgs = list(messages)
    start = SESSIONS.start(session_id, session_start)
    result = RecallResult(messages=msgs, dry_run=plan.dry_run, session_start=start)
    query = newest_user_text(msgs)
    if not query.strip():
        result.skipped = "no user message"
        return _done(result, started)
    terms = recall_terms(query)
    result.terms = [str(t) for t in terms]
    legs = _run_legs(kb, query, terms, plan, start, started, result)
    hits = _pick(kb, legs, plan, session_id)
    if hits:
        _render(kb, hits, plan.budget, result)
    if not result.items:
        return _done(result, started)
    if plan.dry_run:
        log.info(
            "recall dry run: would inject %d memories (%d chars) in %.1f ms: %s",
            len(result.items),
            len(result.block),
            (time.perf_counter() - started) * 1000,
            ", ".join(i.id for i in result.items),
        )
    else:
        result.messages = [*msgs, {"role": "system", "content": result.block}]
        result.injected = True
        kb.note_access([i.id for i in result.items])
    return _done(result, started, plan)


def _done(result: RecallResult, started: float, plan: _Plan | None = None) -> RecallResult:
    result.elapsed_ms = (time.perf_counter() - started) * 1000
    # (After a dense leg's timeout the overrun is the fusing of what was ready.)
    if plan is not None and result.elapsed_ms > plan.time_budget_ms and not result.timed_out:
        result.warnings.append(
            f"recall took {result.elapsed_ms:.1f} ms, over its {plan.time_budget_ms:g} ms budget"
        )
    for warning in result.warnings:
        log.warning("recall: %s", warning)
    return result


def _run_legs(
    kb: Kredenc,
    query: str,
    terms: list[Term],
    plan: _Plan,
    session_start: float,
    started: float,
    result: RecallResult,
) -> dict[str, Ranked]:
    """Each leg's ranked (rowid, score) list: lexical here, dense on a worker thread,
    waited for until the time budget is spent."""
    ns = kb.namespace
    filters = Filters(types=plan.types, older_than=session_start)
    deadline = started + plan.time_budget_ms / 1000
    legs: dict[str, Ranked] = {}
    job: _DenseJob | None = None
    if plan.mode in ("hybrid", "dense") and tokens(query):
        job = _DenseJob(kb, ns, " ".join(query.split())[:_EMBED_CHARS], plan.leg_k, filters)
        if not job.start():
            job = None
            result.warnings.append(
                f"dense leg skipped: {_WORKERS.size} earlier embeddings are still running"
            )
    if plan.mode in ("hybrid", "lexical") and terms:
        t0 = time.perf_counter()
        lexical = _lexical(kb, ns, terms, plan.leg_k, filters, deadline)
        if lexical is None:
            result.timed_out = True
            result.warnings.append(
                f"lexical leg stopped at the {plan.time_budget_ms:g} ms time budget"
            )
        else:
            legs["lexical"] = lexical
            result.timings_ms["lexical"] = (time.perf_counter() - t0) * 1000
    if job is not None:
        try:
            done = job.wait(deadline - time.perf_counter())
        except KredencError as exc:  # a provider's error (model missing, API down)
            result.warnings.append(f"dense leg failed ({exc}); used what was ready")
        else:
            if done is None:
                result.timed_out = True
                result.warnings.append(
                    f"dense leg not ready within the {plan.time_budget_ms:g} ms time budget "
                    "(the embedding goes on in the background); used what was ready"
                )
            else:
                legs["dense"], result.timings_ms["dense"], result.timings_ms["embed"] = done
    return legs


def _lexical(
    kb: Kredenc, ns: str, terms: list[Term], k: int, filters: Filters, deadline: float
) -> Ranked | None:
    """The lexical leg, stopped by SQLite at the deadline (None then).

    A progress handler on this thread's reader connection (no other thread uses it)
    interrupts the query once the time budget is spent.
    """
    conn = kb.index.reader()
    conn.set_progress_handler(lambda: time.perf_counter() > deadline, _PROGRESS_STEPS)
    try:
        return kb.index.lexical(ns, terms, k, filters, max_scored=kb.settings.lexical_max_scored)
    except sqlite3.OperationalError as exc:
        if time.perf_counter() > deadline and "interrupt" in str(exc):
            return None
        raise
    finally:
        conn.set_progress_handler(None, 0)


@dataclass
class _Candidate:
    hit: Hit
    score: float


def _pick(kb: Kredenc, legs: dict[str, Ranked], plan: _Plan, session_id: str) -> list[_Candidate]:
    """The best records (at most the budget's item count), read from the log."""
    ranked = {name: leg for name, leg in legs.items() if leg}
    if not ranked or plan.budget.items == 0:
        return []
    per_leg = {
        name: {r: LegScore(rank, score) for rank, (r, score) in enumerate(leg, start=1)}
        for name, leg in ranked.items()
    }
    if len(ranked) == 1:
        ((_, only),) = ranked.items()
        fused = list(only)
    else:
        s = kb.settings
        fused = weighted_rrf(
            {name: [r for r, _ in leg] for name, leg in ranked.items()},
            {"dense": s.weight_dense, "lexical": s.weight_lexical},
            k=s.rrf_k,
        )
    lexical = per_leg.get("lexical", {})
    dense = per_leg.get("dense", {})
    # A record found by meaning alone must be similar enough to be worth the tokens.
    fused = [
        (r, score)
        for r, score in fused
        if r in lexical or (r in dense and dense[r].score >= plan.min_similarity)
    ]
    wanted = fused[: plan.budget.items * 3 + 2]
    places = kb.index.resolve(kb.namespace, [r for r, _ in wanted])
    out: list[_Candidate] = []
    for rowid, score in wanted:
        place = places.get(rowid)
        if place is None:
            continue
        payload = kb.haystack.read(place[1])
        hit = hit_from_payload(payload, place[1], score)
        if hit.type == "turn" and hit.meta.get("session") == session_id:
            continue  # the agent is not told what it just said
        if not hit.text.strip():
            continue
        hit.legs = {name: leg[rowid] for name, leg in per_leg.items() if rowid in leg}
        out.append(_Candidate(hit, float(score)))
        if len(out) >= plan.budget.items:
            break
    return out


def _render(kb: Kredenc, picked: list[_Candidate], budget: Budget, result: RecallResult) -> None:
    """Fit the picked records into the budget; fill ``result.block`` and ``items``.

    Relations are shown between the records that made it into the block, so the
    block is fitted again when one is left out.
    """
    while picked:
        ids = [c.hit.id for c in picked]
        number = {rid: n for n, rid in enumerate(ids, start=1)}
        relations: dict[str, list[str]] = {rid: [] for rid in ids}
        for src, dst, rel, _weight in kb.index.edges_among(kb.namespace, ids):
            relations[src].append(f"{rel} #{number[dst]}")
        heads = [
            (_head(n, c.hit), _text(c.hit, relations[c.hit.id])) for n, c in enumerate(picked, 1)
        ]
        lines = budget.fit(PREAMBLE, heads)
        if lines is None:
            return
        if len(lines) < len(picked):
            picked = picked[: len(lines)]
            continue
        result.block = "\n".join([PREAMBLE, *lines])
        result.items = [
            RecallItem(
                n=n,
                id=c.hit.id,
                type=c.hit.type,
                kind=_kind(c.hit),
                score=c.score,
                legs=c.hit.legs,
                created_at=c.hit.created_at,
                line=line,
                truncated=line != head + text,
                relations=tuple(relations[c.hit.id]),
                meta=c.hit.meta,
            )
            for n, (c, line, (head, text)) in enumerate(zip(picked, lines, heads, strict=True), 1)
        ]
        return


def _kind(hit: Hit) -> str:
    if hit.type == "turn":
        return str(hit.meta.get("role") or "turn")
    return hit.kind or hit.type


def _head(n: int, hit: Hit) -> str:
    when = time.strftime("%Y-%m-%d", time.gmtime(hit.created_at)) if hit.created_at else "?"
    label = f"{_kind(hit)} turn" if hit.type == "turn" else _kind(hit)
    return f"#{n} [{label}, {when}, {hit.id}] "


def _text(hit: Hit, relations: list[str]) -> str:
    text = " ".join(hit.text.split())
    return f"({'; '.join(relations)}) {text}" if relations else text
