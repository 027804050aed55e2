"""fetch(): real HTTP servers on 127.0.0.1; nothing leaves the machine."""

from __future__ import annotations

import gzip
import http.server
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from kredenc.errors import FetchRefused, IngestError, InvalidInput
from kredenc.ingest.fetch import AddressPolicy, check_url, fetch, refusal_reason

Route = Callable[[http.server.BaseHTTPRequestHandler], None]

PAGE = b"<!doctype html><title>Hello</title><p>Hello from loopback.</p>"


@dataclass
class Server:
    """A loopback HTTP server; ``routes`` maps a path to a handler, ``hits`` logs paths."""

    routes: dict[str, Route]
    hits: list[str] = field(default_factory=list)
    port: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _serve(routes: dict[str, Route]) -> Iterator[Server]:
    server = Server(routes)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            server.hits.append(self.path)
            route = server.routes.get(self.path.split("?", 1)[0])
            if route is None:
                self.send_error(404, "Not Found")
                return
            route(self)

        def log_message(self, format: str, *args: object) -> None:
            pass

    class Quiet(http.server.ThreadingHTTPServer):
        daemon_threads = True
        block_on_close = False

        def handle_error(self, request: object, client_address: object) -> None:
            pass  # a client that hung up on purpose (size or time limit)

    httpd = Quiet(("127.0.0.1", 0), Handler)
    server.port = httpd.server_port
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()


