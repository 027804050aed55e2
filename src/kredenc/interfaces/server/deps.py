"""The FastAPI dependencies routes take: the server's state, the caller's tenant and view.

A route never reads a namespace from the request: the tenant is what the guard
(:mod:`kredenc.interfaces.guard`) put in the ASGI scope, from the API key.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from kredenc.engine import Kredenc
from kredenc.interfaces.guard import TENANT_KEY, Tenant
from kredenc.interfaces.server.state import ServerState


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.kredenc
    return state


def tenant(request: Request) -> Tenant:
    found: Tenant = request.scope[TENANT_KEY]
    return found


def view(request: Request) -> Kredenc:
    """The caller's view of the store: the namespace of its key."""
    return server_state(request).view(tenant(request).namespace)


State = Annotated[ServerState, Depends(server_state)]
TenantDep = Annotated[Tenant, Depends(tenant)]
KB = Annotated[Kredenc, Depends(view)]
