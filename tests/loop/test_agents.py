"""Markdown agents: front matter parsed and checked with file and line, disabled ones
skipped, a folder replacing shipped agents, hot reload, and the shipped answer agent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kredenc.config import Settings
from kredenc.errors import InvalidInput
from kredenc.loop.agents import SHIPPED, AgentLibrary, library_for, parse_agent
from kredenc.loop.registry import ToolRegistry

from ._tools import SOURCE, agent_file

ROLES = ["decide", "rewrite", "retrieve", "grade", "verify", "generate", "judge", "reflect"]


def write(path: Path, text: str) -> Path:
    """Write ``path`` so that its modification time surely differs from before."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    if path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))
    return path


def test_the_shipped_answer_agent_is_the_full_pipeline() -> None:
    agent = library_for(None).get("answer")
    assert agent.tools == tuple(ROLES)
    assert agent.path == SHIPPED / "answer.md"
    assert agent.enabled and agent.max_iterations == 3
    assert "[OUTSIDE KNOWLEDGE]" in agent.instructions
    assert not agent.instructions.startswith("---")
    # Iterations repeat from the first retrieval-side tool: the one after rewrite.
    assert agent.tools[agent.repeat_from()] == "retrieve"


def test_front_matter_fields_are_read(tmp_path: Path) -> None:
    path = write(
        tmp_path / "a.md",
        agent_file("scout", ["decide", "judge"], capabilities="[search, cite]", model="small")
        + "More instructions.\n",
    )
    agent = parse_agent(path)
    assert (agent.name, agent.tools, agent.capabilities) == (
        "scout",
        ("decide", "judge"),
        ("search", "cite"),
    )
    assert agent.model == "small" and agent.max_iterations is None
    assert agent.instructions == "Instructions of scout.\nMore instructions."
    assert agent.repeat_from() == 0  # no rewrite: the whole pipeline repeats


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ("no front matter\n", 1, "starts with '---'"),
        ("---\nname: x\ntools: [a]\n", 1, "no closing '---'"),
        ("---\nname: x\ntools: [a\n---\n", 4, "not valid YAML"),
        ("---\nname: x\ntools: [a]\nenabeld: true\n---\n", 4, "enabeld is not an agent field"),
        ("---\nname: x\n---\n", 2, "tools must be a non-empty list"),
        ("---\ntools: [a]\n---\n", 2, "name is missing"),
        ("---\nname: x\ntools: [a, a]\n---\n", 3, "lists a tool twice"),
        ("---\nname: x\ntools: [a]\nmax_iterations: 0\n---\n", 4, "max_iterations must be"),
        ("---\nname: x\ntools: [a]\nenabled: maybe\n---\n", 4, "enabled must be true or false"),
        ("---\nname: x\ntools: [a]\nloop_from: b\n---\n", 4, "loop_from must name a tool"),
        ("---\n- a list\n---\n", 2, "not a mapping"),
        ("---\nname: off\ntools: [a]\n---\n", 2, "name must be text, not False (YAML reads off"),
    ],
)
def test_a_bad_file_names_its_line(tmp_path: Path, text: str, where: int, what: str) -> None:
    path = write(tmp_path / "bad.md", text)
    with pytest.raises(InvalidInput) as err:
        parse_agent(path)
    assert err.value.message.startswith(f"{path}:{where}: ")
    assert what in err.value.message


def test_python_objects_in_yaml_are_refused_not_built(tmp_path: Path) -> None:
    path = write(tmp_path / "evil.md", "---\nname: !!python/object/apply:os.getcwd []\n---\n")
    with pytest.raises(InvalidInput, match=r"evil.md:2: front matter is not valid YAML"):
        parse_agent(path)


def test_the_library_skips_disabled_and_bad_files_and_lets_a_folder_replace(
    tmp_path: Path,
) -> None:
    write(tmp_path / "mine.md", agent_file("answer", ["decide", "generate"]))
    write(tmp_path / "off.md", agent_file("paused", enabled="false"))
    write(tmp_path / "broken.md", "---\nname: broken\ntools: [\n---\n")
    library = AgentLibrary([SHIPPED, tmp_path])
    assert set(library.agents()) == {"answer"}
    assert library.get("answer").tools == ("decide", "generate")  # the folder's wins
    assert len(library.problems()) == 1 and "broken.md:4" in library.problems()[0]
    with pytest.raises(InvalidInput, match=r"broken\.md:4: front matter is not valid YAML"):
        library.get("broken")
    with pytest.raises(InvalidInput, match="unknown agent 'paused'") as err:
        library.get("paused")
    assert "agents: answer" in err.value.hint


def test_an_edit_is_seen_on_the_next_lookup(tmp_path: Path) -> None:
    library = AgentLibrary([tmp_path])
    with pytest.raises(InvalidInput):
        library.get("scout")
    path = write(tmp_path / "scout.md", agent_file("scout", ["decide"]))
    assert library.get("scout").tools == ("decide",)
    write(path, agent_file("scout", ["decide", "judge"]))
    assert library.get("scout").tools == ("decide", "judge")
    write(path, agent_file("scout", enabled="false"))
    with pytest.raises(InvalidInput):
        library.get("scout")
    write(path, agent_file("scout", ["judge"]))
    assert library.get("scout").tools == ("judge",)
    path.unlink()
    assert library.agents() == {}


def test_plan_resolves_tools_in_order_and_names_an_unknown_one(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "t.py").write_text(SOURCE, encoding="utf-8")
    registry = ToolRegistry(tools)
    settings = Settings(home=tmp_path / "store")
    good = parse_agent(write(tmp_path / "good.md", agent_file("good", ["judge", "decide"])))
    assert [t.name for t in good.plan(registry, settings)] == ["judge", "decide"]
    path = write(tmp_path / "bad.md", agent_file("bad", ["decide", "summon"]))
    with pytest.raises(InvalidInput) as err:
        parse_agent(path).plan(registry, settings)
    assert err.value.message == f"{path}:3: agent 'bad' lists unknown tool 'summon'"
    # an agent named like its unknown tool: the line is the tools line, not the name's
    named = write(tmp_path / "summon.md", agent_file("summon", ["decide", "summon"]))
    with pytest.raises(InvalidInput, match=rf"{named}:3: agent 'summon' lists unknown tool"):
        parse_agent(named).plan(registry, settings)
    block = write(
        tmp_path / "block.md", "---\nname: summon\ntools:\n  - decide\n  - summon\n---\nBody.\n"
    )
    with pytest.raises(InvalidInput, match=rf"{block}:5: agent 'summon' lists unknown tool"):
        parse_agent(block).plan(registry, settings)
    known = err.value.hint.removeprefix("known tools: ").split(", ")
    assert {"count", "decide", "generate", "judge", "reflect", "retrieve"} <= set(known)


def test_a_missing_agents_dir_is_named_when_its_agent_is_asked_for(tmp_path: Path) -> None:
    library = AgentLibrary([SHIPPED, tmp_path / "nope"])
    assert library.problems() == [f"{tmp_path / 'nope'}: agents_dir is not a folder"]
    assert "answer" in library.agents()
    with pytest.raises(InvalidInput) as err:
        library.get("mine")
    assert err.value.hint == f"agents: answer; {tmp_path / 'nope'}: agents_dir is not a folder"
