"""One JSON error shape for every error the server answers, and the status of each error.

Every refusal, from the guard to a route to an unexpected fault, is
``{"error": {"code": ..., "message": ..., "hint": ...}}`` with a 4xx or 5xx status
(pinned by ``tests/interfaces/server/test_errors.py``). A fault that is not a
:class:`~kredenc.errors.KredencError` is logged with its traceback and answered 500
with a message that names nothing inside the process.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

from kredenc import errors as e
from kredenc.interfaces.guard import error_response, is_json, media_type

log = logging.getLogger("kredenc.server")

#: The status of each kredenc error (the most specific class listed wins).
STATUS: dict[type[e.KredencError], int] = {
    e.InvalidInput: 422,
    e.NotFound: 404,
    e.ReadOnlyRecord: 409,
    e.StoreReadOnly: 403,
    e.FetchRefused: 422,
    e.IngestError: 422,
    e.DeadlineExceeded: 504,
    e.MissingExtra: 501,
    e.ProviderError: 502,
    e.StoreClosed: 503,
    e.StoreLocked: 503,
    e.StoreError: 503,
}


class ErrorDetail(BaseModel):
    code: str
    message: str
    hint: str


class ErrorBody(BaseModel):
    """What every error answers."""

    error: ErrorDetail


def _responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"model": ErrorBody, "description": "an error"} for s in statuses}


#: ``responses=`` for a router or route: the errors any route may answer (the guard's
#: 401/403/413/429, validation 422, faults 500/503) documented in the OpenAPI document.
COMMON_ERRORS = _responses(400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 502, 503, 504)


def status_of(exc: e.KredencError) -> int:
    status = getattr(exc, "status", None)  # an error that carries its own (jobs.Refused)
    if isinstance(status, int):
        return status
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 400


def kredenc_error(exc: e.KredencError, headers: dict[str, str] | None = None) -> JSONResponse:
    return error_response(status_of(exc), exc.code, exc.message, exc.hint, headers)


_HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
}
_HTTP_HINTS = {
    400: "send the body as JSON no deeper than a few hundred levels",
    413: "send less, or raise the proxy_max_body_bytes setting",
}
#: The hint of a multipart body that cannot be parsed (POST /ingest's uploads).
_UPLOAD_HINT = (
    "upload each file as a multipart/form-data field named 'files' "
    '(curl -F files=@report.pdf), or send {"paths"} or {"urls"} as JSON'
)


def _not_json(error: Mapping[str, Any]) -> JSONResponse:
    """A body that is not JSON at all: malformed, like one too deep to parse (400), in
    one line that says where (FastAPI's ``loc`` holds the position, pydantic's message
    the line and column)."""
    loc = tuple(error.get("loc", ()))
    ctx = error.get("ctx")
    why = str(ctx.get("error") if isinstance(ctx, Mapping) else "") or "cannot be parsed"
    if len(loc) == 2 and isinstance(loc[1], int):
        why = f"{why} at position {loc[1]}"
    return error_response(
        400,
        "bad_request",
        f"the body is not valid JSON: {why}"[:300],
        "send one JSON object with Content-Type: application/json (the bodies are in "
        "/openapi.json)",
    )


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into the one shape."""

    @app.exception_handler(e.KredencError)
    async def on_kredenc(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, e.KredencError)
        return kredenc_error(exc)

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {}
        media = media_type(request.headers)
        if tuple(first.get("loc", ())) == ("body",) and not (
            is_json(media) or media == "multipart/form-data"
        ):
            # The body was not read as JSON at all (a text/plain or form POST): say so,
            # rather than that "the input should be a valid dictionary".
            return error_response(
                415,
                "unsupported_media_type",
                f"this route takes a JSON body, not {media or 'one without a Content-Type'}",
                "send it with Content-Type: application/json",
            )
        if first.get("type") == "json_invalid":
            return _not_json(first)
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
        message = f"{where}: {first.get('msg', 'invalid value')}"
        return error_response(
            422, "invalid_request", message[:300], "the request bodies are in /openapi.json"
        )

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        detail = exc.detail if isinstance(exc.detail, str) else "request refused"
        hint = _HTTP_HINTS.get(exc.status_code, "the routes are in /openapi.json")
        if exc.status_code == 400 and media_type(request.headers) == "multipart/form-data":
            # The uploads could not be parsed (Starlette's form parser refused them).
            detail, hint = f"the multipart body cannot be read: {detail}", _UPLOAD_HINT
        return error_response(exc.status_code, code, detail, hint, exc.headers)

    @app.exception_handler(Exception)
    async def on_fault(request: Request, exc: Exception) -> JSONResponse:
        log.exception("fault in %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(
            500,
            "internal_error",
            "the server failed on this request",
            "the server log has the details; report it if it happens again",
        )
