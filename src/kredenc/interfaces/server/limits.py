"""Per-request limits the guard does not check.

* :class:`Limiter` (ASGI middleware, after the guard): a token bucket per caller of
  ``rate_per_minute`` requests, ``/health`` aside (429 ``rate_limited`` with
  ``Retry-After`` seconds once spent); a body sent without a declared length
  (chunked) is counted as it is read and refused with 413 once it passes
  ``max_body_bytes`` (a declared one the guard refused before reading).
* :func:`check_request`: what one request may ask (``k``, query length, hops,
  neighbours per node), 422 ``invalid_input`` beyond the ``server_*`` settings. The
  limits are settings, not constants, so they are checked here rather than in the
  request models' field bounds.

The caller of a bucket is the API key (its SHA-256, never the key itself) or, when the
store holds no keys, the client address: tenants sharing a key share its bucket.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.interfaces.auth import bearer_token
from kredenc.interfaces.guard import error_response
from kredenc.interfaces.server.state import Limits, ServerState

#: Buckets kept before the full (idle) ones are dropped.
MAX_BUCKETS = 10_000


class BodyTooLarge(HTTPException):
    """A streamed body passed the limit while being read (answered 413 by the error
    handlers, whichever route was reading it)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


class Buckets:
    """Token buckets of ``per_minute`` tokens, refilled continuously; thread-safe."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(per_minute)
        self.refill = per_minute / 60.0  # tokens a second
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # caller -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, caller: str) -> float:
        """0 when ``caller`` may go on (a token spent), else the seconds until it may."""
        now = self._clock()
        with self._lock:
            tokens, at = self._buckets.get(caller, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - at) * self.refill)
            if tokens >= 1.0:
                self._buckets[caller] = (tokens - 1.0, now)
                if len(self._buckets) > MAX_BUCKETS:
                    self._prune(now)
                return 0.0
            self._buckets[caller] = (tokens, now)
            return (1.0 - tokens) / self.refill

    def _prune(self, now: float) -> None:
        for caller, (tokens, at) in list(self._buckets.items()):
            if tokens + (now - at) * self.refill >= self.capacity:
                del self._buckets[caller]


def caller_of(scope: Scope, headers: Headers) -> str:
    """Whose bucket a request spends: its key's digest, else its client address."""
    token = bearer_token(headers.get("authorization"))
    if token:
        return "key:" + hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()
    client = scope.get("client")
    return f"addr:{client[0] if client else ''}"


#: The path a health probe asks (never rate-limited).
HEALTH = "/health"


class Limiter:
    """The rate per caller and the size of streamed bodies (see the module)."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.limits = state.limits
        rate = self.limits.rate_per_minute
        self.buckets = Buckets(rate) if rate > 0 else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        # A health probe is not a caller's request: it never spends (nor is refused by)
        # the bucket of the client it shares an address or key with.
        if self.buckets is not None and scope.get("path") != HEALTH:
            wait = self.buckets.take(caller_of(scope, headers))
            if wait > 0:
                seconds = max(1, math.ceil(wait))
                refusal = error_response(
                    429,
                    "rate_limited",
                    f"more than {self.limits.rate_per_minute} requests a minute from this caller",
                    f"wait {seconds} s (Retry-After), or raise the server_rate_per_minute setting",
                    headers={"Retry-After": str(seconds)},
                )
                await refusal(scope, receive, send)
                return
        if "content-length" in headers:  # declared: the guard has checked it
            await self.app(scope, receive, send)
            return
        limit = self.limits.max_body_bytes
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, counted, send)


def check_request(
    limits: Limits,
    *,
    k: int | None = None,
    text: str | None = None,
    hops: int | None = None,
    fanout: int | None = None,
    what: str = "query",
    hops_name: str = "hops",
) -> None:
    """Refuse (InvalidInput, 422) what is beyond the server's limits: ``k`` results,
    ``text`` (the query or question, named ``what``) in characters, graph ``hops``
    (the parameter ``hops_name``), ``fanout`` neighbours per node."""
    if k is not None and k > limits.max_k:
        raise InvalidInput(
            f"k must be at most {limits.max_k} on this server, not {k}",
            "ask for fewer results (the server_max_k setting)",
        )
    if text is not None and len(text) > limits.max_query_chars:
        raise InvalidInput(
            f"the {what} is {len(text)} characters; this server takes at most "
            f"{limits.max_query_chars}",
            f"send a shorter {what} (the server_max_query_chars setting)",
        )
    if hops is not None and hops > limits.max_hops:
        raise InvalidInput(
            f"{hops_name} must be at most {limits.max_hops} on this server, not {hops}",
            "ask for fewer hops (the server_max_hops setting)",
        )
    if fanout is not None and fanout > limits.max_fanout:
        raise InvalidInput(
            f"neighbors_max must be at most {limits.max_fanout} on this server, not {fanout}",
            "ask for fewer neighbours (the server_max_fanout setting)",
        )


def served_reranker(kb: Kredenc, name: str | None) -> str | None:
    """The reranker a request may name: ``none``, or the one this server is configured
    with. Any other name would be a model path the server loads (from disk, or the
    network): not a client's choice."""
    if name is None:
        return None
    configured = kb.settings.rerank
    if name.strip().lower() in ("", "none"):
        return "none"
    if name == configured:
        return name
    raise InvalidInput(
        f"rerank must be 'none' or this server's reranker ({configured!r}), not {name[:60]!r}",
        "leave rerank out to use the server's (the rerank setting)",
    )
