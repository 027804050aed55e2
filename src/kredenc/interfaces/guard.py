"""The front door of kredenc's HTTP surfaces: who may come in, as which tenant, how much.

Every request passes :class:`Guard` (ASGI middleware) before any route: the ``Host``
must be a loopback address, ``localhost`` or an allowed name (DNS rebinding), an
``Origin`` must name one of those too (a web page the user visits cannot call in), an
API key (``Authorization: Bearer``, :mod:`kredenc.interfaces.auth`) names the tenant
when the store holds keys, and a declared body larger than the limit is refused before
it is read. :func:`json_shape` bounds a parsed body's depth. The proxy and the server
(REST, MCP over HTTP, the page) share it, so its messages name "this server" (docs/security.md).
"""

from __future__ import annotations

import ipaddress
import logging
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from kredenc.errors import InvalidInput, KredencError
from kredenc.interfaces.auth import KeyRing, bearer_token
from kredenc.storage import layout

try:
    from starlette.datastructures import Headers
    from starlette.responses import JSONResponse
    from starlette.types import ASGIApp, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - exercised without the extra
    from kredenc.errors import MissingExtra

    raise MissingExtra("kredenc proxy", "proxy") from exc

log = logging.getLogger("kredenc.proxy")

WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]", "*"})
TENANT_KEY = "kredenc.tenant"  # the ASGI scope key the guard fills in


def error_response(
    status: int, code: str, message: str, hint: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The one JSON error shape: ``{"error": {"code", "message", "hint"}}``."""
    return JSONResponse(
        {"error": {"code": code, "message": message, "hint": hint}}, status, headers=headers
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, brackets and port already gone) is this
    machine only: ``localhost`` or a loopback address."""
    name = host.strip().lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, keys: KeyRing) -> None:
    """Refuse to listen beyond loopback while the store holds no active API key."""
    if is_loopback(host) or keys.active():
        return
    shown = host or "all addresses"
    where = shlex.quote(str(keys.home))
    first = "" if layout.is_store(keys.home) else f"'kredenc --store {where} init', then "
    raise InvalidInput(
        f"the store has no API keys, so this server listens on loopback only, not on {shown}",
        f"add a key with {first}'kredenc --store {where} keys add --namespace NAME', or use"
        " --host 127.0.0.1",
    )


