"""Where the loop's tools come from: the ``kredenc.tools`` plugin group and a tools folder.

A package adds a tool with an entry point (``[project.entry-points."kredenc.tools"]
mytool = "my_pkg:MyTool"``); the built-in roles come in through the same door. A
folder (setting ``tools_dir``) adds tools without packaging: every ``*.py`` directly
in it is imported by path, and each concrete :class:`~kredenc.loop.tool.Tool`
subclass it defines is registered under its ``name``. A folder tool replaces a
plugin of the same name. Adding or removing a tool changes no other file: an agent
names it in its pipeline, and the registry finds it.

The folder is confined: files are taken only from the folder itself (no
subfolders), and a file whose real path leaves the folder (a symlink) is refused.
A file that fails to import is reported with its path and line and skipped (one
broken tool stops nothing but the agents that name it). The folder is scanned again
when a file's modification time or size changes (a stat per file per lookup).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import logging
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kredenc import plugins
from kredenc.errors import InvalidInput, KredencError, ProviderError
from kredenc.loop.folders import stamped_files
from kredenc.loop.tool import Tool

log = logging.getLogger(__name__)

_MODULE_PREFIX = "kredenc_tools_"


@dataclass(frozen=True)
class ToolSource:
    """Where a registered tool comes from: ``plugin`` (an entry point) or ``folder``."""

    name: str
    origin: str  # "plugin" | "folder"
    where: str  # module:attr of the plugin, or path:line of the folder file


def make_tool(obj: Any, settings: Any, what: str) -> Tool:
    """A tool instance from what an entry point or a folder names: a Tool subclass
    (built with ``from_settings(settings)`` when it has one, else with no arguments),
    a factory taking the settings, or an instance."""
    if isinstance(obj, Tool):
        return obj
    try:
        factory = getattr(obj, "from_settings", None)
        if callable(factory):
            made = factory(settings)
        elif inspect.isclass(obj) and issubclass(obj, Tool):
            made = obj()
        elif callable(obj):
            made = obj(settings)
        else:
            made = obj
    except KredencError:
        raise
    # A third-party tool may fail in any way while it is built: one line naming it.
    except Exception as exc:
        raise ProviderError(
            f"{what} failed to start: {type(exc).__name__}: {' '.join(str(exc).split())}",
            "check the settings it reads, or fix the tool",
        ) from exc
    if not isinstance(made, Tool):
        raise ProviderError(
            f"{what} built a {type(made).__name__!r}, not a kredenc.loop.tool.Tool",
            "a tool subclasses kredenc.loop.tool.Tool and implements run(mind, services)",
        )
    return made


class _Folder:
    """The tools folder: its files' signature and what they defined, loaded by path."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.signature: tuple[tuple[str, int, int], ...] | None = None
        self.classes: dict[str, tuple[type[Tool], str]] = {}
        self.problems: list[str] = []

    def files(self) -> list[Path]:
        return [file for file, _ in stamped_files(self.path, ".py")]

    def current_signature(self) -> tuple[tuple[str, int, int], ...]:
        return tuple((f.name, *stamp) for f, stamp in stamped_files(self.path, ".py"))

    def refresh(self) -> bool:
        """Load the folder again if a file changed; True when it did."""
        signature = self.current_signature()
        if signature == self.signature:
            return False
        self.signature = signature
        self.classes, self.problems = {}, []
        if not self.path.is_dir():
            what = "is not a folder" if self.path.exists() else "does not exist"
            self.problems.append(f"{self.path}: tools_dir {what}")
            return True
        root = self.path.resolve()
        for file in self.files():
            if not file.resolve().is_relative_to(root):
                self.problems.append(f"{file}: refused, its real path leaves the tools folder")
                continue
            self._load(file)
        for problem in self.problems:
            log.warning("tool skipped: %s", problem)
        return True

    def _load(self, file: Path) -> None:
        digest = hashlib.blake2b(str(file.resolve()).encode(), digest_size=6).hexdigest()
        name = f"{_MODULE_PREFIX}{digest}_{file.stem}"
        try:
            module = _import_path(name, file)
        except Exception as exc:  # noqa: BLE001 - user code: reported as file:line, skipped
            self.problems.append(_where_failed(file, exc))
            return
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(obj, Tool)
                and obj.__module__ == module.__name__
                and not inspect.isabstract(obj)
            ):
                tool_name = getattr(obj, "name", None)
                line = inspect.getsourcelines(obj)[1]
                if not isinstance(tool_name, str) or not tool_name:
                    self.problems.append(f"{file}:{line}: {obj.__name__} has no name")
                elif tool_name in self.classes:
                    self.problems.append(
                        f"{file}:{line}: tool {tool_name!r} is defined twice "
                        f"(also {self.classes[tool_name][1]})"
                    )
                else:
                    self.classes[tool_name] = (obj, f"{file}:{line}")


