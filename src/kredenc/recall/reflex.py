"""The recall reflex: memories answer back before every model call.

:func:`recall` takes an OpenAI-style message list and returns it with **one** message
appended at the tail (role ``system``, or the ``recall_role`` setting's), holding the
memories that the newest user message calls for, as an envelope of data
(:mod:`kredenc.recall.render`). Nothing before the tail changes (the same message
objects, in the same order), so a provider's prompt cache stays valid.

How it finds them: it runs search's legs (:func:`kredenc.retrieve.search.run_legs`)
with a deadline. Terms of the newest user message (:mod:`kredenc.retrieve.message_terms`) search
the index cards by words (FTS5), the message's embedding searches them by meaning
(vectors); the two ranked lists are fused as search fuses them (the store's ``fusion``
setting: min-max by default). Records of the ``recall_types`` (memories, turns and
document passages by default) filed before the session began are eligible, and turns of
the session itself never are, so the agent is not told what it just said. The block is
written by :mod:`kredenc.recall.render`. With ``recall_time_phrases`` (off by default),
a message that names a time ("two months ago": :mod:`kredenc.retrieve.when`, read
against ``session_start`` when given, else now) has the legs run again over the records
filed since then; those candidates go first (a record of an event is filed when it
happens or later, never before).

No parroting: a message with no content terms (a greeting, "ok", "thanks") recalls
nothing; the assistant's own turns are left out unless ``recall_assistant_turns``; every
type clears the same relevance floor (found by words, or by meaning with a cosine of at
least ``recall_min_similarity``); and a record whose text is a near copy of one already
picked (:func:`near_copy`) is skipped.

Cold start: :func:`warm_in_background` (called when a ``Kredenc`` store opens, unless
``recall_warm_at_open`` is off) loads the query model on a thread, then starts the
index's load of its vectors on another and reads the term set spelling corrections
use; the query embedding of a recall queues behind
the model's load on its lock, and its dense leg waits for the vectors only within its
time budget (``vectors_ready``: a first recall never loads them on its own thread), so
a first recall whose budget outlasts the rest of the warm-up gets its dense leg.

Recall reads the store through :class:`~kredenc.recall.deps.RecallStore` and names
the namespace on every call; it never sees the ``Kredenc`` facade.

Guarantees:

* **Read-only.** The recall path reads the index and the log; it never writes. The ids
  it recalls are handed to the store's access counter (``note_access``), which the
  housekeeper files in batches.
* **Never breaks a turn.** Any failure returns the messages unchanged and logs a
  WARNING with the cause. There is one broad ``except`` and it is in :func:`recall`.
* **A time budget** (default 50 ms): the legs' deadline. The embedding runs on a
  worker thread while the lexical leg runs on the caller's, which SQLite interrupts at
  the deadline; past it the reflex stops waiting and fuses what is ready. An embedding
  call cannot be interrupted: one that overruns finishes on its worker and warms the
  query cache; it never touches the index. Simultaneous recalls queue for the
  :data:`~kredenc.retrieve.search.EMBED_WORKERS` workers; the dense leg is skipped only
  when that many embeddings overran their deadlines and still run.
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
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Any

from kredenc.errors import CorruptLog, InvalidInput, KredencError, StoreClosed, shown
from kredenc.recall.budget import Budget, budget_from
from kredenc.recall.conversation import SESSIONS, newest_user_text
from kredenc.recall.deps import RecallStore
from kredenc.recall.render import PREAMBLE, Picked, render
from kredenc.recall.result import RecallItem, RecallResult
from kredenc.recall.snippet import snippet
from kredenc.records import LegScore
from kredenc.retrieve.message_terms import recall_terms
from kredenc.retrieve.search import (
    Legs,
    SearchParams,
    fuse,
    hit_from_payload,
    run_legs,
    similar_enough,
)
from kredenc.retrieve.terms import STOPWORDS_EN, tokens
from kredenc.retrieve.when import first_then, since
from kredenc.storage.index.filters import Filters, scope_filters

__all__ = [
    "NEAR_COPY",
    "PREAMBLE",
    "STAGES",
    "WARM_UP_THREAD",
    "Fate",
    "RecallItem",
    "RecallResult",
    "announce",
    "near_copy",
    "recall",
    "warm_in_background",
    "warm_up",
]

log = logging.getLogger("kredenc.recall")

MODES = ("hybrid", "lexical", "dense")
#: The name of the thread :func:`warm_in_background` starts.
WARM_UP_THREAD = "kredenc-recall-warm-up"
# The message text that is embedded is cut to this many characters.
_EMBED_CHARS = 2000


# -- configuration -------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    budget: Budget
    dry_run: bool
    role: str  # the role of the injected message
    time_budget_ms: float
    types: tuple[str, ...]
    min_similarity: float
    assistant_turns: bool  # the assistant's own past turns may be recalled
    time_phrases: bool  # a time the message names puts what was filed since first
    params: SearchParams  # the legs and their fusion
    scope: dict[str, Any]  # the scope ids (Filters fields) recalled records must carry


def _plan(
    store: RecallStore,
    budget: Budget | Mapping[str, Any] | None,
    dry_run: bool | None,
    time_budget_ms: float | None,
    mode: str | None,
    scope: Mapping[str, str | None] | None = None,
) -> _Plan:
    s = store.settings
    given = dict(scope or {})

    def scope_id(key: str) -> str | None:
        """The call's id, else the ``recall_<key>`` setting's ('' is none)."""
        value = given.get(key)
        return value if value is not None else (getattr(s, f"recall_{key}") or None)

    chosen_mode = str(mode if mode is not None else s.recall_mode)
    if chosen_mode not in MODES:
        raise InvalidInput(
            f"unknown recall mode {shown(chosen_mode)}", f"use one of {', '.join(MODES)}"
        )
    ms = float(time_budget_ms if time_budget_ms is not None else s.recall_time_budget_ms)
    if not ms > 0:
        raise InvalidInput(f"the recall time budget must be positive, not {ms} ms")
    return _Plan(
        budget=budget_from(budget, s),
        dry_run=bool(dry_run if dry_run is not None else s.recall_dry_run),
        role=s.recall_role,
        time_budget_ms=ms,
        types=tuple(s.recall_types),
        min_similarity=float(s.recall_min_similarity),
        assistant_turns=bool(s.recall_assistant_turns),
        time_phrases=bool(s.recall_time_phrases),
        params=SearchParams(
            k=s.recall_leg_k,
            mode=chosen_mode,
            leg_k=s.recall_leg_k,
            rrf_k=s.rrf_k,
            weight_dense=s.weight_dense,
            weight_lexical=s.weight_lexical,
            fusion=s.fusion,
            context_weight=s.lexical_context_weight,
            lexical_max_scored=s.lexical_max_scored,
            spelling=s.recall_spelling,
        ),
        scope=scope_filters(
            user_id=scope_id("user_id"), agent_id=scope_id("agent_id"), run_id=scope_id("run_id")
        ),
    )


# -- the startup line ------------------------------------------------------------------

# The namespaces of each open store that were announced.
_ANNOUNCED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_ANNOUNCED_LOCK = threading.Lock()


def announce(
    store: RecallStore,
    ns: str,
    *,
    budget: Budget | Mapping[str, Any] | None = None,
    dry_run: bool | None = None,
    time_budget_ms: float | None = None,
    mode: str | None = None,
) -> str:
    """Log (INFO) and return ``recall reflex online: store=…, budget=…, dry_run=…``.

    A store whose index cannot be read is named in the line, which is then a WARNING.
    :func:`recall` calls this once per open store and namespace; integrations call it
    at startup.
    """
    plan = _plan(store, budget, dry_run, time_budget_ms, mode)
    level = logging.INFO
    try:
        stats = store.index.stats(ns)
        count = sum(d["records"] for d in stats["drawers"] if d["type"] in plan.types)
        where = f"{store.home} (namespace {ns}, {count} memories and turns)"
    except Exception as exc:  # noqa: BLE001 - any backend's errors (sqlite3's too): named, at WARNING
        where = f"{store.home} (unreadable: {exc})"
        level = logging.WARNING
    line = (
        f"recall reflex online: store={where}, budget={plan.budget.describe()}, "
        f"time_budget={plan.time_budget_ms:g} ms, mode={plan.params.mode}, "
        f"model={store.embedder.describe()}, "
        f"dry_run={str(plan.dry_run).lower()}"
    )
    log.log(level, "%s", line)
    with _ANNOUNCED_LOCK:
        _ANNOUNCED.setdefault(store, set()).add(ns)
    return line


def _announced(store: RecallStore, ns: str) -> bool:
    with _ANNOUNCED_LOCK:
        return ns in _ANNOUNCED.get(store, ())


def warm_up(store: RecallStore) -> float:
    """Load the embedding model, the vector shards and the term set that spelling
    corrections read now (their first use costs up to seconds, which a recall would
    otherwise spend past its time budget). Seconds taken."""
    started = time.perf_counter()
    store.embedder.embed(["kredenc recall warm-up"])  # the model that files turns
    store.embedder.embed_query("kredenc recall warm-up")  # the one that recalls
    store.index.shards()
    if store.settings.recall_spelling:
        store.index.load_terms()
    return time.perf_counter() - started


def warm_in_background(
    store: RecallStore, *, gate: AbstractContextManager[object] | None = None
) -> threading.Thread:
    """Run :func:`warm_up` on a thread and return it (started). Never blocks and never
    raises into the caller: a failure is logged at WARNING (the recall that follows
    loads what it needs itself, or falls back to words).

    Not a daemon thread: the interpreter waits for it at exit, because onnxruntime
    aborts the process (``terminate called without an active exception``) when a
    model load is cut short by the interpreter's shutdown.

    The query model is loaded (an embedder whose ``loaded`` is False: one with a local
    model still on disk), then the index is asked to load its vectors on its own thread
    (``vectors_ready``) and, when recall corrects spelling, the term set is read
    (``load_terms``). Those loads read on connections of their own, and closing the
    index waits for them, so a rebuild or purge on the opening thread never swaps a
    connection under them. (This thread once read the shards itself, inside
    ``gate``, and such a swap crashed the process in the suite.)"""

    def run() -> None:
        started = time.perf_counter()
        try:
            if getattr(store.embedder, "loaded", True) is False:
                # A local model not loaded yet (MiniLM): load the graph that embeds
                # queries. A remote or in-memory embedder has nothing to load.
                with gate if gate is not None else nullcontext():
                    store.embedder.embed_query("kredenc recall warm-up")
            store.index.vectors_ready()
            if store.settings.recall_spelling:
                store.index.load_terms()
        except StoreClosed:
            return  # closed before the warm-up was done: nothing left to warm
        except Exception as exc:  # noqa: BLE001 - a background warm-up must never break the host
            # The text, not the exception: a kept log record must not keep its frames
            # (and the store) alive.
            log.warning("recall warm-up failed: %s: %s", type(exc).__name__, str(exc))
        else:
            log.debug("recall warm-up done in %.2f s", time.perf_counter() - started)

    thread = threading.Thread(target=run, name=WARM_UP_THREAD, daemon=False)
    thread.start()
    return thread


# -- near copies -----------------------------------------------------------------------

#: Two texts whose content words (word tokens less English stopwords) overlap by this
#: share (Jaccard) or more are near copies. A judgement, not tuned on any benchmark: the
#: same text with other punctuation, case, spacing or function words collapses, and so
#: does one content word changed among ten or more; two short facts that differ in their
#: one distinctive word (a city, a name) stay apart.
NEAR_COPY = 0.9


def _words(text: str) -> frozenset[str]:
    return frozenset(t for t in tokens(text) if t not in STOPWORDS_EN)


def near_copy(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two texts' content words (:func:`kredenc.retrieve.terms.tokens` less
    :data:`~kredenc.retrieve.terms.STOPWORDS_EN`) make them near copies
    (:data:`NEAR_COPY`); two texts without content words are copies."""
    union = a | b
    return not union or len(a & b) / len(union) >= NEAR_COPY