def host_name(value: str) -> str:
    """The name in a ``Host`` header value, without the port or IPv6 brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    name, _, _port = value.partition(":")
    return name.rstrip(".")


def media_type(headers: Mapping[str, str]) -> str:
    """The media type of a ``Content-Type`` (parameters gone, lower case), or ''."""
    return headers.get("content-type", "").split(";", 1)[0].strip().lower()


def is_json(media: str) -> bool:
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


@dataclass(frozen=True)
class Tenant:
    namespace: str
    keyed: bool  # the caller showed a kredenc key (so its Authorization is not forwarded)


class Gate:
    """Who may come in, and as which tenant: Host, Origin, key, declared size."""

    def __init__(
        self, keys: KeyRing, namespace: str, bind_host: str, hosts: Sequence[str], max_body: int
    ) -> None:
        self.keys = keys
        self.namespace = namespace
        # Bound beyond loopback, a server never serves without a key, even once every
        # key has been revoked.
        self.always_keyed = not is_loopback(bind_host)
        self.hosts = frozenset(h.strip().lower().rstrip(".") for h in hosts if h.strip())
        if bind_host.lower() not in WILDCARDS:
            self.hosts |= {bind_host.strip().strip("[]").lower().rstrip(".")}
        self.max_body = max_body

    def allowed_host(self, name: str) -> bool:
        return bool(name) and (name in self.hosts or is_loopback(name))

    def admit(self, headers: Headers, *, need_key: bool = True) -> Tenant | JSONResponse:
        """The caller's tenant, or the refusal to answer. ``need_key=False`` (an open
        path such as ``/health``): Host, Origin and size are still checked, and a caller
        without a valid key is let in as an anonymous tenant (``namespace=""``)."""
        host = host_name(headers.get("host", ""))
        if not self.allowed_host(host):
            return error_response(
                403,
                "host_not_allowed",
                f"this server does not answer to the host {host[:100]!r}",
                "call it by a loopback address, or add the name to the proxy_allowed_hosts setting",
            )
        origin = headers.get("origin")
        if origin is not None:
            try:
                origin_host = (urlsplit(origin).hostname or "").rstrip(".")
            except ValueError:
                origin_host = ""
            if not self.allowed_host(origin_host):
                return error_response(
                    403,
                    "origin_not_allowed",
                    f"requests from the web page origin {origin[:100]!r} are refused",
                    "call it from a program, or from a page on a host in the"
                    " proxy_allowed_hosts setting",
                )
        try:
            tenant = self._tenant(headers)
        except KredencError as exc:  # a key file that cannot be read: nobody comes in
            log.error("refusing a request: %s", exc)
            return error_response(503, exc.code, exc.message, exc.hint)
        if tenant is None and not need_key:
            tenant = Tenant("", keyed=False)
        if tenant is None:
            return error_response(
                401,
                "unauthorized",
                "a valid kredenc API key is required (Authorization: Bearer <key>)",
                "pass a key made with 'kredenc keys add --namespace NAME' (the kredenc CLI:"
                " --api-key or KREDENC_API_KEY; an SDK: its api_key)",
                headers={"WWW-Authenticate": 'Bearer realm="kredenc"'},
            )
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                return error_response(
                    400, "bad_request", "Content-Length is not a number", "send a valid request"
                )
            if int(declared) > self.max_body:
                return too_large(self.max_body)
        return tenant

    def _tenant(self, headers: Headers) -> Tenant | None:
        if not self.always_keyed and not self.keys.active():
            return Tenant(self.namespace, keyed=False)
        key = self.keys.verify(bearer_token(headers.get("authorization")))
        return Tenant(key.namespace, keyed=True) if key is not None else None


def too_large(limit: int) -> JSONResponse:
    return error_response(
        413,
        "body_too_large",
        f"the request body is larger than {limit} bytes",
        "send less, or raise the proxy_max_body_bytes setting",
    )


class Guard:
    """ASGI middleware in front of every route: a request the gate refuses never
    reaches a route, the upstream or the store."""

    def __init__(self, app: ASGIApp, gate: Gate, open_paths: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.gate = gate
        # Paths served without a key (``/health``, the page's static files): each ends
        # in "/" for a prefix, else it is matched exactly; "/" itself is the root
        # only (as a prefix it would open every path).
        self.open_paths = open_paths

    def is_open(self, path: str) -> bool:
        return any(
            path == p or (p.endswith("/") and p != "/" and path.startswith(p))
            for p in self.open_paths
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        admitted = self.gate.admit(
            Headers(scope=scope), need_key=not self.is_open(scope.get("path", ""))
        )
        if isinstance(admitted, JSONResponse):
            log.info(
                "refused %s %s: %s",
                scope.get("method"),
                scope.get("path"),
                bytes(admitted.body).decode(errors="replace")[:200],
            )
            await admitted(scope, receive, send)
            return
        scope[TENANT_KEY] = admitted
        await self.app(scope, receive, send)


def json_shape(value: Any, limit: int) -> tuple[bool, bool]:
    """(deeper than ``limit``, every string valid Unicode) for a parsed JSON value;
    depth counts the objects and arrays on the deepest path."""
    clean = True
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            if depth > limit:
                return True, clean
            children = item.items() if isinstance(item, dict) else ((None, v) for v in item)
            for key, child in children:
                if clean and key is not None and not valid_text(key):
                    clean = False
                stack.append((child, depth))
        elif clean and isinstance(item, str) and not valid_text(item):
            clean = False
    return False, clean


def valid_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def session_refusal(session: str) -> JSONResponse | None:
    if 0 < len(session) <= 200 and session.strip() and not any(ord(c) < 32 for c in session):
        return None
    return error_response(
        400,
        "invalid_session",
        "X-Kredenc-Session must be 1-200 characters without control characters",
        "send a shorter session id, or leave the header out",
    )
