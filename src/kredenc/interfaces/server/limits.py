"""Per-request limits the guard does not check: the rate per key (429 with
``Retry-After``) and bodies sent without a declared length (413 once past the limit).

(The REST work fills this in; until then it passes every request through.)
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from kredenc.interfaces.server.state import ServerState


class Limiter:
    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
