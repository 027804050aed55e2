"""One registry for everything kredenc can be extended with: entry point groups.

=====================  ==========================================================
group                  what a plugin in it is
=====================  ==========================================================
``kredenc.embedders``  an :class:`~kredenc.providers.embed.base.Embedder`
``kredenc.rerankers``  a :class:`~kredenc.providers.rerank.Reranker`
``kredenc.llms``       an :class:`~kredenc.providers.llm.base.LLM` (records, ``local``)
``kredenc.loaders``    a :class:`~kredenc.ingest.loaders.base.Loader` class
``kredenc.indexes``    an index backend (built-in: ``sqlite``)
``kredenc.tools``      a tool of the answer loop (built-ins: the eight roles)
=====================  ==========================================================

A package adds a plugin by declaring it in its own metadata, and nothing else::

    [project.entry-points."kredenc.embedders"]
    mymodel = "kredenc_mymodel:MyEmbedder"

The built-ins come in through the same door: kredenc's own ``pyproject.toml``
declares them as entry points. :data:`BUILTINS` holds the same table so that a source
checkout whose package metadata is missing or stale still finds them (a test keeps
the two equal); an entry point with a built-in's name replaces the built-in.

A plugin builds itself from :class:`~kredenc.config.Settings` (:func:`build`): the
object an entry point names is a class with a ``from_settings(settings)`` classmethod,
or any callable that takes the settings and returns the plugin.

Entry points are read on first use, once per process (:func:`refresh` reads them
again); a plugin's module is imported only when that plugin is asked for. This module
sits with ``config`` and ``errors`` at the bottom of the layers: it names the
modules it loads as strings and never imports them itself.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any, TypeVar

from kredenc.errors import InvalidInput, KredencError, ProviderError, shown

log = logging.getLogger(__name__)

EMBEDDERS = "kredenc.embedders"
RERANKERS = "kredenc.rerankers"
LLMS = "kredenc.llms"
LOADERS = "kredenc.loaders"
INDEXES = "kredenc.indexes"
TOOLS = "kredenc.tools"

#: Every group, and what one plugin of it is called in messages.
GROUPS: dict[str, str] = {
    EMBEDDERS: "embedder",
    RERANKERS: "reranker",
    LLMS: "LLM provider",
    LOADERS: "loader",
    INDEXES: "index backend",
    TOOLS: "tool",
}

#: The built-ins, as ``module:attr`` (the same values as pyproject.toml's entry points).
BUILTINS: dict[str, dict[str, str]] = {
    EMBEDDERS: {
        "minilm": "kredenc.providers.embed.minilm:MiniLMEmbedder",
        "openai": "kredenc.providers.embed.openai:OpenAIEmbedder",
        "onnx": "kredenc.providers.embed.onnx:OnnxEmbedder",
        "sentence-transformers": "kredenc.providers.embed.sbert:SentenceTransformersEmbedder",
    },
    RERANKERS: {
        "cross-encoder": "kredenc.providers.rerank:CrossEncoderReranker",
        "onnx": "kredenc.providers.rerank.onnx:OnnxCrossEncoder",
        "maxsim": "kredenc.providers.rerank.maxsim:MaxSimReranker",
    },
    LLMS: {
        "openai": "kredenc.providers.llm.records:OPENAI",
        "groq": "kredenc.providers.llm.records:GROQ",
        "openrouter": "kredenc.providers.llm.records:OPENROUTER",
        "ollama": "kredenc.providers.llm.records:OLLAMA",
        "vllm": "kredenc.providers.llm.records:VLLM",
        "llamacpp": "kredenc.providers.llm.records:LLAMACPP",
        "lmstudio": "kredenc.providers.llm.records:LMSTUDIO",
        "openai-compatible": "kredenc.providers.llm.records:OPENAI_COMPATIBLE",
        "local": "kredenc.providers.llm.local:Gpt4AllLLM",
    },
    LOADERS: {
        "pdf": "kredenc.ingest.loaders.pdf:PdfLoader",
        "markdown": "kredenc.ingest.loaders.markdown:MarkdownLoader",
        "notion": "kredenc.ingest.loaders.notion:NotionLoader",
        "text": "kredenc.ingest.loaders.text:TextLoader",
        "jsonl": "kredenc.ingest.loaders.jsonl:JsonLoader",
        "html": "kredenc.ingest.loaders.html:HtmlLoader",
        "youtube": "kredenc.ingest.loaders.youtube:YoutubeLoader",
    },
    INDEXES: {
        "sqlite": "kredenc.storage.index.sqlite:SqliteIndex",
    },
    TOOLS: {
        "decide": "kredenc.loop.roles.decide:Decide",
        "rewrite": "kredenc.loop.roles.rewrite:Rewrite",
        "retrieve": "kredenc.loop.roles.retrieve:Retrieve",
        "grade": "kredenc.loop.roles.grade:Grade",
        "verify": "kredenc.loop.roles.verify:Verify",
        "generate": "kredenc.loop.roles.generate:Generate",
        "judge": "kredenc.loop.roles.judge:JudgeTool",
        "reflect": "kredenc.loop.roles.reflect:Reflect",
    },
}

_SELF = "kredenc"  # the distribution whose entry points are the built-ins

T = TypeVar("T")


@dataclass(frozen=True)
class Plugin:
    """One registered plugin: where it is (``module:attr``) and who declared it."""

    group: str
    name: str
    value: str
    dist: str = _SELF

    @property
    def what(self) -> str:
        """How messages name it: ``embedder 'minilm'``."""
        return f"{GROUPS[self.group]} {self.name!r}"

    def load(self) -> Any:
        """The object the entry point names; a failure to import is a ProviderError."""
        module_name, _, attr = self.value.partition(":")
        try:
            obj: Any = import_module(module_name)
            for part in attr.split(".") if attr else ():
                obj = getattr(obj, part)
        # A third-party module may fail at import in any way; it is reported as one
        # line naming the plugin and the cause, never as a traceback.
        except Exception as exc:
            raise ProviderError(
                f"{self.what} ({self.value}, from {self.dist}) cannot be imported: "
                f"{type(exc).__name__}: {_one_line(str(exc))}",
                f"reinstall {self.dist}, or choose another {GROUPS[self.group]}",
            ) from exc
        return obj


_state = {"generation": 0}


@cache
def _registry() -> dict[str, dict[str, Plugin]]:
    found = {
        group: {name: Plugin(group, name, value) for name, value in table.items()}
        for group, table in BUILTINS.items()
    }
    every = entry_points()  # one scan of the installed distributions for all groups
    named = [
        (ep, ep.dist.name if ep.dist is not None else "an unknown distribution")
        for group in found
        for ep in every.select(group=group)
    ]
    # kredenc's own first, so that another package's entry point replaces a built-in.
    for ep, dist in sorted(named, key=lambda pair: pair[1] != _SELF):
        known = found[ep.group].get(ep.name)
        if known is not None and known.value != ep.value:
            log.info(
                "%s %r from %s (%s) replaces the one from %s (%s)",
                GROUPS[ep.group],
                ep.name,
                dist,
                ep.value,
                known.dist,
                known.value,
            )
        if known is None or known.value != ep.value:
            found[ep.group][ep.name] = Plugin(ep.group, ep.name, ep.value, dist)
    return found


def refresh() -> None:
    """Read the entry points again (after installing a package, or in tests)."""
    _registry.cache_clear()
    _state["generation"] += 1


def generation() -> int:
    """A number that changes on every :func:`refresh`: caches built on the registry key on it."""
    return _state["generation"]


def _check_group(group: str) -> None:
    if group not in GROUPS:
        raise InvalidInput(f"unknown plugin group {group!r}", f"groups: {', '.join(GROUPS)}")


def available(group: str) -> dict[str, Plugin]:
    """The plugins of ``group`` by name, sorted by name; nothing is imported."""
    _check_group(group)
    return dict(sorted(_registry()[group].items()))


def names(group: str) -> list[str]:
    """The names of the plugins of ``group``, sorted."""
    return list(available(group))


def is_known(group: str, name: str) -> bool:
    """Whether ``group`` has a plugin called ``name``; built-in names answer without
    reading the entry points, so that checking a default costs nothing."""
    _check_group(group)
    return name in BUILTINS[group] or name in _registry()[group]


def get(group: str, name: str) -> Plugin:
    """The plugin ``name`` of ``group``; an unknown name is InvalidInput naming the known."""
    plugins = available(group)
    plugin = plugins.get(name)
    if plugin is None:
        raise InvalidInput(
            f"unknown {GROUPS[group]} {shown(name)}",
            f"available: {', '.join(plugins) or 'none'}; a package adds one through the "
            f"{group!r} entry point group",
        )
    return plugin


def load(group: str, name: str) -> Any:
    """The object (class or factory) the plugin ``name`` of ``group`` names."""
    return get(group, name).load()


def build(group: str, name: str, settings: Any, kind: type[T] | tuple[type[T], ...]) -> T:
    """The plugin ``name`` of ``group``, built from ``settings``, checked to be a ``kind``
    (a class or a tuple of classes, as ``isinstance`` takes; an abstract one is fine).

    The object is asked ``from_settings(settings)`` when it has that classmethod, and
    is called with ``settings`` otherwise. Errors of kredenc's own tree pass through;
    anything else a plugin raises while building is a ProviderError naming it.
    """
    plugin = get(group, name)
    obj = plugin.load()
    factory = getattr(obj, "from_settings", None)
    if not callable(factory):
        factory = obj
    if not callable(factory):
        raise ProviderError(
            f"{plugin.what} ({plugin.value}) is neither a class with from_settings() "
            "nor a callable that takes the settings",
            f"fix or uninstall {plugin.dist}",
        )
    try:
        made = factory(settings)
    except KredencError:
        raise
    # As at import: a plugin's own failure becomes one line naming it.
    except Exception as exc:
        raise ProviderError(
            f"{plugin.what} ({plugin.value}) failed to start: "
            f"{type(exc).__name__}: {_one_line(str(exc))}",
            f"check the settings it reads, or fix {plugin.dist}",
        ) from exc
    if not isinstance(made, kind):
        wanted = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ProviderError(
            f"{plugin.what} ({plugin.value}) built a {type(made).__name__!r}, expected: {wanted}",
            f"fix or uninstall {plugin.dist}",
        )
    return made


def load_all(group: str) -> list[tuple[Plugin, Any]]:
    """Every plugin of ``group`` that imports, with its object, sorted by name; one that
    does not is logged as a warning and skipped (one broken package stops nothing)."""
    loaded: list[tuple[Plugin, Any]] = []
    for plugin in available(group).values():
        try:
            loaded.append((plugin, plugin.load()))
        except ProviderError as exc:
            log.warning("%s skipped: %s", plugin.what, exc.message)
    return loaded


def _one_line(text: str) -> str:
    return " ".join(text.split())


__all__ = [
    "BUILTINS",
    "EMBEDDERS",
    "GROUPS",
    "INDEXES",
    "LLMS",
    "LOADERS",
    "RERANKERS",
    "TOOLS",
    "Plugin",
    "available",
    "build",
    "generation",
    "get",
    "is_known",
    "load",
    "load_all",
    "names",
    "refresh",
]
