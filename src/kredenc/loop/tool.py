"""The tool seam: every step of the answer loop is a stateless :class:`Tool`.

A tool reads its inputs from the mind, writes its outputs under its own namespace
(``<name>.<data>``) and returns a :class:`ToolResult` (status, timing, tokens, cost,
cache hits). What it needs from the engine (the store, the namespace, the LLM, the
operation cache, settings) comes in the :class:`Services` it is handed; it keeps no
state between runs. Tools are found through the ``kredenc.tools`` plugin group (and
a tools folder); the orchestrator knows them only by the names its pipeline lists.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from kredenc.loop.mind import Mind

Status = Literal["ok", "skipped", "failed"]

#: How the note of a tool skipped for want of inputs begins; the keys follow, joined by
#: ", " ("missing input: verify.kept"): the orchestrator names them when no answer came.
MISSING_INPUT = "missing input: "


@dataclass
class ToolResult:
    """What one run of a tool reports. ``note`` is one line for the trace."""

    status: Status = "ok"
    note: str = ""
    ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Services:
    """What the engine lends a tool for one ask. ``store`` is the open Store and
    ``ns`` the namespace; ``llm`` is None when no LLM is configured; ``cache`` is the
    operation cache; ``settings`` the store's Settings; ``options`` the ask's own
    options (k, mode, session, ...). ``llm_failure`` is the message of the LLM's
    failure earlier in this ask ('' while there was none): a role that would call the
    LLM then answers by its rules without asking it again (one Services per ask)."""

    store: Any
    ns: str
    settings: Any
    llm: Any = None
    cache: Any = None
    tracer: Any = None
    options: dict[str, Any] = field(default_factory=dict)
    llm_failure: str = ""


class Tool(ABC):
    """One step. ``name`` is its namespace on the mind and its name in pipelines;
    ``reads`` and ``writes`` list the keys it uses (documentation and checks)."""

    name: ClassVar[str]
    reads: ClassVar[tuple[str, ...]] = ()
    writes: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def run(self, mind: Mind, services: Services) -> ToolResult:
        """Do the step: read from ``mind``, write under ``self.name``."""
