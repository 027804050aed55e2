"""Agents in markdown: a pipeline of tools and the instructions that go with it.

An agent is a ``*.md`` file with YAML front matter and instructions in the body::

    ---
    name: answer
    enabled: true
    capabilities: [answer, cite]
    tools: [decide, rewrite, retrieve, grade, verify, generate, judge, reflect]
    model: ""              # the model the agent asks for ("" = the configured LLM)
    max_iterations: 3      # optional; else the ask_max_iterations setting
    loop_from: retrieve    # optional; the first tool an iteration repeats
    ---
    You answer questions from the user's documents and memories, ...

The shipped agents live in ``loop/agents/`` (package data); the ``agents_dir`` setting
adds a folder whose agents replace shipped ones of the same name. Disabled agents
are skipped. A bad file (a YAML error, a missing or wrong field) is reported with
its path and line and skipped; asking for that agent raises the report.

**Hot reload without a watcher thread.** Each lookup compares every file's
modification time and size with what was parsed (one ``stat`` per file, microseconds
for a folder of agents) and parses again only what changed. A watcher thread would
need starting and stopping per handle, misses events on some file systems and adds
nothing an ask can see: an edit is picked up by the next ask either way.

Each agent follows plan → execute → validate → communicate: :meth:`Agent.plan`
resolves its pipeline to tools (an unknown tool is a one-line error naming the file
and the known tools); the orchestrator executes them on a fresh mind, validates that
the mind holds what the pipeline's tools promise and communicates the ``Answer``.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from kredenc.checks import check_name
from kredenc.errors import InvalidInput
from kredenc.loop.folders import stamped_files

if TYPE_CHECKING:
    from kredenc.loop.registry import ToolRegistry
    from kredenc.loop.tool import Tool

log = logging.getLogger(__name__)

#: The folder of the agents kredenc ships (package data).
SHIPPED = Path(__file__).with_name("agents")
FIELDS = ("name", "enabled", "capabilities", "tools", "model", "max_iterations", "loop_from")
_FENCE = re.compile(r"^---[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Agent:
    """One agent: its pipeline (tool names, in order), instructions and where it is."""

    name: str
    tools: tuple[str, ...]
    instructions: str = ""
    enabled: bool = True
    capabilities: tuple[str, ...] = ()
    model: str = ""
    max_iterations: int | None = None
    loop_from: str | None = None
    path: Path | None = None

    def line_of(self, tool: str) -> int | None:
        """The line of ``tool`` in the front matter's ``tools:`` list (for messages):
        on the key's own line (``tools: [a, b]``) or an item of the block under it."""
        if self.path is None:
            return None
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return None
        named = re.compile(rf"(^|[\s\[,-]){re.escape(tool)}($|[\s\],])")
        in_tools = False
        for n, line in enumerate(lines, 1):
            if n > 1 and line.strip() == "---":
                break  # the end of the front matter
            value = line
            if re.match(r"tools\s*:", line):
                in_tools = True
                value = line.split(":", 1)[1]
            elif in_tools and not line.lstrip().startswith("-"):
                in_tools = False  # the next key
            if in_tools and named.search(value):
                return n
        return None

    def plan(self, registry: ToolRegistry, settings: Any) -> list[Tool]:
        """Resolve the pipeline to tools, in order; an unknown tool is InvalidInput
        naming the agent's file (and line) and the known tools."""
        known = registry.names()
        tools = []
        for name in self.tools:
            if name not in known:
                line = self.line_of(name)
                where = f"{self.path}:{line}" if self.path and line else str(self.path or "")
                raise InvalidInput(
                    f"{where + ': ' if where else ''}agent {self.name!r} lists unknown tool "
                    f"{name!r}",
                    registry.unknown_hint(),
                )
            tools.append(registry.build(name, settings))
        return tools

    def repeat_from(self) -> int:
        """Index in the pipeline where a further iteration starts: ``loop_from`` when
        set, else the tool after ``rewrite`` when the pipeline has one, else the first."""
        if self.loop_from is not None:
            return self.tools.index(self.loop_from)
        if "rewrite" in self.tools:
            return min(self.tools.index("rewrite") + 1, len(self.tools) - 1)
        return 0


