"""The one HTTP client for OpenAI-compatible APIs (OpenAI, vLLM, llama.cpp, Ollama,
LM Studio, LocalAI, faster-whisper servers): the wire, not the request shapes.

It validates the base URL, sends the API key as a Bearer header, holds a synchronous
``httpx`` client with a connect and a read time limit, retries what is safe to retry,
and turns every failure into one :class:`~kredenc.errors.ProviderError` line with a
hint. Providers (the embedder, the transcriber, the loop's LLM) keep only their
request body and the parsing of the reply.

Retries, with exponential backoff or the server's ``Retry-After``:

- a connection that was never made (refused, unreachable, connect timeout): the
  request was not sent;
- HTTP 429 and 503: the server refused the request without processing it;
- HTTP 502 and 504 only when the caller says the request is *safe to repeat*
  (embeddings and transcriptions are: a repeat gives the same answer and changes
  nothing): behind a gateway, the request may have been processed.

A read timeout is not retried (a slow server stays slow: raise the time limit), and a
``Retry-After`` longer than ``max_wait_s`` ends the attempts at once with the wait in
the hint rather than blocking. The API key never appears in a message, a hint or a
``repr``; neither does a password in the URL.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import time
from collections.abc import Generator, Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import httpx
from pydantic import SecretStr

from kredenc.errors import InvalidInput, ProviderError

log = logging.getLogger(__name__)

#: What to do about an HTTP error status, for any OpenAI-compatible endpoint; a
#: provider adds or overrides its own (``413: "lower batch_size"``).
HINTS: dict[int, str] = {
    401: "check the API key",
    403: "check the API key and its permissions",
    404: "check base_url (it usually ends in /v1) and the model name",
    429: "the server is rate limiting: try again later or raise its limits",
}
_REFUSED = frozenset({429, 503})  # not processed: always worth another try
_GATEWAY = frozenset({502, 504})  # maybe processed upstream: only when safe to repeat
FORMAT_HINT = "is base_url an OpenAI-compatible API (it usually ends in /v1)?"


class OpenAICompatClient:
    """A client for one OpenAI-compatible base URL (``http://127.0.0.1:8000/v1``).

    ``label`` names the endpoint in messages (``"embeddings endpoint"``), ``hints``
    add per-status hints to :data:`HINTS`, ``timeout_hint`` says what to do when the
    server does not answer in ``timeout`` seconds. At most ``max_retries`` retries,
    waiting ``backoff_s`` doubled each time (at most ``max_backoff_s``) or what the
    server's ``Retry-After`` asks, if that is at most ``max_wait_s``. Thread-safe;
    :meth:`close` it (or use it as a context manager) when done.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | SecretStr | None = None,
        label: str = "OpenAI-compatible endpoint",
        timeout: float = 30.0,
        connect_timeout: float = 10.0,
        hints: Mapping[int, str] | None = None,
        timeout_hint: str = "raise the timeout",
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_wait_s: float = 30.0,
    ) -> None:
        self.base_url = _check_base_url(base_url)
        self.shown_url = _without_password(self.base_url)
        if not timeout > 0 or not connect_timeout > 0:
            raise InvalidInput(f"timeout must be positive, got {timeout}")
        if max_retries < 0 or backoff_s < 0 or max_backoff_s < 0 or max_wait_s < 0:
            raise InvalidInput("max_retries and the waits must not be negative")
        self.label = label
        self.timeout = timeout
        self.hints = {**HINTS, **(hints or {})}
        self.timeout_hint = timeout_hint
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_wait_s = max_wait_s
        key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        self._key = SecretStr(key or "")
        headers = {"Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)),
        )

    def __repr__(self) -> str:
        return f"OpenAICompatClient({self.shown_url!r}, label={self.label!r})"

    def url(self, path: str) -> str:
        """The full URL of ``path`` (``"/embeddings"``), as messages show it."""
        return f"{self.shown_url}/{path.lstrip('/')}"

    @property
    def is_closed(self) -> bool:
        return self._client.is_closed

    def post_json(
        self,
        path: str,
        body: Any,
        *,
        safe_to_repeat: bool = False,
        max_bytes: int | None = None,
        too_large_hint: str = "check the server",
    ) -> Any:
        """``POST`` ``body`` as JSON to ``path``; the reply's JSON, or a ProviderError.
        ``max_bytes``: the reply's body is read up to that many bytes; a larger one is
        a ProviderError (``too_large_hint``), never held whole."""
        if max_bytes is None:
            response = self.post(path, json=body, safe_to_repeat=safe_to_repeat)
            raw = response.content
        else:
            response = self.send(
                "POST", path, json=body, safe_to_repeat=safe_to_repeat, stream=True
            )
            raw = self._read_at_most(path, response, max_bytes, too_large_hint)
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            shown = raw[:2000].decode("utf-8", "replace")
            raise self.fail(path, f"response is not JSON: {snippet(shown)!r}", FORMAT_HINT) from exc

    def _read_at_most(
        self, path: str, response: httpx.Response, max_bytes: int, hint: str
    ) -> bytes:
        got = bytearray()
        try:
            for chunk in response.iter_bytes():
                got += chunk
                if len(got) > max_bytes:
                    raise self.fail(
                        path, f"the reply is larger than {max_bytes:,} bytes; not read", hint
                    )
        except httpx.TimeoutException as exc:
            raise self.fail(
                path, f"no answer within {self.timeout:g} s", self.timeout_hint
            ) from exc
        except httpx.HTTPError as exc:
            raise self.fail(
                path,
                f"the reply broke off: {type(exc).__name__}: {_one_line(str(exc))}",
                "check the server's logs",
            ) from exc
        finally:
            response.close()
        return bytes(got)

    def get_json(
        self,
        path: str,
        params: Mapping[str, str | int] | None = None,
        *,
        format_hint: str = FORMAT_HINT,
    ) -> Any:
        """``GET`` ``path`` with query ``params`` (safe to repeat); the reply's JSON, or a
        ProviderError (``format_hint`` when the reply is not JSON)."""
        response = self.send("GET", path, params=params, safe_to_repeat=True)
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise self.fail(
                path, f"response is not JSON: {snippet(response.text)!r}", format_hint
            ) from exc

    def post(
        self,
        path: str,
        *,
        json: Any = None,
        data: Mapping[str, str] | None = None,
        files: Mapping[str, Any] | None = None,
        safe_to_repeat: bool = False,
    ) -> httpx.Response:
        """``POST`` to ``path`` with retries; the successful response, or a ProviderError.

        Files given as open handles are re-read from the start on a retry.
        """
        return self.send(
            "POST", path, json=json, data=data, files=files, safe_to_repeat=safe_to_repeat
        )

    def stream_lines(self, path: str, body: Any) -> Generator[str]:
        """``POST`` ``body`` as JSON and read the reply as server-sent events: the text of
        each ``data:`` line, as it comes, until the server closes the stream.

        The request is sent (and retried, and its HTTP errors mapped) before this
        returns, like :meth:`post`; a failure while reading the stream is a
        ProviderError too. A stream is never repeated: it may have been processed.
        """
        response = self.send("POST", path, json=body, stream=True)
        return self._events(path, response)

    def _events(self, path: str, response: httpx.Response) -> Generator[str]:
        try:
            for line in response.iter_lines():
                if line.startswith("data:"):
                    yield line[5:].strip()
        except httpx.TimeoutException as exc:
            raise self.fail(
                path, f"the stream stalled for {self.timeout:g} s", self.timeout_hint
            ) from exc
        except httpx.HTTPError as exc:
            raise self.fail(
                path,
                f"the stream broke: {type(exc).__name__}: {_one_line(str(exc))}",
                "check the server's logs",
            ) from exc
        finally:
            response.close()

    def send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json: Any = None,
        data: Mapping[str, str] | None = None,
        files: Mapping[str, Any] | None = None,
        safe_to_repeat: bool = False,
        stream: bool = False,
    ) -> httpx.Response:
        """``method`` to ``path`` with retries (see :meth:`post`); ``stream`` leaves the
        body unread (see :meth:`stream_lines`)."""
        if self._client.is_closed:
            raise self.fail(path, "the client was closed", "make a new one")
        url = f"{self.base_url}/{path.lstrip('/')}"
        tries = 0
        while True:
            tries += 1
            retry = tries <= self.max_retries
            try:
                request = self._client.build_request(
                    method, url, params=params, json=json, data=data, files=files
                )
                response = self._client.send(request, stream=stream)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                if retry:  # the request never left: always safe to send again
                    self._wait(path, f"cannot connect ({_one_line(str(exc))})", tries, None)
                    continue
                raise self.fail(
                    path,
                    f"cannot connect{' ' if tries > 1 else ''}{_after(tries)} "
                    f"({_one_line(str(exc)) or type(exc).__name__})",
                    "is the server running? check base_url",
                ) from exc
            except httpx.TimeoutException as exc:
                raise self.fail(
                    path, f"no answer within {self.timeout:g} s", self.timeout_hint
                ) from exc
            except httpx.HTTPError as exc:
                raise self.fail(
                    path,
                    f"request failed: {type(exc).__name__}: {_one_line(str(exc))}",
                    "check base_url and the server's logs",
                ) from exc
            if response.is_success:
                return response
            if stream:
                self._read_error(path, response)
            status = response.status_code
            message = server_message(response)
            if retry and (status in _REFUSED or (safe_to_repeat and status in _GATEWAY)):
                asked = retry_after(response.headers.get("retry-after"))
                if asked is not None and asked > self.max_wait_s:
                    raise self.fail(
                        path,
                        f"HTTP {status}: {message}",
                        f"the server asks to wait {math.ceil(asked)} s: try again later",
                    )
                response.close()
                self._wait(path, f"HTTP {status}: {message}", tries, asked)
                continue
            raise self.fail(
                path,
                f"HTTP {status}: {message}" + (f" ({_after(tries)})" if tries > 1 else ""),
                self.hints.get(status, "check the server's logs"),
            )

    def _read_error(self, path: str, response: httpx.Response) -> None:
        """Read a streamed error reply's body, so that its message can be shown."""
        try:
            response.read()
        except httpx.HTTPError as exc:
            raise self.fail(
                path,
                f"HTTP {response.status_code}, and its body could not be read",
                "check the server's logs",
            ) from exc
        finally:
            response.close()

    def fail(self, path: str, what: str, hint: str) -> ProviderError:
        """A ProviderError about ``path``, with the API key blanked out of it."""
        return ProviderError(
            self._scrub(f"{self.label} {self.url(path)}: {what}"), self._scrub(hint)
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAICompatClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _wait(self, path: str, what: str, tries: int, asked: float | None) -> None:
        delay = asked if asked is not None else self.backoff_s * 2 ** (tries - 1)
        delay = min(delay, self.max_wait_s if asked is not None else self.max_backoff_s)
        log.warning(
            "%s",
            self._scrub(
                f"{self.label} {self.url(path)}: {what}; trying again in {delay:.2g} s "
                f"({tries} of {self.max_retries + 1} tries made)"
            ),
        )
        time.sleep(delay)

    def _scrub(self, text: str) -> str:
        key = self._key.get_secret_value()
        return text.replace(key, "***") if key else text


def retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date)."""
    if value is None or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def server_message(response: httpx.Response) -> str:
    """The server's own error message: OpenAI's ``error.message`` or a text snippet."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return snippet(response.text) or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            return snippet(error if isinstance(error, str) else json.dumps(error))
    return snippet(response.text)


def snippet(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    line = _one_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _after(tries: int) -> str:
    return f"after {tries} tries" if tries > 1 else ""


def _check_base_url(base_url: object) -> str:
    example = "e.g. http://127.0.0.1:8000/v1"
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        shown = _without_password(base_url) if isinstance(base_url, str) else base_url
        raise InvalidInput(f"base_url must start with http:// or https://, got {shown!r}", example)
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise InvalidInput(f"base_url is not a valid URL: {exc}", example) from None
    if not url.host:
        raise InvalidInput(f"base_url has no host: {_without_password(base_url)!r}", example)
    if url.query or url.fragment:
        raise InvalidInput("base_url must not have a query or a fragment", example)
    return base_url.rstrip("/")


def _without_password(url: str) -> str:
    """``url`` with any ``user:password@`` taken out."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rsplit("@", 1)[1]
    return f"{scheme}://{authority}{slash}{path}"


__all__ = [
    "FORMAT_HINT",
    "HINTS",
    "OpenAICompatClient",
    "retry_after",
    "server_message",
    "snippet",
]
