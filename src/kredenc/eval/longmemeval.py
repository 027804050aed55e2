"""LongMemEval retrieval, reproducing the official protocol of xiaowu0162/LongMemEval.

Every question has its own haystack, so it is its own group (``reset()`` + ``index()``
per question). What follows the official code, and where:

- Corpus (``src/retrieval/run_retrieval.py``, ``process_item_flat_index``):
  - session granularity: one document per session, text = the session's **user** turns'
    ``content`` joined with one space (assistant turns are left out); id = the session
    id. An ``answer*`` session none of whose user turns has ``has_answer`` is relabelled
    ``noans*`` and so is not gold.
  - turn granularity: one document per **user** turn, id = ``<session_id>_<i + 1>``
    where i is the turn's index among all turns of the session (assistant turns
    included, so user turns are usually odd). A turn of an ``answer*`` session without
    ``has_answer`` is relabelled ``noans*``.
- Gold (``batch_get_retrieved_context_and_eval``): the labelled corpus ids that contain
  ``"answer"`` (not ``answer_session_ids`` itself).
- Metrics (``src/retrieval/eval_utils.py``): ``evaluate_retrieval`` gives
  recall_any@k (some gold id in the top k), recall_all@k (every gold id in the top k)
  and ``ndcg`` = ndcg_any@k with binary relevance over corpus positions and the repo's
  ``dcg``, which does **not** discount rank 2 (rel_1 + sum_{i>=2} rel_i / log2(i)); the
  ideal DCG is taken over the whole corpus. At turn granularity the session-level
  figures come from ``evaluate_retrieval_turn2session`` (turn ids cut at the last ``_``,
  k widened until the top covers k distinct sessions); they are under ``turn2session``.
  ks = 1, 3, 5, 10, 30, 50.
- Averaging (``main`` of run_retrieval.py at commit b60a5b7): questions whose id holds
  ``_abs`` (abstention) are left out, and so are questions with no user turn flagged
  ``has_answer`` (their evidence is only in assistant turns). Here such questions are
  not even searched; both are counted.

The pooled setting (:func:`load_longmemeval_pooled`, ``kredenc eval longmemeval
--pooled``; not in the official code): every session of every question in the file (the
skipped ones' too) in one corpus, deduplicated by session id, each scored question
searched against all of them; its gold is its own haystack's labelled ``answer``
sessions. Session granularity only; recall_any@k and recall_all@k with 95 % bootstrap
intervals over questions (``ci95``). A real user has one long history, not a fresh
50-session haystack per question.

Departures, forced by the id-based retriever protocol: a session id that occurs twice
in one haystack (it happens, with identical content) is indexed once and counted
(``duplicate_ids``); ranked ids unknown to the haystack are ignored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from kredenc.errors import InvalidInput
from kredenc.eval.datasets import (
    EvalDoc,
    EvalQuery,
    Group,
    Metrics,
    Ranked,
    average,
    expect_list,
    no_records,
    read_json,
)
from kredenc.eval.metrics import all_at_k, any_at_k, dedupe, mean_ci

KS = (1, 3, 5, 10, 30, 50)
Granularity = Literal["session", "turn"]


def official_dcg(relevances: Sequence[float], k: int) -> float:
    """``eval_utils.dcg``: rel_1 + sum over i >= 2 of rel_i / log2(i)."""
    rels = list(relevances)[:k]
    if not rels:
        return 0.0
    return rels[0] + sum(r / math.log2(i + 1) for i, r in enumerate(rels[1:], start=1))


def official_ndcg(
    rankings: Sequence[int], correct: set[str], corpus_ids: Sequence[str], k: int
) -> float:
    """``eval_utils.ndcg``: rankings are corpus positions, best first."""
    relevances = [1.0 if cid in correct else 0.0 for cid in corpus_ids]
    actual = official_dcg([relevances[i] for i in rankings[:k]], k)
    ideal = official_dcg(sorted(relevances, reverse=True), k)
    return actual / ideal if ideal else 0.0


def evaluate_retrieval(
    rankings: Sequence[int], correct: set[str], corpus_ids: Sequence[str], k: int
) -> tuple[float, float, float]:
    """``eval_utils.evaluate_retrieval``: (recall_any, recall_all, ndcg_any) at k."""
    recalled = {corpus_ids[i] for i in rankings[:k]}
    recall_any = float(any(d in recalled for d in correct))
    recall_all = float(all(d in recalled for d in correct))
    return recall_any, recall_all, official_ndcg(rankings, correct, corpus_ids, k)


def strip_turn_id(doc_id: str) -> str:
    return "_".join(doc_id.split("_")[:-1])


def evaluate_retrieval_turn2session(
    rankings: Sequence[int], correct: set[str], corpus_ids: Sequence[str], k: int
) -> tuple[float, float, float]:
    """``eval_utils.evaluate_retrieval_turn2session``."""
    correct_s = {strip_turn_id(x) for x in correct}
    corpus_s = [strip_turn_id(x) for x in corpus_ids]
    eff = k
    unique = {corpus_s[i] for i in rankings[:eff]}
    while eff <= len(corpus_s) and len(unique) < k:
        eff += 1
        unique = {corpus_s[i] for i in rankings[:eff]}
    return evaluate_retrieval(rankings, correct_s, corpus_s, eff)


@dataclass
class Haystack:
    """One question's corpus: documents and their official (labelled) ids, aligned."""

    docs: list[EvalDoc]
    labels: list[str]
    duplicates: int = 0

    def positions(self, ranked: Sequence[str]) -> list[int]:
        where = {d.id: i for i, d in enumerate(self.docs)}
        return [where[r] for r in dedupe(ranked) if r in where]