def parse_agent(path: Path, text: str | None = None) -> Agent:
    """Parse one agent file; a bad one is InvalidInput whose message starts ``path:line:``."""
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"{path}: cannot be read ({exc})", "fix the file") from None
    lines = text.splitlines(keepends=True)
    if not lines or not _FENCE.match(lines[0].rstrip("\r\n")):
        raise InvalidInput(
            f"{path}:1: an agent file starts with '---' and YAML front matter",
            "see docs/loop.md#agents",
        )
    end = next((i for i in range(1, len(lines)) if _FENCE.match(lines[i].rstrip("\r\n"))), None)
    if end is None:
        raise InvalidInput(f"{path}:1: the front matter has no closing '---'", "close it")
    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 2 if mark is not None else 2  # +1 for 1-based, +1 for the fence
        problem = getattr(exc, "problem", None) or str(exc)
        raise InvalidInput(
            f"{path}:{line}: front matter is not valid YAML: {problem}", "fix it"
        ) from None
    if not isinstance(meta, dict):
        raise InvalidInput(
            f"{path}:2: the front matter is not a mapping", "write 'key: value' lines"
        )

    def line_of(key: str) -> int:
        for n in range(1, end):
            if re.match(rf"^{re.escape(key)}\s*:", lines[n]):
                return n + 1
        return 2

    def bad(key: str, what: str) -> InvalidInput:
        return InvalidInput(f"{path}:{line_of(key)}: {key} {what}", "see docs/loop.md#agents")

    unknown = [k for k in meta if k not in FIELDS]
    if unknown:
        raise bad(str(unknown[0]), f"is not an agent field (fields: {', '.join(FIELDS)})")
    name = meta.get("name")
    if name is None:
        raise bad("name", "is missing")
    if not isinstance(name, str):
        raise bad("name", f"must be text, not {name!r} (YAML reads off, yes, 12 so: quote it)")
    try:
        check_name("agent name", name)
    except InvalidInput as exc:
        raise bad("name", f"is not a name ({exc.message})") from None
    tools = meta.get("tools")
    if not isinstance(tools, list) or not tools or not all(isinstance(t, str) for t in tools):
        raise bad("tools", "must be a non-empty list of tool names")
    if len(set(tools)) != len(tools):
        raise bad("tools", "lists a tool twice")
    enabled = meta.get("enabled", True)
    if not isinstance(enabled, bool):
        raise bad("enabled", "must be true or false")
    caps = meta.get("capabilities", []) or []
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        raise bad("capabilities", "must be a list of words")
    model = meta.get("model", "") or ""
    if not isinstance(model, str):
        raise bad("model", "must be text")
    iterations = meta.get("max_iterations")
    if iterations is not None and (
        not isinstance(iterations, int) or isinstance(iterations, bool) or not 1 <= iterations <= 10
    ):
        raise bad("max_iterations", "must be a whole number from 1 to 10")
    loop_from = meta.get("loop_from")
    if loop_from is not None and loop_from not in tools:
        raise bad("loop_from", "must name a tool of the pipeline")
    return Agent(
        name=name,
        tools=tuple(tools),
        instructions="".join(lines[end + 1 :]).strip(),
        enabled=enabled,
        capabilities=tuple(caps),
        model=model,
        max_iterations=iterations,
        loop_from=loop_from,
        path=path,
    )


