"""``kredenc eval judge``: a judge on labelled answers (RAGTruth QA, HaluEval QA).

Formats, told apart by the first record's fields:

* **RAGTruth QA** (``question``, ``context``, ``response``, ``hallucinated``,
  ``labels``): one judged response per record; the context's ``passage N:`` parts are
  the contexts; the labelled spans are the response's hallucinated characters.
* **HaluEval QA** (``knowledge``, ``question``, ``right_answer``,
  ``hallucinated_answer``): each record judged twice, once per answer, with the
  knowledge as the only context.

Scores, with "hallucinated" the positive class: accuracy, precision, recall and F1 of
``hallucination_detected``; AUROC of ``100 - confidence_score``; for RAGTruth the
character overlap of the unsupported sentences with the labelled spans (micro
precision and recall). Every figure has a 95 % bootstrap interval, resampling whole
sources (RAGTruth) or records (HaluEval). Two floors are measured on the same items:
answer length in words, and one minus lexical overlap (the share of the answer's
``\\w+`` tokens, repeats counted, that occur in the contexts).

The run file has one JSON line per judged answer:
``{"i": <0-based line index>, "label": "right"|"hallucinated", "confidence_score",
"hallucination_detected"}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kredenc.errors import InvalidInput
from kredenc.eval.datasets import no_records, open_text
from kredenc.eval.metrics import auroc, bootstrap_ci, classification
from kredenc.grounding.base import Evaluation, Judge

__all__ = [
    "FORMATS",
    "JudgeItem",
    "JudgeRun",
    "floors",
    "load_judge_file",
    "read_judge_run",
    "run_judge",
    "score_judge",
    "write_judge_run",
]

FORMATS = ("ragtruth", "halueval")
_RAGTRUTH = frozenset({"question", "context", "response", "hallucinated"})
_HALUEVAL = frozenset({"knowledge", "question", "right_answer", "hallucinated_answer"})
_PASSAGE = re.compile(r"(?:^|\n\s*\n)passage \d+:", re.IGNORECASE)
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class JudgeItem:
    """One answer to judge: its line, label, texts, source group and labelled spans."""

    i: int
    hallucinated: bool
    question: str
    answer: str
    contexts: tuple[str, ...]
    group: str
    spans: tuple[tuple[int, int], ...] = ()

    @property
    def label(self) -> str:
        return "hallucinated" if self.hallucinated else "right"


def _passages(context: str) -> tuple[str, ...]:
    parts = [p.strip() for p in _PASSAGE.split(context)]
    return tuple(p for p in parts if p) or (context,)


def _detect(row: dict[str, Any], where: str) -> str:
    keys = set(row)
    if keys >= _RAGTRUTH:
        return "ragtruth"
    if keys >= _HALUEVAL:
        return "halueval"
    raise InvalidInput(
        f"{where}: not a judge record (fields: {', '.join(sorted(keys)) or 'none'})",
        "pass RAGTruth QA (question, context, response, hallucinated) or HaluEval QA "
        "(knowledge, question, right_answer, hallucinated_answer) JSON lines",
    )


def _text(row: dict[str, Any], name: str, where: str) -> str:
    value = row.get(name)
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: field {name!r} must be a string", "fix the record")
    return value


def load_judge_file(path: str | Path) -> tuple[str, list[JudgeItem]]:
    """(format, items) of a RAGTruth QA or HaluEval QA JSON-lines file."""
    p = Path(path)
    if not p.is_file():
        raise InvalidInput(f"{p}: no such file", "pass a RAGTruth or HaluEval QA .jsonl file")
    fmt = ""
    items: list[JudgeItem] = []
    with open_text(p) as f:
        for n, line in enumerate(f):
            if not line.strip():
                continue
            where = f"{p}:{n + 1}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise InvalidInput(f"{where}: not JSON ({e.msg})", "pass JSON lines") from None
            if not isinstance(row, dict):
                raise InvalidInput(f"{where}: not a JSON object", "pass one object per line")
            kind = _detect(row, where)
            if fmt and kind != fmt:
                raise InvalidInput(f"{where}: a {kind} record in a {fmt} file", "one format a file")
            fmt = kind
            if kind == "ragtruth":
                spans = tuple(
                    (int(s["start"]), int(s["end"]))
                    for s in row.get("labels") or []
                    if isinstance(s, dict) and "start" in s and "end" in s
                )
                items.append(
                    JudgeItem(
                        n,
                        bool(row["hallucinated"]),
                        _text(row, "question", where),
                        _text(row, "response", where),
                        _passages(_text(row, "context", where)),
                        str(row.get("source_id", n)),
                        spans,
                    )
                )
            else:
                knowledge = (_text(row, "knowledge", where),)
                question = _text(row, "question", where)
                for answer, bad in (("right_answer", False), ("hallucinated_answer", True)):
                    items.append(
                        JudgeItem(n, bad, question, _text(row, answer, where), knowledge, str(n))
                    )
    if not items:
        raise no_records(p, "records")
    return fmt, items


@dataclass
class JudgeRun:
    """The judged items, in order, with their evaluations."""

    fmt: str
    items: list[JudgeItem]
    evaluations: list[Evaluation]


def run_judge(
    judge: Judge,
    fmt: str,
    items: Sequence[JudgeItem],
    progress: Callable[[int, int], None] | None = None,
) -> JudgeRun:
    evaluations = []
    for n, item in enumerate(items, 1):
        evaluations.append(judge.judge(item.question, item.answer, item.contexts))
        if progress is not None:
            progress(n, len(items))
    return JudgeRun(fmt, list(items), evaluations)


def write_judge_run(path: str | Path, run: JudgeRun) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8") as f:
        for item, ev in zip(run.items, run.evaluations, strict=True):
            row = {
                "i": item.i,
                "label": item.label,
                "confidence_score": ev.confidence_score,
                "hallucination_detected": ev.hallucination_detected,
            }
            f.write(json.dumps(row) + "\n")
    return p


def read_judge_run(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a judge run file (each checked for its four fields)."""
    rows = []
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                ok = isinstance(row["i"], int) and row["label"] in ("right", "hallucinated")
                ok = ok and isinstance(row["confidence_score"], int)
                ok = ok and isinstance(row["hallucination_detected"], bool)
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise InvalidInput(f"{path}:{n}: not a judge run line ({e})") from None
            if not ok:
                raise InvalidInput(f"{path}:{n}: not a judge run line")
            rows.append(row)
    return rows