def date_seconds(date: str) -> float | None:
    """A LongMemEval date (``2023/03/11 (Sat) 05:28``) as Unix seconds (read as UTC);
    None when it is empty or not of that form."""
    day, _, rest = str(date).strip().partition(" (")
    clock = rest.partition(") ")[2]
    try:
        when = datetime.strptime(f"{day} {clock or '00:00'}", "%Y/%m/%d %H:%M")
    except ValueError:
        return None
    return when.replace(tzinfo=UTC).timestamp()


def asked_at(entry: dict[str, Any]) -> float | None:
    """When a question is asked (Unix seconds): its date, or a minute after its last
    session when that is later (2 of the 66 dev questions have sessions dated later on
    the question's day: the data's times within a day are not meaningful)."""
    asked = date_seconds(str(entry.get("question_date", "")))
    times = [t for d in entry.get("haystack_dates") or () if (t := date_seconds(d)) is not None]
    if asked is None or not times:
        return asked
    return max(asked, max(times) + 60.0)


def _user_has_answer(turn: dict[str, Any]) -> bool:
    return turn.get("role") == "user" and bool(turn.get("has_answer"))


def build_haystack(entry: dict[str, Any], granularity: Granularity) -> Haystack:
    """``process_item_flat_index`` over every session of one question."""
    hay = Haystack(docs=[], labels=[])
    seen: set[str] = set()
    sessions = zip(
        entry["haystack_session_ids"],
        entry["haystack_sessions"],
        entry.get("haystack_dates") or [""] * len(entry["haystack_session_ids"]),
        strict=True,
    )
    for sid, turns, date in sessions:
        items: list[tuple[str, str, str]] = []  # (doc id, label, text)
        if granularity == "session":
            text = " ".join(str(t["content"]) for t in turns if t.get("role") == "user")
            label = sid
            if "answer" in sid and not any(_user_has_answer(t) for t in turns):
                label = sid.replace("answer", "noans")
            items.append((sid, label, text))
        else:
            for i, t in enumerate(turns):
                if t.get("role") != "user":
                    continue
                doc_id = f"{sid}_{i + 1}"
                label = doc_id
                if "answer" in sid and not t.get("has_answer"):
                    label = doc_id.replace("answer", "noans")
                items.append((doc_id, label, str(t["content"])))
        for doc_id, label, text in items:
            if doc_id in seen:
                hay.duplicates += 1
                continue
            seen.add(doc_id)
            meta = {"date": date, "session_id": sid, "time": date_seconds(date)}
            hay.docs.append(EvalDoc(id=doc_id, text=text, meta=meta))
            hay.labels.append(label)
    return hay


