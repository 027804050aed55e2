"""What every ``kredenc`` command module shares: the context object, ``--json``, text checks.

``cli.py`` (the group and the entry point) and the ``cli_*`` command modules import
from here; nothing imports ``cli.py`` but the entry point, so the command modules and
the group that registers them form no cycle.
"""

from __future__ import annotations

import functools
import logging
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import click

from kredenc.checks import check_scope_id
from kredenc.errors import InvalidInput, KredencError
from kredenc.fields import SCOPE_IDS
from kredenc.interfaces.terminal import escaped_output, json_text

F = TypeVar("F", bound=Callable[..., Any])


#: The commands that also run against a server (``--url``, or by themselves when a
#: running ``kredenc serve`` holds the store): their paths below ``kredenc``. The others
#: (rebuild, compact, keys, proxy, serve, eval, demo, …) work on a local store only.
REMOTE_COMMANDS = frozenset(
    {
        "remember", "get", "forget", "score", "history", "relate", "search", "graph", "recall",
        "ask",
        "session show", "session clear", "list memories", "list documents", "list sessions",
        "ingest", "stats", "export", "import", "jobs run", "check",
    }
)  # fmt: skip


class Context:
    """The group's options, handed to every command (``click`` context ``obj``)."""

    def __init__(
        self,
        store: str | None,
        namespace: str | None,
        as_json: bool,
        url: str | None = None,
        api_key: str | None = None,
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.json = as_json
        self.url = url
        self.api_key = api_key

    def open(self, *, read_only: bool = False, create: bool = True) -> Any:
        """The store, read-only or for writing; a write that only changes what is
        there (``create=False``: forget, score, rebuild, …) refuses a missing store
        rather than create an empty one under a mistyped path, as reads do.

        With ``--url`` it is a :class:`kredenc.Client` with the same methods; when a
        running server holds the store (and advertises itself, see
        :mod:`kredenc.interfaces.server.advert`) the command goes through it."""
        from kredenc.engine import Kredenc
        from kredenc.errors import StoreLocked
        from kredenc.storage import layout
        from kredenc.storage.backends import discard_log, is_postgres

        if self.url:
            return self.client(self.url)
        home = store_home(self)
        if not create:
            layout.require_store(home)
        elif not read_only and not home.exists():
            CREATED.append(home)  # a failed command takes it away again (main)
        try:
            # A command is one short process: nothing recalls later to find the model
            # warm (`recall` and `proxy` warm up themselves), and the exit would wait.
            kb = Kredenc.open(
                self.store, self.namespace, read_only=read_only, recall_warm_at_open=False
            )
        except StoreLocked as exc:
            return self.through_server(exc)
        if home in CREATED and is_postgres(kb.store.settings):
            made = kb.store.made_log
            MADE_LOGS[home] = (  # an adopted log stays; the new folder only points at it
                functools.partial(discard_log, kb.store.settings, made)
                if made is not None
                else lambda: True
            )
        return kb

    def client(self, url: str) -> Any:
        """A :class:`kredenc.Client` for ``url`` with the command's API key. A server
        serves the namespace of the key: a ``--namespace`` that is not that one is
        refused, never silently replaced."""
        from kredenc.client import Client

        client = Client(url, self.api_key)
        if self.namespace is not None:
            served = client.stats()["namespace"]
            if served != self.namespace:
                client.close()
                raise InvalidInput(
                    f"the server at {url} serves namespace {served!r} to this key, "
                    f"not {self.namespace!r}",
                    f"pass --api-key with a key bound to {self.namespace!r} (made with "
                    "'kredenc keys add' on the server's store), or leave out --namespace",
                )
        return client

    def through_server(self, locked: Exception) -> Any:
        """The running server that holds the store, when it advertises itself: this
        command through it, or (no remote form) an error that names it."""
        from kredenc.errors import StoreLocked
        from kredenc.interfaces.server import advert

        found = advert.read(store_home(self))
        if found is None:
            raise locked
        if command_name() in REMOTE_COMMANDS:
            click.echo(f"using the running server at {found.url}", err=True)
            return self.client(found.url)
        raise StoreLocked(
            f"store is held by the running server at {found.url} (pid {found.pid})",
            f"stop that server to run '{command_name()}' here; commands with a remote form "
            f"go through it (--url {found.url})",
        )

    def emit(self, data: Any, human: Callable[[], None]) -> None:
        if self.json:
            click.echo(json_text(data))
        else:
            with escaped_output():  # no control character reaches the terminal raw
                human()


def json_option(func: F) -> F:
    """``--json`` after the command name (the group takes it before)."""

    def callback(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            ctx.meta["kredenc.json"] = True

    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=False,
        callback=callback,
        help="Print JSON.",
    )(func)


#: The group's options that every command also takes after its name (``--json`` is
#: :func:`json_option`'s): ``ctx.meta`` key, the option's declarations, its help.
GLOBAL_OPTIONS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("kredenc.store", ("--store",), "Store directory (as before the command)."),
    ("kredenc.namespace", ("--namespace", "-n"), "Namespace (as before the command)."),
    ("kredenc.verbose", ("-v", "--verbose"), "Log progress to stderr."),
    ("kredenc.debug", ("--debug",), "Show tracebacks of internal errors."),
    ("kredenc.url", ("--url",), "A running kredenc server to use (as before the command)."),
    ("kredenc.api_key", ("--api-key",), "The server's API key (as before the command)."),
)
_METAVARS = {"kredenc.store": "DIR", "kredenc.url": "URL", "kredenc.api_key": "KEY"}


