"""A LangChain retriever over the engine's search (the ``langchain`` extra).

    from kredenc import Kredenc
    from kredenc.integrations.langchain import KredencRetriever

    kb = Kredenc.open("./mem")
    retriever = KredencRetriever(kb=kb, k=4, user_id="alice", min_score=0.2)
    docs = retriever.invoke("what does alice drink?")      # or await retriever.ainvoke(...)

Each hit becomes a ``Document`` (its ``id`` the record's id) whose ``metadata`` is
:func:`kredenc.integrations.hits.hit_metadata`: file, page, title, the fused ``score``
and the calibrated ``relevance``, type, kind, scope ids, tags. The search options (``k``,
``mode``, ``user_id``, ``agent_id``, ``run_id``, ``tags``, ``where``, ``min_score``;
any other ``search`` argument in ``search_kwargs``) are fields, and all but ``run_id``
may be given again per call (``invoke(query, k=2, tags=["work"])``): LangChain's
``invoke`` keeps ``run_id`` for its own callbacks' run.
"""

from __future__ import annotations

from typing import Any

from kredenc.aio import AsyncKredenc
from kredenc.client import Client
from kredenc.engine import Kredenc
from kredenc.errors import MissingExtra
from kredenc.integrations import hits
from kredenc.records import Hit

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - the extra is installed where tests run
    raise MissingExtra("kredenc.integrations.langchain", "langchain") from exc

__all__ = ["KredencRetriever", "to_document"]

#: Keys LangChain's ``invoke`` leaves in the call's kwargs for its own use.
_LANGCHAIN_KEYS = ("verbose",)


def to_document(hit: Hit) -> Document:
    """A search hit as a LangChain ``Document`` with its provenance as metadata."""
    return Document(page_content=hit.text, metadata=hits.hit_metadata(hit), id=hit.id)


class KredencRetriever(BaseRetriever):
    """``Kredenc.search`` as a LangChain ``BaseRetriever`` (sync and async)."""

    kb: Kredenc | Client | AsyncKredenc
    k: int = 4
    mode: str = "hybrid"
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    tags: list[str] = []  # noqa: RUF012 (pydantic copies field defaults)
    where: dict[str, Any] | None = None
    min_score: float | None = None
    search_kwargs: dict[str, Any] = {}  # noqa: RUF012

    def _options(self, overrides: dict[str, Any]) -> hits.SearchOptions:
        for key in _LANGCHAIN_KEYS:
            overrides.pop(key, None)
        fields = {name: getattr(self, name) for name in hits.OPTIONS}
        base = hits.search_options(search_kwargs=self.search_kwargs, **fields)
        return base.merged(overrides)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        found = hits.search(self.kb, query, self._options(kwargs))
        return [to_document(hit) for hit in found]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        found = await hits.asearch(self.kb, query, self._options(kwargs))
        return [to_document(hit) for hit in found]
