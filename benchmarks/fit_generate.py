"""Fit the extractive generator's parameters (``ExtractParams``) on HotpotQA dev.

Each question's *kept chunks* are its two gold paragraphs and two of its distractors
(the grader lets some noise through); the answer is right when the picked sentences
hold the gold answer string (SQuAD-normalised). The *unanswerable* case is the same
question over the next question's gold paragraphs and distractors: the right answer
there is NOT_FOUND. Yes/no questions are left out (no sentence holds "yes").

Objective: the mean of the answer rate (answerable: the *best* sentence holds the
answer, so the fit ranks, and cannot win by saying more) and the abstention rate
(unanswerable). ``keep_ratio`` (how many more sentences join the best) is not fitted:
a longer answer always holds the answer more often, so this metric cannot choose it;
it stays 0.8 and the share with the answer in the whole answer is reported beside.
5-fold cross-validation by question: the grid's best on four folds is
scored on the fifth; the held-out figures are reported with 95 % bootstrap intervals,
and the defaults are the grid's best on all questions.

    PYTHONPATH=src python benchmarks/fit_generate.py [--data ../shared/data/multihop]
        [--json benchmarks/results/fit_generate.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import string
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from kredenc.config import load_settings
from kredenc.engine import make_default_embedder
from kredenc.eval.metrics import bootstrap_ci
from kredenc.loop.roles.generate import PARAMS, ExtractParams, candidates, pick, scorable
from kredenc.records import Hit

GRID: dict[str, tuple[Any, ...]] = {
    "w_meaning": (0.0, 0.1, 0.25, 0.4, 0.5, 0.75, 1.0),
    "idf": (True, False),
    "slot_bonus": (0.0, 0.1, 0.2),
    "min_score": (0.15, 0.2, 0.25, 0.3, 0.35, 0.45, 0.55),
}
FOLDS = 5


def normalise(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def chunks_of(record: dict[str, Any]) -> list[Hit]:
    gold = {t for t, _ in record["supporting_facts"]}
    paras = {t: s for t, s in record["context"]}
    distract = [t for t, _ in record["context"] if t not in gold][:2]
    out = []
    for i, title in enumerate([*sorted(gold), *distract]):
        text = " ".join(s.strip() for s in paras[title])
        out.append(Hit(id=f"p{i}", text=text, score=1.0, kind="", drawer="", title=title))
    return out


class Prepared:
    """One (question, chunks) pair with everything the grid needs, computed once."""

    def __init__(self, question: str, chunks: Sequence[Hit], embedder: Any, answer: str):
        self.question = question
        self.cands = candidates(chunks)
        self.facts = scorable(question, self.cands)
        texts = [c.scored for c in self.cands]
        self.vectors = embedder.embed(texts) if texts else np.zeros((0, embedder.dim))
        self.qv = embedder.embed_query(question)
        self.answer = normalise(answer) if answer else ""

    def right(self, params: ExtractParams, *, top: int = 1) -> bool:
        chosen = pick(self.question, self.facts, self.vectors, self.qv, params)
        if not self.answer:  # unanswerable: right when nothing is picked
            return not chosen
        said = normalise(" ".join(self.cands[i].text for i, _ in chosen[:top]))
        return bool(chosen) and self.answer in said


def objective(pos: Sequence[bool], neg: Sequence[bool]) -> float:
    return 0.5 * (sum(pos) / len(pos)) + 0.5 * (sum(neg) / len(neg))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data/multihop")
    ap.add_argument("--json", default="benchmarks/results/fit_generate.json")
    args = ap.parse_args(argv)
    path = Path(args.data) / "hotpotqa_dev200.json"
    if not path.is_file():
        print(f"no HotpotQA dev file at {path}; pass --data DIR", file=sys.stderr)
        return 2
    records = [r for r in json.loads(path.read_text()) if r["answer"].lower() not in ("yes", "no")]
    embedder = make_default_embedder(load_settings(tempfile.mkdtemp()))
    t0 = time.perf_counter()
    pos = [Prepared(r["question"], chunks_of(r), embedder, r["answer"]) for r in records]
    neg = [
        Prepared(r["question"], chunks_of(records[(i + 1) % len(records)]), embedder, "")
        for i, r in enumerate(records)
    ]
    prep_s = time.perf_counter() - t0
    grid = [
        replace(PARAMS, **dict(zip(GRID, values, strict=True)))
        for values in itertools.product(*GRID.values())
    ]
    table = np.array([[p.right(g) for g in grid] for p in pos], dtype=bool)
    table_neg = np.array([[p.right(g) for g in grid] for p in neg], dtype=bool)
    n = len(pos)
    fold = np.arange(n) % FOLDS
    held_pos: list[bool] = [False] * n
    held_neg: list[bool] = [False] * n
    chosen_per_fold = []
    for f in range(FOLDS):
        train = fold != f
        scores = 0.5 * table[train].mean(0) + 0.5 * table_neg[train].mean(0)
        best = int(np.argmax(scores))
        chosen_per_fold.append(asdict(grid[best]))
        for i in np.where(~train)[0]:
            held_pos[i] = bool(table[i, best])
            held_neg[i] = bool(table_neg[i, best])

    def ci(values: Sequence[bool]) -> list[float]:
        lo, hi = bootstrap_ci(lambda idx: sum(values[i] for i in idx) / len(idx), len(values))
        return [round(lo, 3), round(hi, 3)]

    def ci_obj(idx: Sequence[int]) -> float:
        return objective([held_pos[i] for i in idx], [held_neg[i] for i in idx])

    lo, hi = bootstrap_ci(ci_obj, n)
    all_scores = 0.5 * table.mean(0) + 0.5 * table_neg.mean(0)
    best_all = int(np.argmax(all_scores))
    whole = [p.right(grid[best_all], top=grid[best_all].max_sentences) for p in pos]
    # Comparisons on all questions (in-sample, each at its own best other settings):
    # meaning alone (w_meaning = 1) and the words alone (w_meaning = 0).
    by_weight = {
        w: round(float(max(all_scores[i] for i, g in enumerate(grid) if g.w_meaning == w)), 3)
        for w in GRID["w_meaning"]
    }
    current = grid.index(PARAMS) if PARAMS in grid else None
    out: dict[str, Any] = {
        "data": str(path),
        "questions": n,
        "prepare_s": round(prep_s, 1),
        "held_out": {
            "objective": round(objective(held_pos, held_neg), 3),
            "objective_ci95": [round(lo, 3), round(hi, 3)],
            "answer_rate": round(sum(held_pos) / n, 3),
            "answer_rate_ci95": ci(held_pos),
            "abstain_rate": round(sum(held_neg) / n, 3),
            "abstain_rate_ci95": ci(held_neg),
        },
        "best_on_all_whole_answer_rate": round(sum(whole) / n, 3),
        "best_on_all_whole_answer_rate_ci95": ci(whole),
        "best_objective_by_w_meaning": by_weight,
        "chosen_per_fold": chosen_per_fold,
        "best_on_all": asdict(grid[best_all]),
        "best_on_all_objective": round(float(all_scores[best_all]), 3),
        "current_defaults": asdict(PARAMS),
        "current_defaults_objective": None
        if current is None
        else round(float(all_scores[current]), 3),
    }
    print(f"HotpotQA dev, {n} questions (yes/no left out); {FOLDS}-fold CV")
    h = out["held_out"]
    print(f"  held-out objective {h['objective']:.3f} {h['objective_ci95']}")
    print(f"  answer rate        {h['answer_rate']:.3f} {h['answer_rate_ci95']}")
    print(f"  abstain rate       {h['abstain_rate']:.3f} {h['abstain_rate_ci95']}")
    print(f"  best on all: {out['best_on_all']} ({out['best_on_all_objective']})")
    print(f"  answer anywhere in the answer (best on all): {out['best_on_all_whole_answer_rate']}")
    print(f"  current defaults: {out['current_defaults_objective']}")
    print(f"  best objective by w_meaning (in-sample): {by_weight}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
