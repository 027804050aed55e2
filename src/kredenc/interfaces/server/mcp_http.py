"""MCP over streamable HTTP at ``/mcp``, on the same app as REST and behind its guard.

Every request to ``/mcp`` passes the server's :class:`~kredenc.interfaces.guard.Guard`
first (Host, Origin, API key → tenant, declared size) and its limits (rate per key),
then the SDK's own transport checks: the DNS-rebinding allow-list
(:func:`transport_security`: loopback names and the configured allowed hosts) and its
body limit, set to the server's. A tool runs in the view of the tenant the guard put in
the ASGI scope of the HTTP request that carried the call: never a tenant named in the
request, never one remembered from an earlier request.

The transport is stateless (a fresh server task per request, no MCP session ids) and
takes POST only: the tools need no server-to-client requests, so there is no stream to
GET and no session to DELETE (405), and a stateless server holds nothing a caller could
exhaust or another caller could reuse.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kredenc.engine import Kredenc
from kredenc.errors import KredencError
from kredenc.interfaces.guard import TENANT_KEY, Tenant, error_response
from kredenc.interfaces.server.mcp_tools import ToolHost, build_server
from kredenc.interfaces.server.state import ServerState

PATH = "/mcp"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

#: The codes and hints of the SDK's transport refusals, which it answers in plain text.
PLAIN_REFUSALS = {
    400: ("bad_request", "POST JSON-RPC with Content-Type: application/json"),
    403: ("origin_not_allowed", "call /mcp from a program, or from an allowed host's page"),
    413: ("body_too_large", "send less, or raise the proxy_max_body_bytes setting"),
    421: ("host_not_allowed", "call /mcp by a loopback address or an allowed host name"),
}


class NoTenant(KredencError):
    """A tool call that reached the tools without a tenant (never expected: the guard
    admits every request to /mcp first)."""

    code = "unauthorized"


def transport_security(state: ServerState) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection with the guard's names: the loopback names
    and the hosts the server answers to (``proxy_allowed_hosts``, ``allowed_hosts``,
    the bind address), with or without a port, for Host and for http(s) Origins."""
    names = list(LOOPBACK_NAMES)
    for host in sorted(state.gate.hosts):
        name = f"[{host}]" if ":" in host and not host.startswith("[") else host
        if name not in names:
            names.append(name)
    hosts = [h for name in names for h in (name, f"{name}:*")]
    origins = [f"{scheme}://{h}" for scheme in ("http", "https") for h in hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class OneErrorShape:
    """The SDK's plain-text refusals (a bad Content-Type, a Host or Origin off its
    list, a body past its limit) in the server's one error shape; its JSON-RPC errors
    and every success pass as they are (they are the protocol)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        status: int | None = None
        text = b""

        async def sending(message: Message) -> None:
            nonlocal status, text
            if message["type"] == "http.response.start" and message["status"] >= 400:
                media = Headers(raw=message.get("headers", [])).get("content-type", "")
                if not media.startswith(("application/json", "text/event-stream")):
                    status = int(message["status"])
                    return
            if status is not None and message["type"] == "http.response.body":
                text += message.get("body", b"")
                if message.get("more_body", False):
                    return
                code, hint = PLAIN_REFUSALS.get(status, ("bad_request", "see docs/server.md"))
                said = text.decode("utf-8", "replace").strip()[:200] or "request refused"
                await error_response(status, code, said, hint)(scope, receive, send)
                return
            await send(message)

        await self.app(scope, receive, sending)


def tenant_view(state: ServerState, ctx: Context) -> Kredenc:
    """The view of the tenant the guard admitted on the HTTP request of this call."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    tenant = scope.get(TENANT_KEY) if isinstance(scope, dict) else None
    if not isinstance(tenant, Tenant) or not tenant.namespace:
        raise NoTenant("this call came without a tenant", "call /mcp with a valid API key")
    return state.view(tenant.namespace)


def mount(app: FastAPI, state: ServerState) -> AbstractAsyncContextManager[None]:
    """Add ``/mcp`` to ``app``; returns the session manager's run, which the app's
    lifespan enters (the transport refuses requests outside it)."""
    host = ToolHost(
        view=lambda ctx: tenant_view(state, ctx), limits=state.limits, roots=tuple(state.roots)
    )
    server = build_server(host)
    # The SDK builds its session manager with the Starlette app it makes; the app is not
    # used: the manager's ASGI handler is mounted on this app, behind its middleware.
    server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        max_request_body_size=state.limits.max_body_bytes,
        transport_security=transport_security(state),
        host=state.config.host,
    )
    manager = server.session_manager
    app.add_route(
        PATH,
        OneErrorShape(StreamableHTTPASGIApp(manager)),  # type: ignore[arg-type]
        # POST only: a stateless server has nothing to push on a GET stream (it would
        # stay open, idle, for as long as the caller liked) and no session to DELETE.
        methods=["POST"],
        include_in_schema=False,
    )
    return manager.run()
