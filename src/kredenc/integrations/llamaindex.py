"""A LlamaIndex retriever over the engine's search (the ``llamaindex`` extra).

    from kredenc import Kredenc
    from kredenc.integrations.llamaindex import KredencRetriever

    kb = Kredenc.open("./mem")
    retriever = KredencRetriever(kb, k=4, user_id="alice", min_score=0.2)
    nodes = retriever.retrieve("what does alice drink?")   # or await retriever.aretrieve(...)

Each hit becomes a ``NodeWithScore``: a ``TextNode`` (``id_`` the record's id, a
``SOURCE`` relationship to its document when it is a document's chunk) whose
``metadata`` is :func:`kredenc.integrations.hits.hit_metadata` (file, page, title, the
fused ``score`` and the calibrated ``relevance``, type, kind, scope ids, tags), and the
node's ``score`` is the calibrated relevance (the same scale for every query, so a
``SimilarityPostprocessor(similarity_cutoff=...)`` means something), or the fused rank
score where the search did not compute one (a lexical-only search without
``min_score``). Only ``title``, ``file`` and ``page`` reach an LLM's or an embedder's
view of the node; the rest of the metadata is excluded from both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kredenc.aio import AsyncKredenc
from kredenc.client import Client
from kredenc.engine import Kredenc
from kredenc.errors import MissingExtra
from kredenc.integrations import hits
from kredenc.records import Hit

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import (
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        RelatedNodeInfo,
        TextNode,
    )
except ImportError as exc:  # pragma: no cover - the extra is installed where tests run
    raise MissingExtra("kredenc.integrations.llamaindex", "llamaindex") from exc

__all__ = ["KredencRetriever", "to_node"]

#: The metadata an LLM or embedder sees of a node; the rest is for code.
_SHOWN = frozenset({"title", "file", "page"})


def to_node(hit: Hit) -> NodeWithScore:
    """A search hit as a LlamaIndex ``NodeWithScore`` with its provenance as metadata."""
    metadata = hits.hit_metadata(hit)
    hidden = sorted(set(metadata) - _SHOWN)
    node = TextNode(
        id_=hit.id,
        text=hit.text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
    )
    if hit.doc_id:
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=hit.doc_id)
    score = hit.relevance if hit.relevance is not None else hit.score
    return NodeWithScore(node=node, score=score)


class KredencRetriever(BaseRetriever):
    """``Kredenc.search`` as a LlamaIndex ``BaseRetriever`` (sync and async).

    ``options`` (``k``, ``mode``, ``user_id``, ``agent_id``, ``run_id``, ``tags``,
    ``where``, ``min_score``: the names of :data:`kredenc.integrations.hits.OPTIONS`) are
    passed to every search; ``search_kwargs`` holds any other ``search`` argument. ``kb``
    is a ``Kredenc``, a ``Client`` or an ``AsyncKredenc``.
    """

    def __init__(
        self,
        kb: Kredenc | Client | AsyncKredenc,
        *,
        search_kwargs: Mapping[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **options: Any,
    ) -> None:
        self.kb = kb
        self.options = hits.search_options(search_kwargs=search_kwargs, **options)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = hits.search(self.kb, query_bundle.query_str, self.options)
        return [to_node(hit) for hit in found]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = await hits.asearch(self.kb, query_bundle.query_str, self.options)
        return [to_node(hit) for hit in found]
