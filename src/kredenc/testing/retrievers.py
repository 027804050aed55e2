"""A word-overlap retriever for testing evaluation runners (no store, no model)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from kredenc.eval.datasets import EvalDoc

_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


class OverlapRetriever:
    """Ranks documents by how many distinct query words they share; ties by index order.

    Records every call so tests can check the runner's reset/index discipline.
    """

    def __init__(self) -> None:
        self.docs: list[tuple[str, set[str]]] = []
        self.calls: list[str] = []
        self.ks: list[int] = []

    def reset(self) -> None:
        self.calls.append("reset")
        self.docs = []

    def index(self, docs: Sequence[EvalDoc]) -> None:
        self.calls.append(f"index:{len(docs)}")
        self.docs.extend((d.id, words(d.text)) for d in docs)

    def search(self, query: str, k: int, *, asked_at: float | None = None) -> list[str]:
        self.ks.append(k)
        q = words(query)
        scored = [(-len(q & ws), i, doc_id) for i, (doc_id, ws) in enumerate(self.docs)]
        return [doc_id for score, _, doc_id in sorted(scored) if score < 0][:k]
