"""Export and import: ``GET /export`` streams the caller's namespace as ``kredenc export``
lines; ``POST /import`` files such lines (or mem0's JSON) into it.

An import files every record into the caller's namespace, whatever namespace its lines
name: a tenant can neither write into another's namespace nor read one out. It keeps
what :mod:`kredenc.memory.transfer` guarantees: every line is checked before anything
is written (a bad line is 422 naming its line number, and nothing is filed), and an id
already in the store is refused unless ``skip_existing``.
"""

from __future__ import annotations

import io
import json
import tempfile
from collections.abc import Iterator
from typing import IO, Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Query, Request
from starlette.responses import StreamingResponse

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.interfaces.server.deps import KB
from kredenc.memory.transfer import ImportReport

router = APIRouter(tags=["transfer"])

#: An export is written to a temporary file first (in memory up to this size), so the
#: store is read in one go and a slow client never holds it open.
SPOOL_BYTES = 8 * 1024 * 1024
BLOCK = 64 * 1024


def _exported(kb: Kredenc) -> IO[bytes]:
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - streamed
    try:
        text = io.TextIOWrapper(spool, encoding="utf-8", newline="\n", write_through=True)
        kb.export(text, [kb.namespace])
        text.detach()  # the spool stays open for the stream
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    return spool


def _blocks(spool: IO[bytes]) -> Iterator[bytes]:
    with spool:
        while block := spool.read(BLOCK):
            yield block


@router.get(
    "/export",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}, "description": "the export"}},
)
async def export(kb: KB) -> StreamingResponse:
    """The caller's namespace as JSON lines (the header first; docs/export.md)."""
    spool = await anyio.to_thread.run_sync(_exported, kb)
    return StreamingResponse(
        _blocks(spool),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": 'attachment; filename="kredenc-export.ndjson"'},
    )


def _import(kb: Kredenc, body: bytes, fmt: str, skip_existing: bool) -> ImportReport:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"the body is not UTF-8 (byte {exc.start})", "send the export as UTF-8 JSON lines"
        ) from None
    if fmt == "mem0":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                f"the body is not JSON (line {exc.lineno}: {exc.msg})",
                "send the JSON that mem0's get_all returns",
            ) from None
        return kb.import_mem0(data, skip_existing=skip_existing)
    return kb.import_lines(
        text.split("\n"), skip_existing=skip_existing, name="body", own_namespace=True
    )


@router.post(
    "/import",
    response_model=ImportReport,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/x-ndjson": {"schema": {"type": "string"}},
                "application/json": {"schema": {}},
            },
        }
    },
)
async def import_(
    request: Request,
    kb: KB,
    format: Annotated[Literal["kredenc", "mem0"], Query()] = "kredenc",
    skip_existing: Annotated[bool, Query()] = False,
) -> Any:
    """File an export (ndjson; ``?format=mem0`` for mem0's JSON) into the caller's
    namespace; every line is checked before anything is written."""
    body = await request.body()
    return await anyio.to_thread.run_sync(_import, kb, body, format, skip_existing)
