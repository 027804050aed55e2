"""BEIR datasets (e.g. SciFact): ``DIR/corpus.jsonl``, ``DIR/queries.jsonl``,
``DIR/qrels/<split>.tsv``, each plain or gzipped.

- Document id = the corpus ``_id``; text = ``title + "\\n" + text`` (just ``text``
  when the title is empty).
- Only queries that appear in the qrels file are evaluated; a qrels query missing from
  queries.jsonl is counted (``missing_queries``) and left out.
- nDCG@10: trec_eval ``ndcg_cut_10`` (graded gains from the qrels, log2 discount, ideal
  DCG from the qrels), averaged over every evaluated query. Unlike BEIR's own
  ``EvaluateRetrieval.evaluate``, a query for which the retriever returned nothing
  counts as 0 instead of disappearing from the average.
- Recall@100: share of relevant (score > 0) docs in the top 100, averaged over the
  queries with at least one relevant doc.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kredenc.errors import InvalidInput
from kredenc.eval.datasets import (
    EvalDoc,
    EvalQuery,
    Group,
    Metrics,
    Ranked,
    mean,
    no_records,
    open_text,
    read_jsonl,
)
from kredenc.eval.metrics import ndcg_at_k, recall_at_k


@dataclass
class BeirDataset:
    docs: list[EvalDoc]
    queries: list[EvalQuery]
    qrels: dict[str, dict[str, float]]
    missing_queries: int = 0
    ndcg_ks: tuple[int, ...] = (10,)
    recall_ks: tuple[int, ...] = (100,)
    name: str = field(default="beir")

    @property
    def k(self) -> int:
        return max((*self.ndcg_ks, *self.recall_ks))

    def groups(self) -> Iterable[Group]:
        yield Group(docs=self.docs, queries=self.queries, k=self.k)

    def score(self, ranked: Ranked) -> Metrics:
        ndcg: dict[int, list[float]] = {k: [] for k in self.ndcg_ks}
        recall: dict[int, list[float]] = {k: [] for k in self.recall_ks}
        for q in self.queries:
            run = list(ranked.get(q.qid, ()))
            judged = self.qrels.get(q.qid, {})
            relevant = {d for d, rel in judged.items() if rel > 0}
            for k in self.ndcg_ks:
                ndcg[k].append(ndcg_at_k(run, judged, k))
            if relevant:
                for k in self.recall_ks:
                    recall[k].append(recall_at_k(run, relevant, k))
        out: Metrics = {
            "n_docs": len(self.docs),
            "n_queries": len(self.queries),
            "missing_queries": self.missing_queries,
        }
        out.update({f"ndcg@{k}": mean(v) for k, v in ndcg.items()})
        out.update({f"recall@{k}": mean(v) for k, v in recall.items()})
        return out


def read_qrels(path: str | Path) -> dict[str, dict[str, float]]:
    """``query-id<TAB>corpus-id<TAB>score`` with an optional header line; the TREC form
    ``qid 0 docid rel`` (whitespace separated) is accepted too."""
    qrels: dict[str, dict[str, float]] = {}
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = [p.strip() for p in (line.split("\t") if "\t" in line else line.split())]
            if len(parts) == 4:
                parts = [parts[0], parts[2], parts[3]]
            if len(parts) != 3:
                raise InvalidInput(f"{path}:{n}: expected 3 tab-separated fields")
            qid, doc_id, rel = parts
            try:
                value = float(rel)
            except ValueError:
                if n == 1:  # header
                    continue
                raise InvalidInput(f"{path}:{n}: score {rel!r} is not a number") from None
            qrels.setdefault(qid, {})[doc_id] = value
    return qrels


def doc_text(title: str, text: str) -> str:
    return f"{title}\n{text}" if title else text


def load_beir(directory: str | Path, split: str = "test") -> BeirDataset:
    """Read a BEIR folder; evaluate the queries of ``qrels/<split>.tsv``."""
    root = Path(directory)
    qrels = read_qrels(root / "qrels" / f"{split}.tsv")
    docs = []
    for row in read_jsonl(root / "corpus.jsonl"):
        title = str(row.get("title") or "")
        docs.append(
            EvalDoc(
                id=str(row["_id"]),
                text=doc_text(title, str(row.get("text") or "")),
                title=title,
                meta=dict(row.get("metadata") or {}),
            )
        )
    if not docs:
        raise no_records(root / "corpus.jsonl", "documents")
    queries: list[EvalQuery] = []
    for row in read_jsonl(root / "queries.jsonl"):
        qid = str(row["_id"])
        if qid in qrels:
            queries.append(EvalQuery(qid=qid, text=str(row.get("text") or "")))
    if not queries:
        what = "queries" if qrels else f"queries (qrels/{split}.tsv names none)"
        raise no_records(root / "queries.jsonl", what)
    found = {q.qid for q in queries}
    return BeirDataset(
        docs=docs,
        queries=queries,
        qrels=qrels,
        missing_queries=sum(1 for q in qrels if q not in found),
    )
