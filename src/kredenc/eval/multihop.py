"""Multi-hop paragraph retrieval: HotpotQA and MuSiQue records with a pooled corpus
(the HippoRAG layout, as in ``shared/data/multihop``).

Questions (a JSON list; the format is told per record):
- HotpotQA: ``{"_id", "question", "supporting_facts": [[title, sent_idx], ...], ...}``;
  gold = the distinct titles of ``supporting_facts``.
- MuSiQue: ``{"id", "question", "paragraphs": [{"title", "paragraph_text",
  "is_supporting"}, ...], ...}``; gold = the paragraphs with ``is_supporting: true``,
  matched on (title, text) because titles repeat.

Corpus:
- ``{title: [sentences] | text}`` (HotpotQA): document id = the title.
- ``[{"title", "text"}, ...]`` (MuSiQue): document id = the position in the file, as a
  string ("0", "1", ...). A HotpotQA gold title is matched to its first position.

Text indexed = ``title + "\\n" + paragraph``. A gold paragraph that is not in the corpus
is dropped and counted (``gold_missing``); a question left with no gold is skipped and
counted (``skipped_no_gold``).

Metrics for k in (2, 5, 10): ``recall@k`` = share of a question's gold paragraphs in the
top k, ``all_gold@k`` = 1 when all of them are; both averaged over questions, with
their 95 % bootstrap intervals over questions under ``ci95``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kredenc.errors import InvalidInput
from kredenc.eval.datasets import (
    EvalDoc,
    EvalQuery,
    Group,
    Metrics,
    Ranked,
    expect_list,
    mean,
    no_records,
    read_json,
)
from kredenc.eval.metrics import all_at_k, mean_ci, recall_at_k

KS = (2, 5, 10)


@dataclass
class MultihopDataset:
    docs: list[EvalDoc]
    queries: list[EvalQuery]
    gold: dict[str, list[str]]
    formats: dict[str, int] = field(default_factory=dict)
    gold_missing: int = 0
    skipped_no_gold: int = 0
    ks: tuple[int, ...] = KS
    name: str = "multihop"

    def groups(self) -> Iterable[Group]:
        yield Group(docs=self.docs, queries=self.queries, k=max(self.ks))

    def score(self, ranked: Ranked) -> Metrics:
        out: Metrics = {
            "n_docs": len(self.docs),
            "n_queries": len(self.queries),
            "formats": dict(self.formats),
            "gold_missing": self.gold_missing,
            "skipped_no_gold": self.skipped_no_gold,
        }
        runs = [(list(ranked.get(q.qid, ())), self.gold[q.qid]) for q in self.queries]
        ci: dict[str, list[float]] = {}
        for k in self.ks:
            for name, metric in (("recall", recall_at_k), ("all_gold", all_at_k)):
                values = [metric(r, g, k) for r, g in runs]
                out[f"{name}@{k}"] = mean(values)
                ci[f"{name}@{k}"] = mean_ci(values)
        out["ci95"] = ci
        return out


def join_sentences(sentences: Iterable[str]) -> str:
    """Concatenate sentences, adding a space only where neither side has one (HotpotQA
    sentences after the first usually carry their own leading space)."""
    out = ""
    for s in sentences:
        if out and not out[-1].isspace() and s and not s[0].isspace():
            out += " "
        out += s
    return out.strip()


def _paragraph(value: Any) -> str:
    if isinstance(value, list):
        return join_sentences(str(s) for s in value)
    return str(value)


def _norm(s: str) -> str:
    return " ".join(s.split())


class _Corpus:
    def __init__(self, raw: Any) -> None:
        self.docs: list[EvalDoc] = []
        self.by_title: dict[str, str] = {}
        self.by_pair: dict[tuple[str, str], str] = {}
        if isinstance(raw, dict):
            items = [(str(t), str(t), _paragraph(v)) for t, v in raw.items()]
        elif isinstance(raw, list):
            items = []
            for i, row in enumerate(raw):
                if not isinstance(row, dict) or "title" not in row:
                    raise InvalidInput(f"corpus item {i}: expected {{'title', 'text'}}")
                items.append((str(i), str(row["title"]), _paragraph(row.get("text", ""))))
        else:
            raise InvalidInput("corpus: expected a JSON object {title: sentences} or a list")
        for doc_id, title, text in items:
            self.docs.append(EvalDoc(id=doc_id, text=f"{title}\n{text}", title=title))
            self.by_title.setdefault(title, doc_id)
            self.by_pair.setdefault((_norm(title), _norm(text)), doc_id)

    def find(self, title: str, text: str | None) -> str | None:
        if text is None:
            return self.by_title.get(title)
        return self.by_pair.get((_norm(title), _norm(text)))


def _gold(record: dict[str, Any], corpus: _Corpus) -> tuple[str, list[str], int]:
    """(format, gold doc ids, how many gold paragraphs were not found)."""
    wanted: list[tuple[str, str | None]] = []
    if "supporting_facts" in record:
        fmt = "hotpotqa"
        for fact in record["supporting_facts"]:
            title = str(fact[0])
            if (title, None) not in wanted:
                wanted.append((title, None))
    elif "paragraphs" in record:
        fmt = "musique"
        for p in record["paragraphs"]:
            if p.get("is_supporting"):
                wanted.append((str(p.get("title", "")), str(p.get("paragraph_text", ""))))
    else:
        raise InvalidInput("question record has neither 'supporting_facts' nor 'paragraphs'")
    found = [corpus.find(t, x) for t, x in wanted]
    ids = list(dict.fromkeys(f for f in found if f is not None))
    return fmt, ids, sum(1 for f in found if f is None)


def load_multihop(questions: str | Path, corpus: str | Path) -> MultihopDataset:
    """Read a HotpotQA or MuSiQue question file and its corpus file."""
    pool = _Corpus(read_json(corpus))
    data = MultihopDataset(docs=pool.docs, queries=[], gold={})
    records = expect_list(read_json(questions), str(questions))
    if not records:
        raise no_records(questions, "questions")
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise InvalidInput(f"{questions}: record {i} is not an object")
        qid = str(rec.get("_id", rec.get("id", i)))
        fmt, ids, missing = _gold(rec, pool)
        data.formats[fmt] = data.formats.get(fmt, 0) + 1
        data.gold_missing += missing
        if not ids:
            data.skipped_no_gold += 1
            continue
        data.queries.append(
            EvalQuery(qid=qid, text=str(rec.get("question", "")), meta={"format": fmt})
        )
        data.gold[qid] = ids
    if not data.queries:
        raise no_records(questions, f"questions whose gold passages are in {corpus}")
    return data