# -- the reflex ------------------------------------------------------------------------


def recall(
    store: RecallStore,
    ns: str,
    messages: Sequence[Any],
    *,
    session_id: str,
    budget: Budget | Mapping[str, Any] | None = None,
    dry_run: bool | None = None,
    time_budget_ms: float | None = None,
    session_start: float | None = None,
    mode: str | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    trace: list[Fate] | None = None,
) -> RecallResult:
    """``messages`` with the memories of namespace ``ns`` that the newest user message
    calls for appended at the tail as one message (role ``recall_role``). Never raises;
    see the module doc for the guarantees.

    ``user_id``, ``agent_id`` and ``run_id`` recall only records filed with those ids
    (default: the ``recall_user_id``, ``recall_agent_id`` and ``recall_run_id``
    settings; empty settings filter nothing).

    ``budget``: a :class:`Budget` (or a mapping of its fields); default from the
    settings (8 items, 600 characters each, 1,800 in all). ``dry_run``,
    ``time_budget_ms`` and ``mode`` (hybrid, lexical, dense) override the settings.
    ``session_start`` (Unix seconds) overrides the in-process session registry.

    ``trace``: a list that receives the :class:`Fate` of every candidate the legs
    returned (why each one is, or is not, in the block); for diagnosis and the
    benchmarks, it reads every candidate's record, so it costs a little more.
    """
    started = time.perf_counter()
    try:
        return _recall(
            store,
            ns,
            messages,
            session_id=session_id,
            plan=_plan(
                store,
                budget,
                dry_run,
                time_budget_ms,
                mode,
                {"user_id": user_id, "agent_id": agent_id, "run_id": run_id},
            ),
            session_start=session_start,
            started=started,
            trace=trace,
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
    store: RecallStore,
    ns: str,
    messages: Sequence[Any],
    *,
    session_id: str,
    plan: _Plan,
    session_start: float | None,
    started: float,
    trace: list[Fate] | None = None,
) -> RecallResult:
    if not isinstance(messages, list | tuple):
        raise InvalidInput("messages must be a list of chat messages")
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInput("session_id must be a non-empty string")
    deadline = started + plan.time_budget_ms / 1000
    announce_ms = 0.0
    if not _announced(store, ns):
        announce(store, ns, budget=plan.budget, dry_run=plan.dry_run)
        # The startup line counts the namespace's records (70-90 ms at 100,000
        # memories): once per store and namespace, and not out of the legs' budget.
        announce_ms = (time.perf_counter() - started) * 1000
        deadline += announce_ms / 1000
    msgs = list(messages)
    # A session is one conversation of one namespace of one store: two tenants (or two
    # stores in a process) with the same session id are two sessions.
    start = SESSIONS.start(f"{store.home}\x1f{ns}\x1f{session_id}", session_start)
    result = RecallResult(messages=msgs, dry_run=plan.dry_run, session_start=start)
    if announce_ms:
        result.timings_ms["announce"] = announce_ms
    query = newest_user_text(msgs)
    if not query.strip():
        result.skipped = "no user message"
        return _done(result, started)
    terms = recall_terms(query)
    result.terms = [str(t) for t in terms]
    if not terms:
        result.skipped = "no content terms in the message (a greeting or an acknowledgement)"
        return _done(result, started)
    searched = " ".join(query.split())[:_EMBED_CHARS]

    def run(since_start: float | None = None) -> Legs:
        return run_legs(
            store.index,
            ns,
            searched,
            plan.params,
            Filters(types=plan.types, older_than=start, created_after=since_start, **plan.scope),
            store.embed_query,
            terms=terms,
            deadline=deadline,
        )

    legs = run()
    result.corrections = dict(legs.corrections)
    result.timings_ms.update(legs.timings_ms)
    _report(legs.late, legs.skipped, legs.failed, plan, result)
    # "two months ago": records filed before that time cannot tell of it (retrieve.when)
    when = None
    if plan.time_phrases:
        when = since(searched, session_start if session_start is not None else time.time())
    since_legs = None
    if when is not None:  # the same legs over what was filed since: found deeper there
        since_legs = run(when.start)
        result.timings_ms.update({f"{k} (since)": v for k, v in since_legs.timings_ms.items()})
    fates: dict[str, Fate] | None = {} if trace is not None else None
    picked = _pick(store, ns, legs, plan, session_id, terms, fates, since_legs)
    if picked:
        ids = [p.hit.id for p in picked]
        rendered = render(
            picked,
            store.index.edges_among(ns, ids),
            plan.budget,
            ids=store.settings.recall_show_ids,
        )
        result.block, result.items = rendered.block, rendered.items
    if trace is not None and fates is not None:
        shown = {i.id for i in result.items}
        trace.extend(
            replace(f, stage="injected" if f.id in shown else "chars") if f.stage == "picked" else f
            for f in fates.values()
        )
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
        result.messages = [*msgs, {"role": plan.role, "content": result.block}]
        result.injected = True
        store.note_access(ns, [i.id for i in result.items])
    return _done(result, started, plan)


