"""``Kredenc.ask`` end to end on a real store: agents and tools from folders and from a
package, the options, the trace, streaming, and the turns it files."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kredenc import plugins
from kredenc.errors import InvalidInput
from kredenc.loop.answer import Step
from kredenc.testing.distributions import write_distribution

from ._tools import SOURCE, agent_file
from .conftest import Open

SHOUT = """
from kredenc.loop.tool import Tool, ToolResult


class Shout(Tool):
    name = "shout"
    reads = ("generate.text",)
    writes = ("shout.text",)

    def run(self, mind, services):
        mind.write("shout.text", mind.read("generate.text").upper())
        return ToolResult(note="shouted")
"""


def test_ask_runs_the_agent_and_files_the_turns(open_loop: Open) -> None:
    with open_loop() as kb:
        got = kb.ask("where was the needle found", agent="finder", session_id="s1")
        assert "needle" in got.text and got.session_id == "s1"
        assert [s.tool for s in got.trace] == ["decide", "retrieve", "generate", "judge", "reflect"]
        assert got.meta["agent"] == "finder" and got.meta["filed"]["session"] == "s1"
        history = kb.session_history("s1")
        assert history == [
            {"role": "user", "content": "where was the needle found"},
            {"role": "assistant", "content": got.text},
        ]
        # Filed as turns: search (and so recall) finds the answer's words.
        turn_ids = set(got.meta["filed"]["ids"])
        assert turn_ids & {h.id for h in kb.search("needle haystack barn", k=10, drawer="turns")}


def test_options_reach_the_tools_and_bad_ones_are_refused(open_loop: Open) -> None:
    with open_loop() as kb:
        one = kb.ask("where does the heron nest", agent="finder", k=1, max_iterations=1)
        assert one.iterations == 1 and one.meta["stopped"] == "budget"
        assert len(one.citations) == 1
        with pytest.raises(InvalidInput, match="unknown ask option 'kk'"):
            kb.ask("x", agent="finder", kk=3)
        with pytest.raises(InvalidInput, match="ask option k must be a whole number"):
            kb.ask("x", agent="finder", k=0)
        with pytest.raises(InvalidInput, match="ask option types must be a list of"):
            kb.ask("x", agent="finder", types=["chunk", "document"])
        with pytest.raises(InvalidInput, match="the question is empty"):
            kb.ask("   ", agent="finder")
        with pytest.raises(InvalidInput, match="unknown agent 'nobody'"):
            kb.ask("x", agent="nobody")


def test_stream_hands_the_text_to_on_delta(open_loop: Open) -> None:
    parts: list[str] = []
    with open_loop() as kb:
        got = kb.ask(
            "where was the needle found", agent="finder", stream=True, on_delta=parts.append
        )
    assert parts and got.text.startswith("".join(parts))


def test_on_step_sees_each_step_as_it_ends(open_loop: Open) -> None:
    seen: list[Step] = []
    with open_loop() as kb:
        got = kb.ask("where was the needle found", agent="finder", on_step=seen.append)
    assert seen and tuple(seen) == got.trace  # every step, in order, as it ended


def test_a_read_only_handle_answers_and_files_nothing(open_loop: Open, store_dir: Path) -> None:
    with open_loop():
        pass
    with open_loop(read_only=True) as kb:
        got = kb.ask("where was the needle found", agent="finder", session_id="s1")
        assert "needle" in got.text and "filed" not in got.meta
        assert kb.session_history("s1") == []


def test_an_agent_naming_a_tool_that_is_not_there_says_which(
    open_loop: Open, folders: tuple[Path, Path]
) -> None:
    _, agents = folders
    (agents / "bad.md").write_text(agent_file("bad", ["decide", "shout"]), encoding="utf-8")
    with open_loop() as kb, pytest.raises(InvalidInput) as err:
        kb.ask("x", agent="bad")
    assert err.value.message == f"{agents / 'bad.md'}:3: agent 'bad' lists unknown tool 'shout'"
    known = err.value.hint.removeprefix("known tools: ").split(", ")
    assert {"count", "decide", "generate", "judge", "reflect", "retrieve"} <= set(known)
    assert "shout" not in known


@pytest.fixture
def shout_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    site = write_distribution(
        tmp_path / "site",
        "kredenc-shout",
        {plugins.TOOLS: {"shout": "kredenc_shout:Shout"}},
        {"kredenc_shout": SHOUT},
    )
    monkeypatch.syspath_prepend(str(site))
    plugins.refresh()
    yield
    sys.modules.pop("kredenc_shout", None)
    plugins.refresh()


def test_a_tool_installed_from_a_package_is_run_by_an_agent_that_lists_it(
    shout_package: None, open_loop: Open, folders: tuple[Path, Path]
) -> None:
    _, agents = folders
    tools = ["decide", "retrieve", "generate", "shout"]
    (agents / "loud.md").write_text(agent_file("loud", tools), encoding="utf-8")
    with open_loop() as kb:
        got = kb.ask("where was the needle found", agent="loud", k=4)
    assert [s.tool for s in got.trace] == tools
    assert got.trace[-1].status == "ok" and got.trace[-1].note == "shouted"


def test_tools_come_from_a_package_alone(
    shout_package: None, open_loop: Open, tmp_path: Path
) -> None:
    # No tools folder at all: the whole pipeline comes from the package.
    pkg = tmp_path / "pkgsite"
    write_distribution(
        pkg,
        "kredenc-finder",
        {
            plugins.TOOLS: {
                n: f"kredenc_finder:{n.title()}" for n in ("decide", "retrieve", "generate")
            }
        },
        {"kredenc_finder": SOURCE},
    )
    sys.path.insert(0, str(pkg))
    plugins.refresh()
    try:
        agents = tmp_path / "pkg-agents"
        agents.mkdir()
        (agents / "pkg.md").write_text(
            agent_file("pkg", ["decide", "retrieve", "generate", "shout"]), encoding="utf-8"
        )
        with open_loop(tmp_path / "other", tools_dir=None, agents_dir=agents) as kb:
            got = kb.ask("where was the needle found", agent="pkg", k=4)
        assert [s.status for s in got.trace] == ["ok"] * 4 and "needle" in got.text
    finally:
        sys.path.remove(str(pkg))
        sys.modules.pop("kredenc_finder", None)
        plugins.refresh()


def test_concurrent_asks_never_see_each_others_mind(
    open_loop: Open, folders: tuple[Path, Path]
) -> None:
    # Each ask runs on its own mind: eight threads asking different questions each get
    # the answer to their own (the finder generates from the chunks of its own search).
    # Asked twice, a question finds a chunk, not its own earlier turn: retrieve searches
    # ask.options["types"], chunks and memories by default.
    questions = {
        "where was the needle found": "needle",
        "where does the heron nest": "heron",
        "when are invoices due": "Invoices",
        "who logs the weather": "lighthouse",
    }
    _, agents = folders
    plain = agent_file("plain", ["decide", "retrieve", "generate"])
    (agents / "plain.md").write_text(plain, encoding="utf-8")
    asked = list(questions) * 2
    with open_loop() as kb, ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda q: kb.ask(q, agent="plain", k=1, session_id=q), asked))
        for question in questions:
            assert len(kb.session_history(question)) == 4
    for question, got in zip(asked, answers, strict=True):
        assert got.question == question
        assert questions[question] in got.citations[0].text, (question, got.text)


def test_the_facade_takes_services_from_modules_this_build_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kredenc import engine

    # A module that is not there means no such service; a module that fails to import
    # for another reason (its own missing dependency) is an error, not silence.
    assert engine._optional("kredenc.loop.no_such_module", "make", None) is None
    site = tmp_path / "site"
    site.mkdir()
    (site / "kredenc_broken_service.py").write_text("import no_such_dependency\n")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency"):
        engine._optional("kredenc_broken_service", "make", None)
    sys.modules.pop("kredenc_broken_service", None)
    assert engine._optional("json", "dumps", [1]) == "[1]"


def test_a_scoped_view_uses_its_handles_services(open_loop: Open) -> None:
    with open_loop() as kb:
        view = kb.scoped("elsewhere")
        assert view._services() is kb._services()
        assert view.scoped("third")._services() is kb._services()
