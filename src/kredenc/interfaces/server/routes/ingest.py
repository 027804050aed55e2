"""Ingestion as jobs: ``POST /ingest`` (uploads, paths inside the roots, or URLs) answers
202 with the queued job; ``GET /ingest/jobs[/{id}]`` polls, ``.../events`` streams.

The checks of what a client may read are in :mod:`..intake`; the queue and the events
in :mod:`..jobs`. Every job is the caller's tenant's: a foreign id is 404 like a
missing one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Header, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.datastructures import UploadFile
from starlette.responses import JSONResponse, Response, StreamingResponse

from kredenc.checks import check_name
from kredenc.errors import InvalidInput, NotFound
from kredenc.interfaces.guard import error_response, media_type
from kredenc.interfaces.server import sse
from kredenc.interfaces.server.deps import KB, State, TenantDep
from kredenc.interfaces.server.errors import ErrorDetail
from kredenc.interfaces.server.intake import (
    MAX_SOURCES,
    Intake,
    inside_roots,
    public_urls,
    save_uploads,
)
from kredenc.interfaces.server.jobs import Refused
from kredenc.interfaces.server.state import ServerState

router = APIRouter(tags=["ingest"])

#: How often an event stream looks for new events of a running job (seconds).
POLL_S = 0.1


class IngestRequest(BaseModel):
    """``POST /ingest`` as JSON: paths inside the server's roots, or URLs (or both)."""

    model_config = ConfigDict(extra="forbid")

    paths: list[str] = Field(default_factory=list, max_length=MAX_SOURCES)
    urls: list[str] = Field(default_factory=list, max_length=MAX_SOURCES)
    drawer: str = "documents"


class Progress(BaseModel):
    page: int | None
    pages: int | None
    done: bool


class Job(BaseModel):
    id: str
    state: Literal["queued", "running", "done", "failed"]
    sources: list[str]
    progress: dict[str, Progress]
    report: dict[str, Any] | None = Field(description="the IngestReport, once done")
    error: ErrorDetail | None
    created_at: float
    finished_at: float | None


class Queued(BaseModel):
    job: Job


class Jobs(BaseModel):
    items: list[Job]


_UPLOAD_SCHEMA = {
    "type": "object",
    "properties": {
        "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
        "drawer": {"type": "string"},
    },
    "required": ["files"],
}


@router.post(
    "/ingest",
    status_code=202,
    response_model=Queued,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": IngestRequest.model_json_schema()},
                "multipart/form-data": {"schema": _UPLOAD_SCHEMA},
            },
        }
    },
)
async def ingest(request: Request, kb: KB, state: State) -> Any:
    """Queue an ingest: multipart ``files`` uploads, or JSON ``{paths}`` / ``{urls}``."""
    kb.store.check_writable()  # a read-only store refuses before any upload is saved
    media = media_type(request.headers)
    intake: Intake | None = None
    try:
        if media == "multipart/form-data":
            intake, drawer = await _uploads(request, kb.home)
        elif media in ("application/json", ""):
            intake, drawer = _named(await request.body(), state)
        else:
            return error_response(
                415,
                "unsupported_media_type",
                f"POST /ingest takes JSON or multipart/form-data, not {media[:60]!r}",
                'send {"paths": [...]} or {"urls": [...]} as JSON, or upload \'files\'',
            )
        check_name("drawer", drawer)
        job = state.jobs.submit(
            kb,
            sources=intake.sources,
            inputs=intake.inputs,
            names=intake.names,
            drawer=drawer,
            cleanup=intake.cleanup,
        )
    except Refused as exc:
        _forget(intake)
        return error_response(exc.status, exc.code, exc.message, exc.hint)
    except BaseException:
        _forget(intake)
        raise
    return JSONResponse({"job": job}, status_code=202)


def _forget(intake: Intake | None) -> None:
    for path in intake.cleanup if intake is not None else ():
        path.unlink(missing_ok=True)


def _named(body: bytes, state: ServerState) -> tuple[Intake, str]:
    try:
        wanted = IngestRequest.model_validate_json(body or b"{}")
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None
    if not wanted.paths and not wanted.urls:
        raise InvalidInput(
            "nothing to ingest", 'give "paths" or "urls", or upload files as multipart "files"'
        )
    intake = Intake()
    for part in (
        inside_roots(state.roots, wanted.paths) if wanted.paths else Intake(),
        public_urls(wanted.urls, state.kb.settings) if wanted.urls else Intake(),
    ):
        intake.inputs += part.inputs
        intake.sources += part.sources
    return intake, wanted.drawer


async def _uploads(request: Request, home: Path) -> tuple[Intake, str]:
    async with request.form(max_files=MAX_SOURCES, max_fields=MAX_SOURCES) as form:
        files = [f for f in form.getlist("files") if isinstance(f, UploadFile)]
        if not files:
            raise InvalidInput("no files uploaded", 'send the files as multipart fields "files"')
        drawer = form.get("drawer")
        pairs = [(f.filename, f.file) for f in files]
        intake = await anyio.to_thread.run_sync(save_uploads, home, pairs)
    return intake, drawer if isinstance(drawer, str) and drawer else "documents"


@router.get("/ingest/jobs", response_model=Jobs)
def list_jobs(tenant: TenantDep, state: State) -> Any:
    """The caller's ingest jobs, the newest first (the last finished ones, and the rest)."""
    return {"items": state.jobs.listing(tenant.namespace)}


@router.get("/ingest/jobs/{job_id}", response_model=Job)
def read_job(job_id: str, tenant: TenantDep, state: State) -> Any:
    return state.jobs.get(tenant.namespace, job_id)


@router.get(
    "/ingest/jobs/{job_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "the job's events"}},
)
def job_events(
    job_id: str,
    tenant: TenantDep,
    state: State,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Response:
    """Server-sent events: ``progress`` ({source, page, pages}), ``file`` (a file's
    outcome), then ``done`` or ``failed`` (the job), then the stream ends. A client
    connecting late gets every event so far first; ``Last-Event-ID`` resumes after one."""
    after = 0
    if last_event_id is not None and last_event_id.strip().isdigit():
        after = int(last_event_id) + 1
    state.jobs.events(tenant.namespace, job_id, 0)  # 404 before the stream starts

    async def stream() -> AsyncIterator[bytes]:
        sent = after
        while True:
            try:
                new, finished = state.jobs.events(tenant.namespace, job_id, sent)
            except NotFound:  # dropped (too many finished jobs since): nothing more
                return
            for item in new:
                yield sse.event(item.name, item.data, sent)
                sent += 1
            if finished:
                return
            await anyio.sleep(POLL_S)

    # On shutdown the stream just ends: a client resumes with Last-Event-ID.
    events = sse.until_closing(stream(), state.closing)
    return StreamingResponse(events, media_type="text/event-stream", headers=sse.HEADERS)