# -- scores ---------------------------------------------------------------------


def _overlap_floor(item: JudgeItem) -> float:
    ctx = {w.lower() for c in item.contexts for w in _WORD.findall(c)}
    words = [w.lower() for w in _WORD.findall(item.answer)]
    return 1.0 - (sum(1 for w in words if w in ctx) / len(words) if words else 0.0)


def floors(items: Sequence[JudgeItem]) -> dict[str, list[float]]:
    """The floors' scores per item: answer length in words, and 1 - lexical overlap."""
    return {
        "length": [float(len(_WORD.findall(it.answer))) for it in items],
        "one_minus_overlap": [_overlap_floor(it) for it in items],
    }


def _spans_of(ev: Evaluation) -> list[tuple[int, int]]:
    if not ev.hallucination_detected:
        return []
    return [(s.start, s.end) for s in ev.sentences if not s.supported]


def _chars(spans: Sequence[tuple[int, int]]) -> set[int]:
    return {c for a, b in spans for c in range(a, b)}


def _with_ci(
    value: float,
    stat: Callable[[Sequence[int]], float],
    n: int,
    groups: Sequence[str],
    rounds: int,
) -> dict[str, Any]:
    lo, hi = bootstrap_ci(stat, n, rounds=rounds, groups=groups)
    return {"value": round(value, 4), "ci95": [round(lo, 4), round(hi, 4)]}


def score_judge(
    items: Sequence[JudgeItem],
    confidence: Sequence[int],
    detected: Sequence[bool],
    *,
    unsupported_spans: Sequence[Sequence[tuple[int, int]]] | None = None,
    rounds: int = 1000,
) -> dict[str, Any]:
    """The metrics (each ``{"value", "ci95"}``), the floors' AUROCs and the counts."""
    labels = [it.hallucinated for it in items]
    groups = [it.group for it in items]
    risk = [100.0 - c for c in confidence]
    n = len(items)

    def pick(xs: Sequence[Any], idx: Sequence[int]) -> list[Any]:
        return [xs[i] for i in idx]

    out: dict[str, Any] = {"n": n, "hallucinated": sum(labels)}
    full = classification(labels, detected)

    def rate(name: str) -> Callable[[Sequence[int]], float]:
        return lambda idx: classification(pick(labels, idx), pick(detected, idx))[name]

    def area(values: Sequence[float]) -> Callable[[Sequence[int]], float]:
        return lambda idx: auroc(pick(labels, idx), pick(values, idx))

    for name in ("accuracy", "precision", "recall", "f1"):
        out[name] = _with_ci(full[name], rate(name), n, groups, rounds)
    out["auroc"] = _with_ci(auroc(labels, risk), area(risk), n, groups, rounds)
    base: dict[str, Any] = {}
    for name, values in floors(items).items():
        base[f"auroc_{name}"] = _with_ci(auroc(labels, values), area(values), n, groups, rounds)
    out["floors"] = base
    if unsupported_spans is not None and any(it.spans for it in items):
        pred = [_chars(s) for s in unsupported_spans]
        gold = [_chars(it.spans) for it in items]

        def span_pr(idx: Sequence[int], which: str) -> float:
            hit = sum(len(pred[i] & gold[i]) for i in idx)
            denom = sum(len((pred if which == "precision" else gold)[i]) for i in idx)
            return hit / denom if denom else 0.0

        def span(which: str) -> Callable[[Sequence[int]], float]:
            return lambda idx: span_pr(idx, which)

        for which in ("precision", "recall"):
            out[f"span_{which}"] = _with_ci(
                span_pr(range(n), which), span(which), n, groups, rounds
            )
    return out


def score_run(run: JudgeRun, *, rounds: int = 1000) -> dict[str, Any]:
    """:func:`score_judge` of a live run (spans from the unsupported sentences)."""
    return {
        "dataset": run.fmt,
        "metrics": score_judge(
            run.items,
            [e.confidence_score for e in run.evaluations],
            [e.hallucination_detected for e in run.evaluations],
            unsupported_spans=[_spans_of(e) for e in run.evaluations],
            rounds=rounds,
        ),
    }
