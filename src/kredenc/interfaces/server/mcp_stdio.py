"""MCP over standard input and output: the SDK's transport, with two gaps closed.

- **A line that is not a JSON-RPC message is answered** (JSON-RPC 2.0, section 5.1):
  -32700 when it is not JSON, -32600 when it is JSON but not a request, a notification
  or a response, with the request's id where one can be read, else null. The SDK
  dropped such a line without a word (its log at DEBUG), so a client that sent a
  request with an id waited for an answer that never came.
- **The end of the input is not the end of the answers.** A client that writes its
  requests and closes its end gets an answer to each: the SDK stopped at the end of the
  input and cancelled what was still being worked on (a memory filed, its id never
  sent). Now the server stops once every request read has been answered, or after
  :data:`DRAIN_S`.

Standard output is the SDK's to claim (whatever else writes to it goes to standard
error); standard input is read here, as UTF-8 with bad bytes replaced, as the SDK does.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import AsyncIterator
from io import TextIOWrapper
from types import TracebackType
from typing import Any, cast

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

#: The longest the server waits, after the input ended, for its last answers.
DRAIN_S = 300.0


def refusal(line: str) -> types.JSONRPCError | None:
    """The answer to ``line`` when it is not a JSON-RPC message the SDK can serve (None
    when it is one): -32700 not JSON, -32600 not a message."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return _error(None, types.PARSE_ERROR, "Parse error: the line is not JSON")
    rid = value.get("id") if isinstance(value, dict) else None
    if not isinstance(rid, str) and (not isinstance(rid, int) or isinstance(rid, bool)):
        rid = None  # an id that is not a string or an integer cannot be echoed
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "not a message"}
        where = ".".join(str(p) for p in first["loc"])
        why = f"{where}: {first['msg']}" if where else str(first["msg"])
        return _error(rid, types.INVALID_REQUEST, f"Invalid Request: {why}"[:300])
    if isinstance(message, types.JSONRPCNotification) and isinstance(value, dict) and "id" in value:
        # read as a notification, so never answered: an id it could not take (1.5, null)
        return _error(
            None, types.INVALID_REQUEST, "Invalid Request: id must be a string or an integer"
        )
    return None


def _error(rid: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=" ".join(message.split()))
    )


class _Answers:
    """The write stream, counting the requests still to be answered (an id sent twice
    is counted twice; a request the client cancelled is not answered, so not waited for)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.pending: Counter[str | int] = Counter()

    def asked(self, message: Any) -> None:
        """A message read from the client: a request is awaited, a cancellation ends
        the wait for the request it names."""
        if isinstance(message, types.JSONRPCRequest):
            self.pending[message.id] += 1
        elif isinstance(message, types.JSONRPCNotification) and (
            message.method == "notifications/cancelled"
        ):
            params = message.params if isinstance(message.params, dict) else {}
            self._done(params.get("requestId"))

    def _done(self, rid: Any) -> None:
        if isinstance(rid, str | int) and self.pending[rid] > 0:
            self.pending[rid] -= 1
            if not self.pending[rid]:
                del self.pending[rid]

    async def send(self, item: SessionMessage, /) -> None:
        if isinstance(item.message, types.JSONRPCResponse | types.JSONRPCError):
            self._done(item.message.id)
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> _Answers:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


async def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` over standard input and output until the input ends and every
    request read from it has been answered."""
    refused_send, refused = anyio.create_memory_object_stream[types.JSONRPCError](1000)
    stdin = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))

    async def screened() -> AsyncIterator[str]:
        async with refused_send:
            async for line in stdin:
                if not line.strip():
                    continue
                answer = refusal(line)
                if answer is None:
                    yield line
                else:
                    await refused_send.send(answer)

    async with stdio_server(stdin=cast(Any, screened())) as (read_stream, write_stream):
        answers = _Answers(write_stream)
        inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def forward() -> None:
            async with inbound_send:
                async for item in read_stream:
                    if isinstance(item, SessionMessage):
                        answers.asked(item.message)
                    await inbound_send.send(item)
                with anyio.move_on_after(DRAIN_S):  # the input ended: the last answers
                    while answers.pending:
                        await anyio.sleep(0.05)

        async def answer_refused() -> None:
            async with refused:
                async for error in refused:
                    await write_stream.send(SessionMessage(error))

        async with anyio.create_task_group() as tg:
            tg.start_soon(forward)
            tg.start_soon(answer_refused)
            await server.run(
                cast(Any, inbound), cast(Any, answers), server.create_initialization_options()
            )
