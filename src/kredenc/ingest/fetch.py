"""Fetch one URL for ingest: http(s) only, no private addresses, bounded in size and time.

The address policy is enforced where it cannot be bypassed: in the network backend
under httpx, on the address actually connected to. The host is resolved once, every
address it resolves to is checked, and the socket is opened to a checked address, so
a name that resolves to a public address for a check and to a private one for the
connection (DNS rebinding) gets nowhere. Redirects are followed by hand, one hop at a
time, and each target is checked again (scheme, literal address, and the connection
it opens).

The time limit is a deadline for the whole fetch (every hop, connect, TLS handshake
and read), not a per-read timeout, so a server that drips one byte at a time cannot
hold an ingest for long. The size limit refuses a too-large ``Content-Length`` up
front and stops reading once the body grows past it.

Not covered: name resolution itself is not bounded by the deadline
(``getaddrinfo`` cannot be interrupted), and environment proxies are ignored on
purpose (a proxy would connect on our behalf, past the address check).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import socket
import ssl
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from email.message import Message
from typing import Any

import httpcore
import httpx

from kredenc.errors import FetchRefused, IngestError, InvalidInput
from kredenc.ingest.redact import redact_url

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_TIMEOUT_S = 20.0
DEFAULT_MAX_REDIRECTS = 5
USER_AGENT = "kredenc/0.1 (+ingest)"

#: ``resolver(host, port)`` returns the IP addresses (as strings) to connect to.
Resolver = Callable[[str, int], Sequence[str]]

_PRIVATE_HINT = (
    "private, loopback and link-local addresses are refused unless allowed: list the host "
    "in the setting fetch_allow_hosts, or set fetch_allow_private (see docs/configuration.md)"
)
# NAT64 (RFC 6052): 64:ff9b::a.b.c.d reaches the IPv4 address a.b.c.d.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# Checked in this order, so that 127.0.0.1 reads "loopback" rather than "private".
_CLASSES = (
    ("unspecified", "is_unspecified"),
    ("loopback", "is_loopback"),
    ("link-local", "is_link_local"),
    ("multicast", "is_multicast"),
    ("reserved", "is_reserved"),
    ("private", "is_private"),
)


@dataclass(frozen=True)
class Fetched:
    """The answer to one fetch: ``final_url`` is where the last redirect led.

    Both URLs have any ``user:password@`` masked (``***@``): they are shown and filed.
    """

    url: str
    final_url: str
    status: int
    content_type: str
    body: bytes = field(repr=False)

    @property
    def media_type(self) -> str:
        """The content type without parameters, lower case (``"text/html"``)."""
        return self.content_type.split(";", 1)[0].strip().lower()

    @property
    def charset(self) -> str | None:
        """The ``charset`` parameter of the content type, if the server sent one."""
        message = Message()
        message["content-type"] = self.content_type
        value = message.get_param("charset")
        return value.strip().lower() if isinstance(value, str) and value.strip() else None


def refusal_reason(address: str) -> str | None:
    """Why ``address`` (an IP literal) must not be connected to, or None if it is public.

    IPv4 addresses embedded in IPv6 ones (IPv4-mapped, 6to4, Teredo, NAT64) are
    checked as well, so ``::ffff:127.0.0.1`` is as loopback as ``127.0.0.1``.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    # Embedded IPv4 first: ``::ffff:127.0.0.1`` should read "loopback", not "private".
    candidates: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            candidates.append(ip.ipv4_mapped)
        if ip.sixtofour is not None:
            candidates.append(ip.sixtofour)
        if ip.teredo is not None:
            candidates.append(ip.teredo[1])
        if ip in _NAT64:
            candidates.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    candidates.append(ip)
    for candidate in candidates:
        for label, attribute in _CLASSES:
            if getattr(candidate, attribute):
                return label
        if not candidate.is_global:
            return "not globally routable"
    return None


def system_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with the system resolver; IP addresses in the order given."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise _Refused(f"cannot resolve host {host!r}", permanent=False) from exc
    addresses: list[str] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


@dataclass(frozen=True)
class AddressPolicy:
    """Which hosts a fetch may connect to.

    ``allow_hosts`` names hosts (``"wiki.internal"``) or host and port
    (``"127.0.0.1:8080"``) that may be private all the same; ``allow_private``
    lifts the address check for every host.
    """

    allow_private: bool = False
    allow_hosts: frozenset[str] = frozenset()
    resolver: Resolver = system_resolver

    def is_exempt(self, host: str, port: int) -> bool:
        if self.allow_private:
            return True
        host = host.lower().strip("[]")
        shown = f"[{host}]" if ":" in host else host
        return host in self.allow_hosts or f"{shown}:{port}" in self.allow_hosts

    def check_literal(self, host: str, port: int) -> None:
        """Refuse a URL whose host is a non-public IP literal (before connecting)."""
        if self.is_exempt(host, port):
            return
        try:
            reason = refusal_reason(host.strip("[]"))
        except ValueError:
            return  # a name: checked when it is resolved, at connect time
        if reason is not None:
            raise _Refused(f"address {host} is {reason}")

    def addresses(self, host: str, port: int) -> list[str]:
        """Resolve ``host`` and check every address; the checked addresses, in order."""
        addresses = list(self.resolver(host, port))
        if not addresses:
            raise _Refused(f"host {host!r} resolves to no address", permanent=False)
        if self.is_exempt(host, port):
            return addresses
        for address in addresses:
            reason = refusal_reason(address)
            if reason is not None:
                if address == host.strip("[]"):
                    raise _Refused(f"address {address} is {reason}")
                raise _Refused(f"{host} resolves to {address}, which is {reason}")
        return addresses


