"""The engine as an evaluation ``Retriever``: each group in a fresh namespace."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kredenc.eval.datasets import EvalDoc

if TYPE_CHECKING:
    from kredenc.engine import Kredenc

_BATCH = 256


class EngineRetriever:
    """Files each corpus as passages (``record_type``) and searches with ``search_opts``."""

    def __init__(self, kb: Kredenc, *, record_type: str = "chunk", **search_opts: Any) -> None:
        self.kb = kb
        self.record_type = record_type
        self.search_opts = search_opts
        self._run = secrets.token_hex(3)
        self._groups = 0

    def reset(self) -> None:
        self._groups += 1
        self.kb.use_namespace(f"eval-{self._run}-{self._groups}")

    def index(self, docs: Sequence[EvalDoc]) -> None:
        items = [
            {"text": d.text, "meta": {"eval_id": d.id, **d.meta}} for d in docs if d.text.strip()
        ]
        for start in range(0, len(items), _BATCH):
            self.kb.add_passages(items[start : start + _BATCH], record_type=self.record_type)

    def search(self, query: str, k: int) -> list[str]:
        if not query.strip():
            return []
        hits = self.kb.search(query, k=k, **self.search_opts)
        return [str(h.meta.get("eval_id", h.id)) for h in hits]