@dataclass
class LongMemEvalDataset:
    granularity: Granularity = "session"
    entries: list[dict[str, Any]] = field(default_factory=list)
    haystacks: dict[str, Haystack] = field(default_factory=dict)
    skipped_abstention: int = 0
    skipped_no_target: int = 0
    ks: tuple[int, ...] = KS
    name: str = "longmemeval"

    def groups(self) -> Iterable[Group]:
        for e in self.entries:
            qid = str(e["question_id"])
            hay = self.haystacks[qid]
            k = max(self.ks) if self.granularity == "session" else len(hay.docs)
            query = EvalQuery(
                qid=qid,
                text=str(e["question"]),
                meta={
                    "question_type": e.get("question_type", ""),
                    "question_date": e.get("question_date", ""),
                    "asked_at": asked_at(e),
                },
            )
            yield Group(docs=hay.docs, queries=[query], k=max(k, 1))

    def _row(self, qid: str, ranked: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]:
        hay = self.haystacks[qid]
        rankings = hay.positions(ranked)
        correct = {lab for lab in hay.labels if "answer" in lab}
        row: dict[str, float] = {}
        sess: dict[str, float] = {}
        for k in self.ks:
            a, b, c = evaluate_retrieval(rankings, correct, hay.labels, k)
            row.update({f"recall_any@{k}": a, f"recall_all@{k}": b, f"ndcg_any@{k}": c})
            if self.granularity == "turn":
                a, b, c = evaluate_retrieval_turn2session(rankings, correct, hay.labels, k)
                sess.update({f"recall_any@{k}": a, f"recall_all@{k}": b, f"ndcg_any@{k}": c})
        return row, sess

    def score(self, ranked: Ranked) -> Metrics:
        keys = [f"{m}@{k}" for m in ("recall_any", "recall_all", "ndcg_any") for k in self.ks]
        rows: list[dict[str, float]] = []
        sess_rows: list[dict[str, float]] = []
        by_type: dict[str, list[dict[str, float]]] = {}
        for e in self.entries:
            qid = str(e["question_id"])
            row, sess = self._row(qid, list(ranked.get(qid, ())))
            rows.append(row)
            sess_rows.append(sess)
            by_type.setdefault(str(e.get("question_type", "")), []).append(row)
        out: Metrics = {
            "granularity": self.granularity,
            "n_questions": len(rows),
            "skipped_abstention": self.skipped_abstention,
            "skipped_no_target": self.skipped_no_target,
            "duplicate_ids": sum(h.duplicates for h in self.haystacks.values()),
            **average(rows, keys),
            "by_type": {t: {"n": len(r), **average(r, keys)} for t, r in sorted(by_type.items())},
        }
        if self.granularity == "turn":
            out["turn2session"] = average(sess_rows, keys)
        return out


def load_longmemeval(
    path: str | Path, granularity: Granularity = "session", ks: Sequence[int] = KS
) -> LongMemEvalDataset:
    """Read a LongMemEval file (a JSON list, plain or .gz) for retrieval evaluation."""
    if granularity not in ("session", "turn"):
        raise InvalidInput(f"granularity must be 'session' or 'turn', not {granularity!r}")
    data = LongMemEvalDataset(granularity=granularity, ks=tuple(ks))
    for i, e in enumerate(expect_list(read_json(path), str(path))):
        if not isinstance(e, dict) or "haystack_sessions" not in e or "question_id" not in e:
            raise InvalidInput(f"{path}: record {i} is not a LongMemEval question")
        qid = str(e["question_id"])
        if "_abs" in qid:
            data.skipped_abstention += 1
            continue
        if not any(_user_has_answer(t) for s in e["haystack_sessions"] for t in s):
            data.skipped_no_target += 1
            continue
        try:
            data.haystacks[qid] = build_haystack(e, granularity)
        except (KeyError, ValueError) as err:
            raise InvalidInput(f"{path}: question {qid}: malformed haystack ({err})") from err
        data.entries.append(e)
    if not data.entries:
        raise no_records(path, _no_questions(data.skipped_abstention, data.skipped_no_target))
    return data