def _send(
    status: int = 200,
    body: bytes = PAGE,
    headers: dict[str, str] | None = None,
) -> Route:
    def handle(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        all_headers = {"Content-Type": "text/html; charset=utf-8", **(headers or {})}
        all_headers.setdefault("Content-Length", str(len(body)))
        for name, value in all_headers.items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(body)

    return handle


def _redirect(location: str, status: int = 302) -> Route:
    return _send(status, b"", {"Location": location})


def _chunked(chunk: bytes, count: int, pause_s: float = 0.0) -> Route:
    def handle(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for _ in range(count):
            h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            h.wfile.flush()
            time.sleep(pause_s)
        h.wfile.write(b"0\r\n\r\n")

    return handle


def _sleep_then(seconds: float) -> Route:
    def handle(h: http.server.BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)
        _send()(h)

    return handle


@pytest.fixture
def site() -> Iterator[Server]:
    yield from _serve({"/page": _send(), "/missing": _send(404, b"gone")})


@pytest.fixture
def other() -> Iterator[Server]:
    """A second loopback server: the private target a redirect points at."""
    yield from _serve({"/secret": _send(body=b"internal admin page")})


def _only(server: Server) -> set[str]:
    """allow_hosts that exempts exactly this server (host and port)."""
    return {f"127.0.0.1:{server.port}"}


# --- the address policy ----------------------------------------------------------


def test_loopback_is_refused_by_default(site: Server) -> None:
    with pytest.raises(FetchRefused) as caught:
        fetch(f"{site.base}/page")
    assert caught.value.message == f"{site.base}/page: address 127.0.0.1 is loopback"
    assert "fetch_allow_private" in caught.value.hint
    assert site.hits == []


def test_loopback_is_fetched_when_private_addresses_are_allowed(site: Server) -> None:
    got = fetch(f"{site.base}/page", allow_private=True)
    assert got.status == 200
    assert got.body == PAGE
    assert got.final_url == got.url == f"{site.base}/page"
    assert got.media_type == "text/html"
    assert got.charset == "utf-8"


def test_a_name_is_checked_on_the_address_it_resolves_to(site: Server) -> None:
    # The URL holds no IP literal: only the connect-time check can see the loopback.
    calls: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"]

    loopback = r"kredenc\.test resolves to 127\.0\.0\.1, which is loopback"
    with pytest.raises(FetchRefused, match=loopback):
        fetch(f"http://kredenc.test:{site.port}/page", resolver=resolver)
    assert site.hits == []


def test_the_connection_goes_to_the_checked_address(site: Server) -> None:
    # The system resolver has never heard of kredenc.test: the page can only come
    # back if the socket was opened to the address the policy resolved and checked,
    # and the name is resolved once, so a second answer cannot differ from the first.
    calls: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"]

    got = fetch(f"http://kredenc.test:{site.port}/page", allow_private=True, resolver=resolver)
    assert got.body == PAGE
    assert calls == ["kredenc.test"]


def test_a_name_with_any_private_address_is_refused(site: Server) -> None:
    def resolver(host: str, port: int) -> list[str]:
        return ["93.184.215.14", "10.1.2.3"]

    with pytest.raises(FetchRefused, match=r"resolves to 10\.1\.2\.3, which is private"):
        fetch("http://mixed.test/", resolver=resolver)


def test_localhost_by_name_is_refused(site: Server) -> None:
    with pytest.raises(FetchRefused, match=r"localhost resolves to .*loopback"):
        fetch(f"http://localhost:{site.port}/page")
    assert site.hits == []


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.8", "private"),
        ("10.0.0.8", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("224.0.0.251", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "not globally routable"),
        ("2002:7f00:1::", "loopback"),
        ("64:ff9b::a00:1", "private"),
        ("93.184.215.14", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_refusal_reason(address: str, reason: str | None) -> None:
    assert refusal_reason(address) == reason


# --- redirects -------------------------------------------------------------------


def test_a_redirect_within_an_allowed_host_is_followed(site: Server) -> None:
    site.routes["/old"] = _redirect("/page", 301)
    got = fetch(f"{site.base}/old", allow_hosts=_only(site))
    assert got.body == PAGE
    assert got.final_url == f"{site.base}/page"
    assert site.hits == ["/old", "/page"]


def test_a_redirect_to_a_loopback_address_is_refused(site: Server, other: Server) -> None:
    site.routes["/go"] = _redirect(f"{other.base}/secret")
    with pytest.raises(FetchRefused) as caught:
        fetch(f"{site.base}/go", allow_hosts=_only(site))
    assert caught.value.message == (
        f"{site.base}/go: redirected to {other.base}/secret: address 127.0.0.1 is loopback"
    )
    assert site.hits == ["/go"]
    assert other.hits == []


def test_a_redirect_to_a_loopback_name_is_refused_at_connect_time(
    site: Server, other: Server
) -> None:
    site.routes["/go"] = _redirect(f"http://localhost:{other.port}/secret")
    refused = r"redirected to http://localhost:\d+/secret: localhost resolves"
    with pytest.raises(FetchRefused, match=refused):
        fetch(f"{site.base}/go", allow_hosts=_only(site))
    assert other.hits == []


def test_a_redirect_to_another_scheme_is_refused(site: Server) -> None:
    site.routes["/go"] = _redirect("file:///etc/passwd")
    refused = r"redirected to file://\S*/etc/passwd: only http and https"
    with pytest.raises(FetchRefused, match=refused):
        fetch(f"{site.base}/go", allow_private=True)


def test_a_redirect_loop_stops_at_the_limit(site: Server) -> None:
    site.routes["/loop"] = _redirect("/loop")
    with pytest.raises(FetchRefused, match="more than 3 redirects"):
        fetch(f"{site.base}/loop", allow_private=True, max_redirects=3)
    assert site.hits == ["/loop"] * 4


# --- schemes, statuses, connection errors -----------------------------------------


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://example.org/a.html", "gopher://example.org/", "example.org/page"],
)
def test_only_http_and_https_are_fetched(url: str) -> None:
    with pytest.raises(FetchRefused, match="only http and https URLs are fetched"):
        fetch(url)


def test_an_error_status_is_one_clear_line(site: Server) -> None:
    with pytest.raises(IngestError) as caught:
        fetch(f"{site.base}/missing", allow_private=True)
    assert not isinstance(caught.value, FetchRefused)
    assert caught.value.message == f"{site.base}/missing: HTTP 404 Not Found"
    assert "\n" not in str(caught.value)


def test_a_closed_port_is_an_ingest_error(site: Server) -> None:
    with socket.socket() as sock:  # bound, then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(IngestError, match="cannot fetch"):
        fetch(f"http://127.0.0.1:{port}/", allow_private=True)


def test_limits_must_be_positive() -> None:
    with pytest.raises(InvalidInput):
        fetch("https://example.org/", max_bytes=0)
    with pytest.raises(InvalidInput):
        fetch("https://example.org/", timeout_s=-1)


# --- size and time ----------------------------------------------------------------


def test_a_declared_length_over_the_limit_is_refused_up_front(site: Server) -> None:
    site.routes["/big"] = _send(body=b"x" * 5000)
    with pytest.raises(FetchRefused, match=r"larger than the limit of 1000 bytes \(5000 bytes\)"):
        fetch(f"{site.base}/big", allow_private=True, max_bytes=1000)


def test_a_streamed_body_is_cut_at_the_limit(site: Server) -> None:
    # No Content-Length: 1000 chunks of 1 KiB would be 1 MiB; reading stops past 4 KiB.
    site.routes["/stream"] = _chunked(b"y" * 1024, 1000)
    with pytest.raises(FetchRefused, match="more than 4096 bytes"):
        fetch(f"{site.base}/stream", allow_private=True, max_bytes=4096)


def test_the_limit_counts_decompressed_bytes(site: Server) -> None:
    bomb = gzip.compress(b"\0" * 1_000_000)
    site.routes["/bomb"] = _send(body=bomb, headers={"Content-Encoding": "gzip"})
    assert len(bomb) < 10_000
    with pytest.raises(FetchRefused, match="larger than the limit of 10000 bytes"):
        fetch(f"{site.base}/bomb", allow_private=True, max_bytes=10_000)


def test_a_body_within_the_limit_is_read_whole(site: Server) -> None:
    site.routes["/stream"] = _chunked(b"z" * 1000, 4)
    got = fetch(f"{site.base}/stream", allow_private=True, max_bytes=4000)
    assert got.body == b"z" * 4000


def test_a_server_that_does_not_answer_runs_into_the_time_limit(site: Server) -> None:
    site.routes["/slow"] = _sleep_then(3.0)
    started = time.monotonic()
    with pytest.raises(FetchRefused, match=r"no complete answer within 0\.5 s"):
        fetch(f"{site.base}/slow", allow_private=True, timeout_s=0.5)
    assert time.monotonic() - started < 2.0


def test_the_time_limit_covers_the_whole_fetch_not_each_read(site: Server) -> None:
    # A byte every 0.2 s never trips a per-read timeout of 1 s; the deadline does.
    site.routes["/drip"] = _chunked(b"d", 50, pause_s=0.2)
    started = time.monotonic()
    with pytest.raises(FetchRefused, match="no complete answer within 1 s"):
        fetch(f"{site.base}/drip", allow_private=True, timeout_s=1.0)
    assert time.monotonic() - started < 2.5


def test_allow_hosts_matches_the_default_port() -> None:
    policy = AddressPolicy(allow_hosts=frozenset({"10.0.0.5:80", "[::1]:8443", "wiki.internal"}))
    policy.check_literal("10.0.0.5", 80)  # http://10.0.0.5/ has no port in the URL
    policy.check_literal("[::1]", 8443)
    assert policy.is_exempt("WIKI.internal", 443)
    assert not policy.is_exempt("10.0.0.5", 8080)


# --- check_url: what is refused before connecting -----------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1/", "address 127.0.0.1 is loopback"),
        ("http://10.0.0.7:8080/x", "address 10.0.0.7 is private"),
        ("http://169.254.169.254/latest/meta-data/", "address 169.254.169.254 is link-local"),
        ("http://[::ffff:127.0.0.1]/", "is loopback"),
        ("ftp://example.org/", "only http and https URLs are fetched"),
        ("http:///nohost", "the URL has no host"),
    ],
)
def test_check_url_refuses_what_fetch_would_before_connecting(url: str, reason: str) -> None:
    with pytest.raises(FetchRefused, match=re.escape(reason)):
        check_url(url)


def test_check_url_passes_names_and_allowed_hosts_and_hides_passwords() -> None:
    check_url("https://example.org/page")  # a name is checked when fetched
    check_url("http://127.0.0.1:8080/", allow_hosts=["127.0.0.1:8080"])
    check_url("http://10.0.0.7/", allow_private=True)
    with pytest.raises(FetchRefused) as caught:
        check_url("http://user:hunter2@127.0.0.1/")
    assert "hunter2" not in caught.value.message
