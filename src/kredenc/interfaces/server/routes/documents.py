"""Documents: list (filters, paging), read one with its chunks, delete one whole.

``DELETE /documents/{id}`` is :meth:`Kredenc.delete_document`: the document and every
chunk of it leave search, listing and recall in one batch (``DELETE /memories/{id}``
on a document id would hide the document record only).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel

from kredenc.interfaces.server.deps import KB
from kredenc.interfaces.server.routes.paging import Limit, Offset, Page, page
from kredenc.memory.listing import DocumentEntry
from kredenc.records import Memory

router = APIRouter(tags=["documents"])


class DocumentDetail(BaseModel):
    document: DocumentEntry
    chunks: list[Memory]


@router.get("/documents", response_model=Page[DocumentEntry])
def list_documents(
    kb: KB,
    loader: Annotated[list[str], Query(description="only documents these loaders read")] = [],  # noqa: B006
    source: Annotated[str | None, Query(max_length=500, description="a glob of the origin")] = None,
    drawer: Annotated[str | None, Query(max_length=200)] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[DocumentEntry]:
    """The caller's documents in filing order (oldest first)."""
    return page(
        lambda n, at: kb.list_documents(
            loaders=loader, source=source, drawer=drawer, limit=n, offset=at
        ),
        limit,
        offset,
    )


@router.get("/documents/{doc_id}", response_model=DocumentDetail)
def read_document(doc_id: str, kb: KB) -> DocumentDetail:
    """A document and its chunks in order; a foreign, missing or non-document id is 404."""
    entry, chunks = kb.read_document(doc_id)
    return DocumentDetail(document=entry, chunks=chunks)


@router.delete("/documents/{doc_id}", status_code=204, response_class=Response)
def delete_document(doc_id: str, kb: KB) -> Response:
    """Forget the document and all its chunks (gone from search at once)."""
    kb.delete_document(doc_id)
    return Response(status_code=204)