def add_global_options(command: click.Command) -> None:
    """Let ``command`` (and a group's subcommands) take the group's options after its
    name too: ``kredenc search tea --store ./mem``. An option the command declares
    itself (``keys add --namespace``) stays the command's."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_global_options(sub)
        return
    taken = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    for key, decls, help_text in GLOBAL_OPTIONS:
        name = key.replace(".", "_")  # the parameter's name: never a command's own
        if taken & set(decls) or any(p.name == name for p in command.params):
            continue
        flag = key in ("kredenc.verbose", "kredenc.debug")
        command.params.append(
            click.Option(
                [*decls, name],
                is_flag=flag,
                default=None,
                show_default=False,
                expose_value=False,
                callback=_remember(key),
                metavar=None if flag else _METAVARS.get(key, "NAME"),
                help=help_text,
            )
        )
    if command.callback is not None:
        command.callback = _local_unless_remote(command.callback)


def _local_unless_remote(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` refusing ``--url`` (exit 2) when its command has no remote form."""

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        c = context()
        if c.url and command_name() not in REMOTE_COMMANDS:
            raise InvalidInput(
                f"'kredenc {command_name()}' works on a local store only; it has no remote "
                "form for --url (or KREDENC_URL)",
                "leave out --url and unset KREDENC_URL, and run it where the store is",
            )
        return callback(*args, **kwargs)

    return run


def command_name() -> str:
    """The running command's path below ``kredenc`` (``session show``)."""
    return click.get_current_context().command_path.partition(" ")[2]