def _import_path(name: str, file: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _where_failed(file: Path, exc: BaseException) -> str:
    """``path:line: Error: message`` for an exception raised while importing ``file``."""
    line: int | None = None
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename) == file:
        line = exc.lineno
    else:
        for frame in traceback.extract_tb(exc.__traceback__):
            if Path(frame.filename) == file:
                line = frame.lineno
    place = f"{file}:{line}" if line else str(file)
    message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    return f"{place}: {type(exc).__name__}: {' '.join(str(message).split())}"


class ToolRegistry:
    """The tools an agent may name: plugins of ``kredenc.tools`` and the tools folder."""

    def __init__(self, tools_dir: Path | None = None) -> None:
        self.tools_dir = tools_dir
        self._folder = _Folder(tools_dir) if tools_dir is not None else None
        self._lock = threading.Lock()

    def _refresh(self) -> dict[str, tuple[type[Tool], str]]:
        if self._folder is None:
            return {}
        with self._lock:
            self._folder.refresh()
            return dict(self._folder.classes)

    def sources(self) -> dict[str, ToolSource]:
        """Every known tool by name (nothing is imported but the tools folder)."""
        found = {
            name: ToolSource(name, "plugin", plugin.value)
            for name, plugin in plugins.available(plugins.TOOLS).items()
        }
        for name, (_, where) in self._refresh().items():
            found[name] = ToolSource(name, "folder", where)
        return dict(sorted(found.items()))

    def names(self) -> list[str]:
        return list(self.sources())

    def problems(self) -> list[str]:
        """What the tools folder could not load, one line each (``path:line: ...``)."""
        self._refresh()
        return list(self._folder.problems) if self._folder is not None else []

    def unknown_hint(self) -> str:
        """The hint of an unknown-tool error: the known tools, and the folder's errors."""
        hint = f"known tools: {', '.join(self.names()) or 'none'}"
        problems = self.problems()
        if problems:
            more = f" (and {len(problems) - 1} more, logged)" if len(problems) > 1 else ""
            hint += f"; the tools folder has errors: {problems[0]}{more}"
        return hint

    def known(self, name: str) -> bool:
        return name in self.sources()

    def build(self, name: str, settings: Any) -> Tool:
        """The tool ``name``, built from ``settings``; unknown is InvalidInput naming the known."""
        folder = self._refresh()
        if name in folder:
            cls, where = folder[name]
            return make_tool(cls, settings, f"tool {name!r} ({where})")
        if not plugins.is_known(plugins.TOOLS, name):
            raise InvalidInput(f"unknown tool {name!r}", self.unknown_hint())
        plugin = plugins.get(plugins.TOOLS, name)
        tool = make_tool(plugin.load(), settings, f"{plugin.what} ({plugin.value})")
        if tool.name != name:
            raise ProviderError(
                f"{plugin.what} ({plugin.value}) is a tool named {tool.name!r}",
                "an entry point's name must be the tool's name (it is its namespace on the mind)",
            )
        return tool


_registries: dict[tuple[str, int], ToolRegistry] = {}
_registries_lock = threading.Lock()


def registry_for(tools_dir: Path | None) -> ToolRegistry:
    """The process's registry for ``tools_dir`` (one per folder and plugin generation)."""
    key = (str(tools_dir.resolve()) if tools_dir is not None else "", plugins.generation())
    with _registries_lock:
        found = _registries.get(key)
        if found is None:
            found = _registries[key] = ToolRegistry(tools_dir)
        return found


__all__ = ["ToolRegistry", "ToolSource", "make_tool", "registry_for"]