def _report(
    late: list[str],
    skipped: Mapping[str, str],
    failed: Mapping[str, KredencError],
    plan: _Plan,
    result: RecallResult,
) -> None:
    """The legs that were late, skipped or failed, as warnings."""
    ms = f"{plan.time_budget_ms:g} ms"
    if "dense" in skipped:
        result.warnings.append(f"dense leg skipped: {skipped['dense']}")
    if "lexical" in late:
        result.timed_out = True
        result.warnings.append(f"lexical leg stopped at the {ms} time budget")
    if "dense" in failed:
        result.warnings.append(f"dense leg failed ({failed['dense']}); used what was ready")
    if "dense" in late:
        result.timed_out = True
        result.warnings.append(
            f"dense leg not ready within the {ms} time budget "
            "(the embedding goes on in the background); used what was ready"
        )


def _done(result: RecallResult, started: float, plan: _Plan | None = None) -> RecallResult:
    result.elapsed_ms = (time.perf_counter() - started) * 1000
    # (After a leg's timeout the overrun is the fusing of what was ready.) The first
    # recall of a store and namespace logs the startup line outside the budget.
    took = result.elapsed_ms - result.timings_ms.get("announce", 0.0)
    if plan is not None and took > plan.time_budget_ms and not result.timed_out:
        result.warnings.append(
            f"recall took {took:.1f} ms, over its {plan.time_budget_ms:g} ms budget"
        )
    for warning in result.warnings:
        log.warning("recall: %s", warning)
    return result


