"""``kredenc ask`` (a cited answer from the store) and ``kredenc session show|clear``."""

from __future__ import annotations

from typing import Any

import click

from kredenc.interfaces.cli_common import (
    check_arg_text,
    context,
    json_option,
    read_stdin_text,
    short,
)
from kredenc.interfaces.terminal import escape
from kredenc.loop.answer import REVISED


@click.command("ask")
@click.argument("question")
@click.option("--session", "session_id", default=None, help="Session id (keeps the history).")
@click.option("--agent", default="answer", show_default=True, help="The agent (a markdown file).")
@click.option("-k", "k", type=click.IntRange(1, 200), help="Chunks retrieved (default: ask_k).")
@click.option("--max-iterations", type=click.IntRange(1, 10), help="Most loop iterations.")
@click.option("--stream", is_flag=True, help="Print the answer's text as it is generated.")
@json_option
def ask_command(
    question: str,
    session_id: str | None,
    agent: str,
    k: int | None,
    max_iterations: int | None,
    stream: bool,
) -> None:
    """Answer QUESTION (or - for standard input) from the store, with numbered sources,
    each chunk's verdict and the judge's confidence. The question and the answer are
    filed as turns of the session (a one-off session without --session)."""
    c = context()
    question = read_stdin_text() if question == "-" else check_arg_text(question, "question")
    streamed: list[str] = []

    def on_delta(text: str) -> None:
        streamed.append(text)
        click.echo(escape(text), nl=False)

    live = stream and not c.json
    with c.open(create=False) as kb:  # a mistyped --store is refused, not created
        answer = kb.ask(
            question,
            session_id=session_id,
            agent=agent,
            k=k,
            max_iterations=max_iterations,
            stream=stream,
            on_delta=on_delta if live else None,
        )
    data = answer.to_json()

    def human() -> None:
        _finish_stream("".join(streamed), answer.text)
        if answer.citations:
            click.echo("")
        for cite in answer.citations:
            click.echo(f"[{cite.n}] {_where(cite)}  score {cite.score:.3f}")
        click.echo(_card(answer))

    c.emit(data, human)


def _finish_stream(sent: str, text: str) -> None:
    """Print the answer ``text`` after the ``sent`` stream so that it is seen once: the
    stream's last answer (after the last :data:`REVISED`, when the loop revised it) is
    the kept one, and only its rest follows (citation marks added after); else the
    kept answer, whole, after the revision marker."""
    last = sent.rsplit(REVISED, 1)[-1]
    if last and text.startswith(last):
        click.echo(text[len(last) :])
    else:
        click.echo((REVISED if sent else "") + text)


def _where(cite: Any) -> str:
    """A source as one line: its title (or origin, or the text's start) and page or time."""
    where = cite.title or cite.origin or short(cite.text, 60)
    if cite.page is not None:
        where += f" p.{cite.page}"
    elif cite.start_s is not None:
        where += f" @{int(cite.start_s) // 60}:{int(cite.start_s) % 60:02d}"
    return where


def _card(answer: Any) -> str:
    """The confidence card: the judge's band and score, sufficiency, hallucination, loop."""
    loop = f"{answer.iterations} iteration{'s' if answer.iterations != 1 else ''}, {answer.mode}"
    ev = answer.evaluation
    if ev is None:
        return f"confidence: not judged · {loop}"
    parts = [
        f"confidence {ev.confidence_score} ({ev.band})",
        "context sufficient" if ev.context_sufficient else "context insufficient",
    ]
    if ev.hallucination_detected:
        parts.append(f"hallucination: {ev.hallucination_reason or 'detected'}")
    return " · ".join([*parts, loop])


@click.group("session")
def session_group() -> None:
    """The messages of an ask session (kept in the store as turns)."""


@session_group.command("show")
@click.argument("session_id")
@json_option
def session_show(session_id: str) -> None:
    """Show the session's last messages (ask_session_turns, 20), oldest first."""
    c = context()
    session_id = check_arg_text(session_id, "session id")
    with c.open(read_only=True) as kb:
        messages = kb.session_history(session_id)

    def human() -> None:
        if not messages:
            click.echo(f"session {session_id}: no messages")
        for m in messages:
            click.echo(f"{m['role']}: {m['content']}")

    c.emit({"session": session_id, "messages": messages}, human)


@session_group.command("clear")
@click.argument("session_id")
@json_option
def session_clear(session_id: str) -> None:
    """Forget every turn of the session (gone from search and recall too)."""
    c = context()
    session_id = check_arg_text(session_id, "session id")
    with c.open(create=False) as kb:
        forgotten = kb.clear_session(session_id)
    c.emit(
        {"session": session_id, "forgotten": forgotten},
        lambda: click.echo(f"session {session_id}: {forgotten} turns forgotten"),
    )


COMMANDS = (ask_command, session_group)
