"""``kredenc eval answer``: the answer loop on questions with expected facts.

A case file is JSON Lines, one case per line::

    {"id": "heads", "document": "pdf/attention_is_all_you_need_1706.03762v7.pdf",
     "turns": ["How many attention heads does the Transformer use?"],
     "answer": ["\\\\b8\\\\b"], "cited": ["h\\\\s*=\\\\s*8"], "context_sufficient": true}

``document`` is a path under the ``--docs`` folder, ingested into a namespace of the
case's own (in a fresh store); ``turns`` are asked in order in one session, and the
checks apply to the last turn's answer. Checks (regular expressions are matched case-insensitively,
anywhere):

* ``answer``: each must match the answer's text;
* ``cited``: each must match the text of a citation whose marker ``[n]`` the answer
  carries (the passage stating the fact is cited, not merely retrieved);
* ``rewritten``: each must match the standalone query the loop searched with;
* ``forbidden``: none may match the answer's text (no fabricated answer);
* ``abstain``: true means the answer has no citations;
* ``retrieved``: whether the loop retrieved at all;
* ``context_sufficient``: the judge's verdict must equal it;
* ``max_confidence`` / ``min_confidence``: bounds on the judge's confidence (0-100).

The shipped file (:data:`DEFAULT_CASES`) asks about the Attention paper; its four
required cases are the issue's, the others other facts of the paper, each checked by
hand against the PDF's text.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.eval.datasets import read_text
from kredenc.eval.metrics import bootstrap_ci
from kredenc.loop.answer import Answer

__all__ = [
    "CHECKS",
    "DEFAULT_CASES",
    "AnswerCase",
    "CaseResult",
    "check_answer",
    "default_cases_path",
    "load_answer_cases",
    "run_answer_eval",
    "summarise",
]

#: The shipped case file, inside the package (``kredenc/data/eval``).
DEFAULT_CASES = "attention_answers.jsonl"

CHECKS = frozenset(
    {
        "answer",
        "cited",
        "rewritten",
        "forbidden",
        "abstain",
        "retrieved",
        "context_sufficient",
        "max_confidence",
        "min_confidence",
    }
)
_PATTERN_CHECKS = ("answer", "cited", "rewritten", "forbidden")
_BOOL_CHECKS = ("abstain", "retrieved", "context_sufficient")
_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


@dataclass(frozen=True)
class AnswerCase:
    id: str
    document: str
    turns: tuple[str, ...]
    expect: dict[str, Any] = field(default_factory=dict)


@dataclass
class CaseResult:
    id: str
    passed: bool
    failures: list[str]
    answer: Answer | None
    ms: float

    def to_json(self) -> dict[str, Any]:
        a = self.answer
        ev = a.evaluation if a else None
        return {
            "id": self.id,
            "passed": self.passed,
            "failures": self.failures,
            "text": a.text if a else "",
            "standalone_query": a.standalone_query if a else "",
            "citations": [{"n": c.n, "id": c.id, "page": c.page} for c in a.citations] if a else [],
            "confidence_score": ev.confidence_score if ev else None,
            "context_sufficient": ev.context_sufficient if ev else None,
            "iterations": a.iterations if a else 0,
            "ms": round(self.ms, 1),
        }


def default_cases_path() -> Path:
    """The shipped case file's path."""
    return Path(str(resources.files("kredenc.data").joinpath("eval", DEFAULT_CASES)))


def _bad(path: Path, line: int, what: str) -> InvalidInput:
    return InvalidInput(
        f"{path}:{line}: {what}",
        "each line is a JSON object with id, document, turns and checks "
        f"({', '.join(sorted(CHECKS))}); see kredenc.eval.answer",
    )