def _remember(key: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is None or value is False:
            return
        ctx.meta[key] = value
        if key == "kredenc.verbose":
            logging.getLogger().setLevel(logging.INFO)

    return callback


def settings_of(c: Context) -> Any:
    """The settings of the store the command names (its config.toml, else defaults)."""
    from kredenc.config import load_settings

    return load_settings(c.store, namespace=c.namespace)


#: Store folders this command created (:meth:`Context.open`, writing, the folder new).
CREATED: list[Path] = []
#: For each of those whose log another backend keeps (PostgreSQL): what takes away the
#: log if this command made it (a new schema) and it holds no record
#: (``backends.discard_log``); whether the folder may go with it (an adopted log stays,
#: and the folder, which only points at it, goes).
MADE_LOGS: dict[Path, Callable[[], bool]] = {}


def discard_created_stores() -> None:
    """After a command failed: take away each store folder it created in which nothing
    was filed (its log holds no record), so a write under a mistyped --store that
    failed leaves no empty store behind. A folder that existed before is never touched,
    nor one whose log holds records."""
    from kredenc.storage import layout
    from kredenc.storage.haystack import HEADER_SIZE

    while CREATED:
        home = CREATED.pop()
        log = home / layout.LOG_FILE
        try:
            empty_log = log.is_file() and log.stat().st_size <= HEADER_SIZE
            # No log file: another backend keeps the log (PostgreSQL), unless the store
            # was never made (no store.json either). A log this command made there goes
            # if it holds no record, and the folder with it (MADE_LOGS).
            discard = MADE_LOGS.pop(home, None)
            made_gone = discard is not None and discard()
            if empty_log or made_gone or (home.is_dir() and not layout.is_store(home)):
                shutil.rmtree(home)
        except (KredencError, OSError):
            continue  # best effort: what is left is an empty store, as before
    MADE_LOGS.clear()


def is_remote(kb: Any) -> bool:
    """Whether ``kb`` (what :meth:`Context.open` gave) is a server's client, not a store."""
    from kredenc.client import Client

    return isinstance(kb, Client)


def store_home(c: Context) -> Path:
    """The store directory the command names (``--store``, else ``KREDENC_HOME``)."""
    from kredenc.config import resolve_home

    return resolve_home(c.store)


def context() -> Context:
    """The running command's :class:`Context`, with ``--json`` from either place."""
    ctx = click.get_current_context()
    obj = ctx.find_object(Context)
    assert obj is not None
    if ctx.meta.get("kredenc.json"):
        obj.json = True
    if ctx.meta.get("kredenc.store") is not None:
        obj.store = ctx.meta["kredenc.store"]
    if ctx.meta.get("kredenc.namespace") is not None:
        obj.namespace = ctx.meta["kredenc.namespace"]
    if ctx.meta.get("kredenc.url") is not None:
        obj.url = ctx.meta["kredenc.url"]
    if ctx.meta.get("kredenc.api_key") is not None:
        obj.api_key = ctx.meta["kredenc.api_key"]
    return obj


def count_of(n: int, noun: str) -> str:
    """``1 document``, ``2 documents``, ``0 chunks``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def check_arg_text(text: str, what: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid UTF-8", f"pass the {what} as UTF-8") from None
    return text


def check_query(text: str) -> str:
    """A search's QUERY: UTF-8 and not blank (a blank one is a usage error, not 'no
    hits')."""
    text = check_arg_text(text, "query")
    if not text.strip():
        raise InvalidInput("the query is empty", "give the words to search for")
    return text


def read_stdin_text() -> str:
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"standard input is not valid UTF-8 (byte {exc.start})", "pass UTF-8 text"
        ) from None


def memory_json(mem: Any) -> dict[str, Any]:
    data = asdict(mem)
    data["tags"] = list(mem.tags)
    return data


def corrected_line(corrections: dict[str, str]) -> str:
    """What a search or recall searched its misspelt words as: "searched 'x' as 'y' (no
    card holds the word as typed)"; "" when nothing was corrected."""
    if not corrections:
        return ""
    fixed = ", ".join(f"{a!r} as {b!r}" for a, b in corrections.items())
    return f"searched {fixed} (no card holds the word as typed)"


def short(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def scope_options(func: F) -> F:
    """``--user-id``, ``--agent-id`` and ``--run-id``: whose records (inside the
    namespace). The command gets them as ``user_id``, ``agent_id`` and ``run_id``."""
    for key in reversed(SCOPE_IDS):
        func = click.option(
            f"--{key.replace('_', '-')}",
            key,
            metavar="ID",
            default=None,
            help=f"Only records filed with this {key.replace('_', ' ')}"
            + (" (inside the namespace)." if key == "user_id" else "."),
        )(func)
    return func


def scope_ids(**given: str | None) -> dict[str, str | None]:
    """The ``--user-id``/``--agent-id``/``--run-id`` values, checked now (a bad one is a
    usage error before the store opens)."""
    return {key: check_scope_id(f"--{key.replace('_', '-')}", given.get(key)) for key in SCOPE_IDS}


def scope_text(record: Any) -> str:
    """``user u1 · agent a · run r`` for the ids a record carries ('' when none)."""
    names = {"user_id": "user", "agent_id": "agent", "run_id": "run"}
    return " · ".join(
        f"{names[key]} {getattr(record, key)}"
        for key in SCOPE_IDS
        if getattr(record, key, None) is not None
    )