def _no_questions(abstention: int, no_target: int) -> str:
    """What a LongMemEval file without a question to evaluate lacks, for the error."""
    if not abstention and not no_target:
        return "questions"
    return (
        f"questions to evaluate ({abstention} abstention, {no_target} with no answer turn, skipped)"
    )


@dataclass
class PooledLongMemEval:
    """Every question's sessions in one corpus (the module doc, "The pooled setting")."""

    docs: list[EvalDoc] = field(default_factory=list)
    queries: list[EvalQuery] = field(default_factory=list)
    gold: dict[str, set[str]] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    duplicate_sessions: int = 0  # a session id met again (kept once)
    differing_duplicates: int = 0  # of those, with other text than the kept one
    skipped_abstention: int = 0
    skipped_no_target: int = 0
    ks: tuple[int, ...] = KS
    name: str = "longmemeval-pooled"

    def groups(self) -> Iterable[Group]:
        yield Group(docs=self.docs, queries=self.queries, k=max(self.ks))

    def score(self, ranked: Ranked) -> Metrics:
        rows: list[dict[str, float]] = []
        by_type: dict[str, list[dict[str, float]]] = {}
        for q in self.queries:
            got, gold = list(ranked.get(q.qid, ())), self.gold[q.qid]
            row: dict[str, float] = {}
            for k in self.ks:
                row[f"recall_any@{k}"] = any_at_k(got, gold, k)
                row[f"recall_all@{k}"] = all_at_k(got, gold, k)
            rows.append(row)
            by_type.setdefault(self.types[q.qid], []).append(row)
        keys = [f"{m}@{k}" for m in ("recall_any", "recall_all") for k in self.ks]
        return {
            "granularity": "session",
            "pooled": True,
            "n_questions": len(rows),
            "n_sessions": len(self.docs),
            "duplicate_sessions": self.duplicate_sessions,
            "differing_duplicates": self.differing_duplicates,
            "skipped_abstention": self.skipped_abstention,
            "skipped_no_target": self.skipped_no_target,
            **average(rows, keys),
            "ci95": {key: mean_ci([r[key] for r in rows]) for key in keys},
            "by_type": {t: {"n": len(r), **average(r, keys)} for t, r in sorted(by_type.items())},
        }


def load_longmemeval_pooled(path: str | Path, ks: Sequence[int] = KS) -> PooledLongMemEval:
    """Read a LongMemEval file into one pooled session corpus (session granularity)."""
    data = PooledLongMemEval(ks=tuple(ks))
    kept: dict[str, str] = {}
    for i, e in enumerate(expect_list(read_json(path), str(path))):
        if not isinstance(e, dict) or "haystack_sessions" not in e or "question_id" not in e:
            raise InvalidInput(f"{path}: record {i} is not a LongMemEval question")
        qid = str(e["question_id"])
        try:
            hay = build_haystack(e, "session")
        except (KeyError, ValueError) as err:
            raise InvalidInput(f"{path}: question {qid}: malformed haystack ({err})") from err
        data.duplicate_sessions += hay.duplicates
        for doc in hay.docs:
            if doc.id in kept:
                data.duplicate_sessions += 1
                data.differing_duplicates += kept[doc.id] != doc.text
                continue
            kept[doc.id] = doc.text
            data.docs.append(doc)
        if "_abs" in qid:
            data.skipped_abstention += 1
            continue
        if not any(_user_has_answer(t) for s in e["haystack_sessions"] for t in s):
            data.skipped_no_target += 1
            continue
        data.gold[qid] = {
            d.id for d, lab in zip(hay.docs, hay.labels, strict=True) if "answer" in lab
        }
        data.types[qid] = str(e.get("question_type", ""))
        data.queries.append(
            EvalQuery(
                qid=qid,
                text=str(e["question"]),
                meta={"question_type": data.types[qid], "asked_at": asked_at(e)},
            )
        )
    if not data.queries:
        raise no_records(path, _no_questions(data.skipped_abstention, data.skipped_no_target))
    return data
