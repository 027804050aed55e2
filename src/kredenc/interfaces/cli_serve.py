"""``kredenc serve``: the REST API, the /v1 proxy, MCP and the page in one process.

The order matters for the person at the terminal: the settings are checked (with
``jobs_queue = "rq"``: a PostgreSQL store and a Redis that answers), the address is
checked (no non-loopback listening without API keys) and the port bound before the
store and the model load, so a busy port fails at once with one line; the URL is printed as soon
as the socket listens (requests wait in its backlog while the app starts); the sample
data goes in beside the running server (:mod:`kredenc.interfaces.server.samples`).
While it serves, ``<store>/server.json`` says where (:mod:`~kredenc.interfaces.server.advert`),
and the lifecycle jobs run on a schedule (:mod:`~kredenc.interfaces.server.schedule`;
``--no-scheduler`` or ``scheduler = false``: only when asked, ``POST /jobs/run``).
Ctrl-C or SIGTERM: uvicorn stops cleanly, the advertisement comes down, the store
closes, exit 0.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kredenc.errors import InvalidInput, MissingExtra
from kredenc.interfaces.cli_common import context, json_option, settings_of, store_home
from kredenc.interfaces.terminal import json_text

if TYPE_CHECKING:
    from kredenc.config import Settings
    from kredenc.engine import Kredenc
    from kredenc.interfaces.server.state import ServerConfig

log = logging.getLogger("kredenc.cli")


@click.command("serve")
@click.option("--host", default=None, help="Address to listen on (default: server_host).")
@click.option(
    "--port",
    default=None,
    type=click.IntRange(0, 65535),
    help="Port (default: server_port, 8765; 0: any free port, printed).",
)
@click.option("--upstream", default=None, metavar="URL", help="The /v1 proxy's upstream (…/v1).")
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="A folder POST /ingest may read by path (repeat; default: server_roots).",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer to this host name (repeat; adds to proxy_allowed_hosts).",
)
@click.option("--no-sample", is_flag=True, help="Do not file the sample data into an empty store.")
@click.option(
    "--sample-pdf",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="A PDF to file with the sample data (make run: the Attention paper).",
)
@click.option(
    "--no-scheduler",
    is_flag=True,
    help="Do not run the lifecycle jobs on a schedule (default: the scheduler setting, on).",
)
@click.option(
    "--read-only",
    is_flag=True,
    help="Serve reads only, from a read-only handle: beside the store's writer, or on a "
    "PostgreSQL replica (writes answer 403 store_read_only).",
)
@json_option
def serve_command(
    host: str | None,
    port: int | None,
    upstream: str | None,
    roots: tuple[Path, ...],
    allow_hosts: tuple[str, ...],
    no_sample: bool,
    sample_pdf: Path | None,
    no_scheduler: bool,
    read_only: bool,
) -> None:
    """Serve the store: REST API, /v1 proxy, MCP at /mcp and the web page at /.

    With API keys in the store (kredenc keys add) every request needs one and is served
    in the key's namespace; without keys it listens on loopback only.
    """
    from kredenc.interfaces.auth import KeyRing
    from kredenc.interfaces.guard import check_bind
    from kredenc.interfaces.proxy import listen

    if importlib.util.find_spec("fastapi") is None:
        raise MissingExtra("kredenc serve", "server")
    from kredenc.interfaces.server.state import ServerConfig

    c = context()
    settings = settings_of(c)
    host = settings.server_host if host is None else host
    port = settings.server_port if port is None else port
    if upstream is not None and not upstream.strip():
        raise InvalidInput("--upstream is empty", "pass the base URL, e.g. http://host:8000/v1")
    scheduler = settings.scheduler and not no_scheduler
    if scheduler:  # an unknown job in scheduler_intervals: one line, before anything starts
        from kredenc.memory.scheduler import job_intervals

        job_intervals(settings.scheduler_intervals)
    if settings.jobs_queue == "rq":
        _check_rq(settings)
    check_bind(host, KeyRing(store_home(c)))  # before the port, the store and the model
    sock = listen(host, port)  # a busy port fails here, at once
    sock.listen(2048)  # connections wait in the backlog while the app starts
    # From the URL line on, a signal at any moment is a clean stop.
    with sock, c.open(read_only=read_only, create=not read_only) as kb, _stop_quietly():
        bound = sock.getsockname()[1]
        url = f"http://{_url_host(host)}:{bound}/"
        if c.json:  # for a script: where it serves, on one line
            click.echo(json_text({"url": url, "store": str(kb.home), "pid": os.getpid()}))
        else:
            click.echo(f"kredenc serving {url} (store {kb.home})")
        config = ServerConfig(
            host=host,
            port=bound,
            upstream=upstream,
            roots=list(roots) or None,
            allowed_hosts=list(allow_hosts),
            scheduler=scheduler,
        )
        _serve(kb, config, sock, no_sample or read_only, sample_pdf)


def _serve(
    kb: Kredenc,
    config: ServerConfig,
    sock: socket.socket,
    no_sample: bool,
    sample_pdf: Path | None,
) -> None:
    from kredenc.interfaces.server import advert
    from kredenc.interfaces.server.run import serve
    from kredenc.interfaces.server.samples import SampleFiler

    url = f"http://{_url_host(config.host)}:{config.port}"

    def say(line: str) -> None:
        click.echo(line, err=True)

    # A store several servers share (PostgreSQL) holds no file lock: a CLI command
    # writes to it directly, so there is nothing to advertise (and no one server); nor
    # does a read-only server, which holds no lock and takes no writes.
    advertise = not kb.store.shared and not kb.read_only
    if advertise:
        advert.write(kb.home, url)
    filer = None
    try:
        if not no_sample:
            pdf = sample_pdf
            if pdf is not None and not pdf.is_file():
                say(f"sample PDF {pdf} not found; skipped")
                pdf = None
            filer = SampleFiler(kb, pdf, say).start()
        serve(kb, config, sock=sock)
    finally:
        if filer is not None:
            filer.finish(say)
        if advertise:
            advert.remove(kb.home)
        say("kredenc stopped")


def _check_rq(settings: Settings) -> None:
    """What the app's RQ queue needs (a PostgreSQL store, a Redis that answers, the
    'workers' extra), checked before the port, the store and the URL line: a server that
    cannot queue refuses in one line, and a script waiting for its URL is never given one.
    The app connects again when it starts (:class:`RqJobs`, the same checks)."""
    from kredenc.interfaces.server.rq_jobs import RqJobs

    RqJobs(settings).close()


def _url_host(host: str) -> str:
    """The host part of the URL a local client uses (a wildcard means loopback)."""
    if host in ("", "0.0.0.0", "*"):
        return "127.0.0.1"
    if host in ("::", "[::]"):
        return "[::1]"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@contextmanager
def _stop_quietly() -> Iterator[None]:
    """Ctrl-C or SIGTERM at any moment is a clean stop, exit 0. While uvicorn serves it
    catches both, shuts down (requests in flight finish) and raises the signal again
    for the handler it found; before it runs (the app still being built, the model
    loading) there is nothing to shut down. Here both signals raise
    ``KeyboardInterrupt``, caught on the way out, so the caller's cleanup runs either
    way and the command ends normally once the store has closed."""
    stop = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, signal.default_int_handler) for s in stop}
    try:
        yield
    except KeyboardInterrupt:
        log.info("stopped by a signal")
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


COMMANDS: tuple[click.Command, ...] = (serve_command,)
