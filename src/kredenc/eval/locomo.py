"""LoCoMo evidence retrieval (``locomo10.json`` / ``locomo_dev.json``).

Each conversation is its own corpus (one group: ``reset()`` + ``index()`` per
conversation). A document is one dialog turn: id = its ``dia_id`` (``D<session>:<turn>``),
text = ``"<speaker>: <text>"``, plus ``" [image: <blip_caption>]"`` when the turn shared
an image. The session date is in ``meta["date"]``.

A question is asked only of its own conversation; qid = ``<sample_id>:<i>`` with i the
question's index in that conversation's ``qa`` list. Metric: turn-level evidence
recall@k = |evidence ∩ top k| / |evidence| (the ``recall_acc`` of the official
``task_eval/evaluation.py``), and hit@k (any evidence in the top k). Categories 1-4 are
reported together and one by one; category 5 (adversarial) is reported apart.

Evidence ids are cleaned (``normalise_evidence``): a string holding several ids
(``"D8:6; D9:17"``, ``"D9:1 D4:4"``) is split on ``;``, ``,`` and whitespace;
``D:11:26`` becomes ``D11:26`` and ``D30:05`` becomes ``D30:5``; what still is not a
``D<n>:<m>`` of this conversation (``D``, ``D10:``, an id the conversation lacks) is
dropped and counted. A question left with no evidence is skipped and counted.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
from kredenc.eval.metrics import any_at_k, recall_at_k

KS = (1, 5, 10, 20)
ADVERSARIAL = 5
_SPLIT = re.compile(r"[;,\s]+")
_DIA_ID = re.compile(r"^D:?(\d+):(\d+)$", re.IGNORECASE)
_SESSION_KEY = re.compile(r"^session_(\d+)$")


@dataclass
class EvidenceReport:
    """What ``normalise_evidence`` did to one question's evidence list."""

    ids: list[str] = field(default_factory=list)
    normalised: int = 0
    split: int = 0
    dropped: list[str] = field(default_factory=list)


def normalise_evidence(raw: Iterable[Any], valid: Collection[str]) -> EvidenceReport:
    """Clean one question's ``evidence`` list against the conversation's dia_ids."""
    rep = EvidenceReport()
    for item in raw:
        tokens = [t for t in _SPLIT.split(str(item).strip()) if t]
        if len(tokens) > 1:
            rep.split += 1
        for tok in tokens:
            m = _DIA_ID.match(tok)
            if m is None:
                rep.dropped.append(tok)
                continue
            canon = f"D{int(m.group(1))}:{int(m.group(2))}"
            if canon not in valid:
                rep.dropped.append(tok)
                continue
            if canon != tok:
                rep.normalised += 1
            if canon not in rep.ids:
                rep.ids.append(canon)
    return rep


@dataclass
class LocomoDataset:
    conversations: list[Group] = field(default_factory=list)
    evidence: dict[str, list[str]] = field(default_factory=dict)
    category: dict[str, int] = field(default_factory=dict)
    normalised: int = 0
    split: int = 0
    dropped: list[str] = field(default_factory=list)  # "qid raw-id"
    skipped: dict[int, int] = field(default_factory=dict)  # category -> questions
    ks: tuple[int, ...] = KS
    name: str = "locomo"

    def groups(self) -> Iterable[Group]:
        return self.conversations

    def _block(self, qids: Sequence[str], ranked: Ranked) -> dict[str, Any]:
        keys = [f"{m}@{k}" for m in ("recall", "hit") for k in self.ks]
        rows = []
        for qid in qids:
            run, ev = list(ranked.get(qid, ())), self.evidence[qid]
            row = {f"recall@{k}": recall_at_k(run, ev, k) for k in self.ks}
            row.update({f"hit@{k}": any_at_k(run, ev, k) for k in self.ks})
            rows.append(row)
        return {"n": len(qids), **average(rows, keys)}

    def score(self, ranked: Ranked) -> Metrics:
        cats = sorted(set(self.category.values()))
        main = [q for q, c in self.category.items() if c != ADVERSARIAL]
        out: Metrics = {"n_conversations": len(self.conversations)}
        overall = self._block(main, ranked)
        out["n_questions"] = overall.pop("n")
        out.update(overall)
        out["by_category"] = {
            str(c): self._block([q for q, qc in self.category.items() if qc == c], ranked)
            for c in cats
            if c != ADVERSARIAL
        }
        out["adversarial"] = self._block(
            [q for q, c in self.category.items() if c == ADVERSARIAL], ranked
        )
        out["evidence"] = {
            "ids": sum(len(v) for v in self.evidence.values()),
            "normalised": self.normalised,
            "split": self.split,
            "dropped": len(self.dropped),
            "dropped_ids": list(self.dropped),
        }
        out["skipped_no_evidence"] = sum(self.skipped.values())
        out["skipped_by_category"] = {str(c): n for c, n in sorted(self.skipped.items())}
        return out


def date_seconds(date: str) -> float | None:
    """A LoCoMo session date (``1:56 pm on 8 May, 2023``) as Unix seconds (read as
    UTC); None when it is not of that form."""
    try:
        when = datetime.strptime(" ".join(str(date).split()), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return when.replace(tzinfo=UTC).timestamp()


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn.get('speaker', '')}: {turn.get('text', '')}"
    caption = turn.get("blip_caption")
    return f"{text} [image: {caption}]" if caption else text


def conversation_docs(conv: dict[str, Any]) -> list[EvalDoc]:
    """One document per turn, sessions in numeric order."""
    sessions = sorted(
        (int(m.group(1)), value)
        for key, value in conv.items()
        if (m := _SESSION_KEY.match(key)) and isinstance(value, list)
    )
    docs = []
    for n, turns in sessions:
        date = str(conv.get(f"session_{n}_date_time", ""))
        for turn in turns:
            docs.append(
                EvalDoc(
                    id=str(turn["dia_id"]),
                    text=turn_text(turn),
                    meta={"session": n, "date": date, "speaker": turn.get("speaker", "")},
                )
            )
    return docs


def load_locomo(path: str | Path, ks: Sequence[int] = KS) -> LocomoDataset:
    data = LocomoDataset(ks=tuple(ks))
    for s, sample in enumerate(expect_list(read_json(path), str(path))):
        if not isinstance(sample, dict) or "conversation" not in sample:
            raise InvalidInput(f"{path}: sample {s} has no 'conversation'")
        sid = str(sample.get("sample_id", s))
        docs = conversation_docs(sample["conversation"])
        valid = {d.id for d in docs}
        queries = []
        for i, qa in enumerate(sample.get("qa", [])):
            qid, cat = f"{sid}:{i}", int(qa.get("category", 0))
            rep = normalise_evidence(qa.get("evidence") or [], valid)
            data.normalised += rep.normalised
            data.split += rep.split
            data.dropped.extend(f"{qid} {raw}" for raw in rep.dropped)
            if not rep.ids:
                data.skipped[cat] = data.skipped.get(cat, 0) + 1
                continue
            data.evidence[qid] = rep.ids
            data.category[qid] = cat
            queries.append(
                EvalQuery(qid=qid, text=str(qa.get("question", "")), meta={"category": cat})
            )
        data.conversations.append(Group(docs=docs, queries=queries, k=max(data.ks)))
    if not any(g.queries for g in data.conversations):
        raise no_records(path, "questions" + (" with evidence" if data.skipped else ""))
    return data