class AgentLibrary:
    """The agents of some folders (later folders replace earlier ones by name),
    parsed again when a file changes (see the module's note on hot reload)."""

    def __init__(self, folders: list[Path]) -> None:
        self.folders = folders
        self._parsed: dict[Path, tuple[tuple[int, int], Agent | InvalidInput]] = {}
        self._lock = threading.Lock()
        # The shipped folder is part of the installed package: listed once, not per ask.
        self._shipped: list[tuple[Path, tuple[int, int]]] | None = None
        # With no folder of the user's, nothing can change: one scan serves every ask.
        self._settled: tuple[dict[str, Agent], dict[str, InvalidInput], list[str]] | None = None

    def _files(self, folder: Path) -> list[tuple[Path, tuple[int, int]]]:
        if folder != SHIPPED:
            return stamped_files(folder, ".md")
        if self._shipped is None:
            self._shipped = stamped_files(folder, ".md")
        return self._shipped

    def _scan(self) -> tuple[dict[str, Agent], dict[str, InvalidInput], list[str]]:
        if self._settled is not None:
            return self._settled
        found = self._scan_folders()
        if all(folder == SHIPPED for folder in self.folders):
            self._settled = found
        return found

    def _scan_folders(self) -> tuple[dict[str, Agent], dict[str, InvalidInput], list[str]]:
        agents: dict[str, Agent] = {}
        broken: dict[str, InvalidInput] = {}
        problems: list[str] = []
        seen: set[Path] = set()
        with self._lock:
            for folder in self.folders:
                if folder != SHIPPED and not folder.is_dir():
                    problems.append(f"{folder}: agents_dir is not a folder")
                    continue
                names_here: dict[str, Path] = {}
                for file, stamp in self._files(folder):
                    seen.add(file)
                    cached = self._parsed.get(file)
                    if cached is None or cached[0] != stamp:
                        try:
                            result: Agent | InvalidInput = parse_agent(file)
                        except InvalidInput as exc:
                            result = exc
                            log.warning("agent skipped: %s", exc.message)
                        cached = self._parsed[file] = (stamp, result)
                    result = cached[1]
                    if isinstance(result, InvalidInput):
                        problems.append(result.message)
                        broken[file.stem] = result
                    elif result.name in names_here:
                        problems.append(
                            f"{file}: agent {result.name!r} is also defined in "
                            f"{names_here[result.name]}; the first is used"
                        )
                    else:
                        names_here[result.name] = file
                        if result.enabled:
                            agents[result.name] = result
                        else:
                            agents.pop(result.name, None)
            for gone in set(self._parsed) - seen:
                del self._parsed[gone]
        return agents, broken, problems

    def agents(self) -> dict[str, Agent]:
        """The enabled agents by name, sorted."""
        return dict(sorted(self._scan()[0].items()))

    def problems(self) -> list[str]:
        """The bad files, one line each (``path:line: what``)."""
        return list(self._scan()[2])

    def get(self, name: str) -> Agent:
        """The enabled agent ``name``; unknown is InvalidInput naming the known (and
        the file's error when a bad file carries that name)."""
        agents, broken, problems = self._scan()
        found = agents.get(name)
        if found is not None:
            return found
        if name in broken:
            raise broken[name]
        hint = f"agents: {', '.join(sorted(agents)) or 'none'}"
        hint += f"; {problems[0]}" if problems else "; add one as a markdown file in agents_dir"
        raise InvalidInput(f"unknown agent {name!r}", hint)


_libraries: dict[str, AgentLibrary] = {}
_libraries_lock = threading.Lock()


def library_for(agents_dir: Path | None) -> AgentLibrary:
    """The process's library of the shipped agents and ``agents_dir`` (one per folder)."""
    key = str(agents_dir.resolve()) if agents_dir is not None else ""
    with _libraries_lock:
        found = _libraries.get(key)
        if found is None:
            folders = [SHIPPED] + ([agents_dir] if agents_dir is not None else [])
            found = _libraries[key] = AgentLibrary(folders)
        return found


__all__ = ["SHIPPED", "Agent", "AgentLibrary", "library_for", "parse_agent"]