class _Refused(Exception):
    """Raised inside the transport; fetch() turns it into FetchRefused or IngestError."""

    def __init__(self, reason: str, *, permanent: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self._end - time.monotonic()

    def cap(self, timeout: float | None) -> float:
        """``timeout`` shortened to what is left; raises once nothing is."""
        left = self.remaining()
        if left <= 0:
            raise httpcore.ReadTimeout("deadline passed")
        return left if timeout is None else min(timeout, left)


class _GuardedStream(httpcore.NetworkStream):
    """A network stream whose every operation ends by the fetch's deadline."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._deadline.cap(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._deadline.cap(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(ssl_context, server_hostname, self._deadline.cap(timeout))
        return _GuardedStream(inner, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _GuardedBackend(httpcore.NetworkBackend):
    """Resolves, checks, and connects to the checked address (never to the name)."""

    def __init__(self, policy: AddressPolicy, deadline: _Deadline) -> None:
        self._policy = policy
        self._deadline = deadline
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        options = list(socket_options or ())
        failure: httpcore.ConnectError | None = None
        for address in self._policy.addresses(host, port):
            try:
                stream = self._inner.connect_tcp(
                    address, port, self._deadline.cap(timeout), local_address, options
                )
            except httpcore.ConnectError as exc:
                failure = exc
                continue
            log.debug("connected to %s (%s) port %d", host, address, port)
            return _GuardedStream(stream, self._deadline)
        assert failure is not None  # addresses() never returns an empty list
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        raise _Refused("unix sockets are not fetched")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class GuardedTransport(httpx.HTTPTransport):
    """An httpx transport that applies an :class:`AddressPolicy` at connect time.

    httpx does not take a network backend, so the transport's connection pool is
    replaced by one built on the guarded backend; the check below makes a future
    httpx that renames the pool fail loudly instead of silently unguarded.
    """

    def __init__(self, policy: AddressPolicy, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        super().__init__(trust_env=False, retries=0)
        if not isinstance(getattr(self, "_pool", None), httpcore.ConnectionPool):
            raise RuntimeError("this httpx version has no _pool to guard; pin httpx<1")
        self._pool = httpcore.ConnectionPool(
            ssl_context=_ssl_context(),
            network_backend=_GuardedBackend(policy, _Deadline(timeout_s)),
        )


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Building one loads the CA bundle (tens of milliseconds); one serves every fetch.
    return httpx.create_ssl_context()


def fetch(
    url: str,
    *,
    allow_private: bool = False,
    allow_hosts: Collection[str] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_redirects: int = DEFAULT_MAX_REDIRECTS,
    resolver: Resolver | None = None,
) -> Fetched:
    """GET ``url`` and return its body, within the address, size and time limits.

    Raises :class:`~kredenc.errors.FetchRefused` for a refused URL (scheme, address,
    too many redirects, too large, too slow) and :class:`~kredenc.errors.IngestError`
    when the server cannot be reached or answers with an error status. ``resolver``
    replaces the system resolver (tests, or a caller with its own DNS).
    """
    if max_bytes <= 0 or timeout_s <= 0 or max_redirects < 0:
        raise InvalidInput(
            "fetch limits must be positive",
            f"got max_bytes={max_bytes}, timeout_s={timeout_s}, max_redirects={max_redirects}",
        )
    policy = AddressPolicy(
        allow_private=allow_private,
        allow_hosts=frozenset(h.lower() for h in allow_hosts),
        resolver=resolver or system_resolver,
    )
    transport = GuardedTransport(policy, timeout_s)
    with httpx.Client(
        transport=transport,
        follow_redirects=False,
        trust_env=False,
        timeout=httpx.Timeout(timeout_s),
        headers={"User-Agent": USER_AGENT},
    ) as client:
        try:
            return _Hops(client, policy, url, max_bytes, timeout_s).run(max_redirects)
        except IngestError as exc:  # every message of a fetch passes here: no password
            exc.message = redact_url(exc.message)
            exc.args = (exc.message,)
            raise


def check_url(url: str, *, allow_private: bool = False, allow_hosts: Collection[str] = ()) -> None:
    """Refuse, before connecting, a URL that :func:`fetch` would refuse by its form: a
    scheme other than http(s), no host, or a host that is a non-public IP literal
    (``127.0.0.1``, ``10.0.0.1``, ``169.254.169.254``). A name is only checked when
    fetched (it is resolved then, and every redirect is checked again), so passing
    here is no promise that the fetch will connect."""
    policy = AddressPolicy(
        allow_private=allow_private, allow_hosts=frozenset(h.lower() for h in allow_hosts)
    )
    try:
        target = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise FetchRefused(f"{redact_url(url)}: not a valid URL ({exc})") from exc
    try:
        _check_target(url, target, policy, 0)
    except FetchRefused as exc:
        exc.message = redact_url(exc.message)
        exc.args = (exc.message,)
        raise


def _check_target(url: str, target: httpx.URL, policy: AddressPolicy, hop: int) -> None:
    """The checks of one hop before connecting: scheme, host, literal address."""
    where = "" if hop == 0 else f"redirected to {target}: "
    if target.scheme not in ("http", "https"):
        scheme = target.scheme or "no scheme"
        raise FetchRefused(
            f"{url}: {where}only http and https URLs are fetched, not {scheme}",
            "give an http:// or https:// URL, or a local file path",
        )
    if not target.host:
        raise FetchRefused(f"{url}: {where}the URL has no host")
    try:
        port = target.port or (443 if target.scheme == "https" else 80)
        policy.check_literal(target.host, port)
    except _Refused as exc:
        raise FetchRefused(f"{url}: {where}{exc.reason}", _PRIVATE_HINT) from exc


class _Hops:
    """One fetch: follows redirects one hop at a time, translating every failure."""

    def __init__(
        self,
        client: httpx.Client,
        policy: AddressPolicy,
        url: str,
        max_bytes: int,
        timeout_s: float,
    ) -> None:
        self.client = client
        self.policy = policy
        self.url = url
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    def run(self, max_redirects: int) -> Fetched:
        try:
            target = httpx.URL(self.url)
        except httpx.InvalidURL as exc:
            raise FetchRefused(f"{self.url}: not a valid URL ({exc})") from exc
        request = self._request(target)
        for hop in range(max_redirects + 1):
            response = self._send(request, hop)
            try:
                if response.next_request is None:
                    return self._read(response)
                request = self._redirect(response.next_request, hop + 1)
            finally:
                response.close()
            log.debug("%s: redirected to %s", self.url, request.url)
        raise FetchRefused(
            f"{self.url}: more than {max_redirects} redirects",
            "fetch the final URL directly, or raise max_redirects",
        )

    def _request(self, target: httpx.URL, hop: int = 0) -> httpx.Request:
        _check_target(self.url, target, self.policy, hop)
        return self.client.build_request("GET", target)

    def _redirect(self, request: httpx.Request, hop: int) -> httpx.Request:
        # httpx built the next request (method, headers, relative Location); only
        # the target needs checking, so build it again through the same gate.
        return self._request(request.url, hop)

    def _send(self, request: httpx.Request, hop: int) -> httpx.Response:
        where = "" if hop == 0 else f"redirected to {request.url}: "
        try:
            return self.client.send(request, stream=True)
        except _Refused as exc:
            if exc.permanent:
                raise FetchRefused(f"{self.url}: {where}{exc.reason}", _PRIVATE_HINT) from exc
            raise IngestError(f"{self.url}: {where}{exc.reason}", "check the URL") from exc
        except httpx.TimeoutException as exc:
            raise self._too_slow() from exc
        except httpx.HTTPError as exc:
            raise IngestError(
                f"{self.url}: {where}cannot fetch: {exc or type(exc).__name__}",
                "check the URL and that the server is reachable",
            ) from exc

    def _read(self, response: httpx.Response) -> Fetched:
        if response.status_code >= 300:
            raise IngestError(
                f"{self.url}: HTTP {response.status_code} {response.reason_phrase}".rstrip(),
                "check the URL" if response.status_code < 500 else "try again later",
            )
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise self._too_large(f"{int(declared)} bytes")
        body = bytearray()
        try:
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > self.max_bytes:
                    raise self._too_large(f"more than {self.max_bytes} bytes")
        except httpx.TimeoutException as exc:
            raise self._too_slow() from exc
        except httpx.HTTPError as exc:
            raise IngestError(
                f"{self.url}: reading the body failed: {exc or type(exc).__name__}",
                "try again later",
            ) from exc
        return Fetched(
            url=redact_url(self.url),
            final_url=redact_url(str(response.url)),
            status=response.status_code,
            content_type=response.headers.get("content-type", ""),
            body=bytes(body),
        )

    def _too_large(self, size: str) -> FetchRefused:
        return FetchRefused(
            f"{self.url}: the body is larger than the limit of {self.max_bytes} bytes ({size})",
            "raise the size limit for URLs, or download the file and ingest it locally",
        )

    def _too_slow(self) -> FetchRefused:
        return FetchRefused(
            f"{self.url}: no complete answer within {self.timeout_s:g} s",
            "raise the time limit for URLs, or try again later",
        )


__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_REDIRECTS",
    "DEFAULT_TIMEOUT_S",
    "AddressPolicy",
    "Fetched",
    "GuardedTransport",
    "Resolver",
    "check_url",
    "fetch",
    "refusal_reason",
    "system_resolver",
]