#: The stages a candidate can end at, in the order recall passes them (:class:`Fate`).
STAGES = (
    "floor",  # found by meaning alone, below ``recall_min_similarity``
    "unread",  # past the window of candidates read for the block (below the rank cut)
    "unreadable",  # its log record is damaged (a WARNING names salvage); no Fate: no id
    "own session",  # a turn of the session asking
    "assistant",  # an assistant turn, with ``recall_assistant_turns`` off
    "empty",  # no text
    "near copy",  # a near copy of one picked before it
    "items",  # eligible, but the budget's items were already picked
    "chars",  # picked, but its line did not fit the characters (or tokens) left
    "injected",  # in the block
)


@dataclass(frozen=True)
class Fate:
    """Where one candidate of the legs ended (:data:`STAGES`): ``rank`` is its place in
    the fused ranking (1 = best) before the relevance floor."""

    id: str
    rank: int
    stage: str
    meta: Mapping[str, Any]


def _fused(
    legs: Mapping[str, list[tuple[int, float]]],
    plan: _Plan,
    per_leg: dict[str, dict[int, LegScore]],
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """The legs fused (one leg: its own ranking and scores), and that less what was
    found by meaning alone below ``recall_min_similarity``; each leg's rank and score
    of a candidate go into ``per_leg`` (a candidate seen there before keeps its first)."""
    ranked = {name: leg for name, leg in legs.items() if leg}
    if not ranked:
        return [], []
    for name, leg in ranked.items():
        mine = per_leg.setdefault(name, {})
        for rank, (r, score) in enumerate(leg, start=1):
            mine.setdefault(r, LegScore(rank, score))
    if len(ranked) == 1:
        ((_, only),) = ranked.items()
        fused = list(only)  # one leg is the ranking, with its own scores
    else:
        fused = fuse(ranked, plan.params)
    # A record found by meaning alone must be similar enough to be worth the tokens.
    return fused, similar_enough(fused, ranked, plan.min_similarity)


def _pick(
    store: RecallStore,
    ns: str,
    legs: Mapping[str, list[tuple[int, float]]],
    plan: _Plan,
    session_id: str,
    terms: Sequence[Any] = (),
    fates: dict[str, Fate] | None = None,
    since_legs: Mapping[str, list[tuple[int, float]]] | None = None,
) -> list[Picked]:
    """The best records (at most the budget's item count), read from the log.
    ``fates`` (when given) receives each candidate's stage, keyed by record id.
    ``since_legs`` (the message names a time): the legs over the records filed since
    it, whose candidates go first; the others follow."""
    per_leg: dict[str, dict[int, LegScore]] = {}
    fused, floored = _fused(legs, plan, per_leg)
    if since_legs is not None:
        since_fused, since_floored = _fused(since_legs, plan, per_leg)
        fused = first_then(since_fused, fused, key=itemgetter(0))
        floored = first_then(since_floored, floored, key=itemgetter(0))
    if not per_leg or plan.budget.items == 0:
        return []
    rank_of = {r: n for n, (r, _) in enumerate(fused, start=1)}
    wanted = floored[: plan.budget.items * 4 + 4]
    stage: dict[int, str] = {}
    if fates is not None:
        kept = {r for r, _ in floored}
        read = {r for r, _ in wanted}
        stage = {
            r: "floor" if r not in kept else "unread" if r not in read else "items"
            for r, _ in fused
        }
        wanted_rows = [r for r, _ in fused]
    else:
        wanted_rows = [r for r, _ in wanted]
    places = store.index.resolve(ns, wanted_rows)
    out: list[Picked] = []
    seen: list[frozenset[str]] = []
    damaged: list[CorruptLog] = []
    for rowid, score in wanted:
        place = places.get(rowid)
        if place is None:
            continue
        if len(out) >= plan.budget.items:
            break  # (the rest keep "items")
        try:
            payload = store.haystack.read(place[1])
        except CorruptLog as exc:  # one damaged record costs its item, not the recall
            stage[rowid] = "unreadable"
            damaged.append(exc)
            continue
        hit = hit_from_payload(payload, place[1], score)
        if hit.type == "turn" and hit.meta.get("session") == session_id:
            stage[rowid] = "own session"
            continue  # the agent is not told what it just said
        if hit.type == "turn" and hit.meta.get("role") == "assistant" and not plan.assistant_turns:
            stage[rowid] = "assistant"
            continue  # nor fed its own answers back
        if not hit.text.strip():
            stage[rowid] = "empty"
            continue
        words = _words(hit.text)
        if any(near_copy(words, w) for w in seen):
            stage[rowid] = "near copy"
            continue  # a near copy of one already picked
        seen.append(words)
        stage[rowid] = "picked"
        hit.legs = {name: leg[rowid] for name, leg in per_leg.items() if rowid in leg}
        shown = snippet(hit.text, terms, plan.budget.snippet_chars)
        out.append(Picked(hit, float(score), shown if shown != hit.text else None))
    if damaged:
        log.warning("recall left out %d damaged record(s): %s", len(damaged), damaged[0])
    if fates is not None:
        for rowid, _ in fused:
            place = places.get(rowid)
            if place is None:
                continue
            try:
                payload = store.haystack.read(place[1])
            except CorruptLog:
                continue
            rid = str(payload["id"])
            fates[rid] = Fate(rid, rank_of[rowid], stage[rowid], dict(payload.get("meta") or {}))
    return out