def load_answer_cases(path: str | Path) -> list[AnswerCase]:
    """The cases of a case file, checked (a bad line is an error naming the line)."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInput(f"no case file at {path}", "give a JSON Lines file of cases")
    cases: list[AnswerCase] = []
    seen: set[str] = set()
    for n, raw in enumerate(read_text(path).splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _bad(path, n, f"not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise _bad(path, n, "not a JSON object")
        cid, doc, turns = obj.get("id"), obj.get("document"), obj.get("turns")
        if not isinstance(cid, str) or not cid or cid in seen:
            raise _bad(path, n, "id must be a new non-empty string")
        if not isinstance(doc, str) or not doc:
            raise _bad(path, n, "document must be a path under --docs")
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
            raise _bad(path, n, "turns must be a non-empty list of strings")
        expect = {k: v for k, v in obj.items() if k not in ("id", "document", "turns")}
        unknown = set(expect) - CHECKS
        if unknown:
            raise _bad(path, n, f"unknown check {sorted(unknown)[0]!r}")
        for key in _PATTERN_CHECKS:
            patterns = expect.get(key, [])
            if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
                raise _bad(path, n, f"{key} must be a list of regular expressions")
            for p in patterns:
                try:
                    re.compile(p)
                except re.error as exc:
                    raise _bad(path, n, f"{key}: bad regular expression {p!r} ({exc})") from None
        for key in _BOOL_CHECKS:
            if key in expect and not isinstance(expect[key], bool):
                raise _bad(path, n, f"{key} must be true or false")
        for key in ("max_confidence", "min_confidence"):
            if key in expect and not isinstance(expect[key], int):
                raise _bad(path, n, f"{key} must be an integer 0-100")
        seen.add(cid)
        cases.append(AnswerCase(cid, doc, tuple(turns), expect))
    if not cases:
        raise InvalidInput(f"{path} holds no cases", "add one JSON object per line")
    return cases


def _found(pattern: str, text: str) -> bool:
    return re.search(pattern, text, re.IGNORECASE) is not None


def check_answer(case: AnswerCase, answer: Answer) -> list[str]:
    """The checks of ``case`` that ``answer`` fails, each said in a few words."""
    e = case.expect
    out: list[str] = []
    text = answer.text
    for p in e.get("answer", []):
        if not _found(p, text):
            out.append(f"answer lacks /{p}/")
    marked = {int(n) for group in _MARKER.findall(text) for n in group.split(",")}
    cited = [c for c in answer.citations if c.n in marked]
    for p in e.get("cited", []):
        if not any(_found(p, c.text) for c in cited):
            out.append(f"no cited passage has /{p}/")
    for p in e.get("rewritten", []):
        if not _found(p, answer.standalone_query):
            out.append(f"standalone query {answer.standalone_query!r} lacks /{p}/")
    for p in e.get("forbidden", []):
        if _found(p, text):
            out.append(f"answer has forbidden /{p}/")
    if "abstain" in e and e["abstain"] != (not answer.citations):
        out.append("cites sources" if e["abstain"] else "cites nothing")
    if "retrieved" in e and e["retrieved"] != answer.retrieved:
        out.append(f"retrieved={answer.retrieved}")
    ev = answer.evaluation
    if any(k in e for k in ("context_sufficient", "max_confidence", "min_confidence")):
        if ev is None:
            out.append("no evaluation")
        else:
            if "context_sufficient" in e and ev.context_sufficient != e["context_sufficient"]:
                out.append(f"context_sufficient={ev.context_sufficient}")
            if "max_confidence" in e and ev.confidence_score > e["max_confidence"]:
                out.append(f"confidence {ev.confidence_score} > {e['max_confidence']}")
            if "min_confidence" in e and ev.confidence_score < e["min_confidence"]:
                out.append(f"confidence {ev.confidence_score} < {e['min_confidence']}")
    return out


def documents(cases: Sequence[AnswerCase], docs: str | Path) -> list[Path]:
    """The distinct documents the cases need, under ``docs`` (all must exist)."""
    root = Path(docs)
    paths = list(dict.fromkeys(root / c.document for c in cases))
    absent = [p for p in paths if not p.is_file()]
    if absent:
        raise InvalidInput(
            f"document {absent[0]} not found", "point --docs at the folder the cases name"
        )
    return paths


def run_answer_eval(
    kb: Kredenc,
    cases: Sequence[AnswerCase],
    docs: str | Path,
    *,
    on_case: Callable[[CaseResult], None] | None = None,
    **options: Any,
) -> list[CaseResult]:
    """Each case in a namespace of its own (``answer-<run>-<n>``) holding its document,
    its turns asked in order in one session; the last answer checked. A namespace per
    case (and per run: ``<run>`` is new each time) keeps one case's answers, filed as
    turns, out of another's retrieval and out of a later run's sessions, so a case's
    result depends neither on the cases before it nor on an earlier run in the same
    store. ``options`` go to ``Kredenc.ask``."""
    documents(cases, docs)  # every document there before the first case runs
    run = uuid.uuid4().hex[:8]
    results: list[CaseResult] = []
    for n, case in enumerate(cases, 1):
        view = kb.scoped(f"answer-{run}-{n}")
        view.ingest(Path(docs) / case.document)
        t0 = time.perf_counter()
        answer: Answer | None = None
        for turn in case.turns:
            answer = view.ask(turn, session_id=f"eval-{run}-{n}", **options)
        ms = (time.perf_counter() - t0) * 1000
        if answer is None:
            raise InvalidInput(f"case {case.id} has no turns", "give it at least one question")
        failures = check_answer(case, answer)
        result = CaseResult(case.id, not failures, failures, answer, ms)
        results.append(result)
        if on_case is not None:
            on_case(result)
    return results


def summarise(results: Sequence[CaseResult]) -> dict[str, Any]:
    """Cases passed, the pass rate and its 95 % bootstrap interval (over cases)."""
    n = len(results)
    passed = [1.0 if r.passed else 0.0 for r in results]

    def rate(idx: Sequence[int]) -> float:
        return sum(passed[i] for i in idx) / len(idx) if idx else 0.0

    low, high = bootstrap_ci(rate, n) if n else (0.0, 0.0)
    return {
        "cases": n,
        "passed": int(sum(passed)),
        "pass_rate": rate(range(n)),
        "pass_rate_ci95": [low, high],
        "failed": [r.id for r in results if not r.passed],
    }
