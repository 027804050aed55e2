"""What ``ask`` returns: the answer, its citations, the verdicts, the judge, a trace."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from kredenc.grounding.base import Evaluation

Verdict = Literal["CORRECT", "AMBIGUOUS", "INCORRECT", "VERIFIED"]

#: What a streamed answer (``on_delta``) sends before a later iteration's changed
#: answer: a stream cannot take back what it sent, so the revision follows this line,
#: and the kept answer is the text after the last one.
REVISED = "\n\n-- revised answer --\n"


@dataclass(frozen=True)
class Citation:
    """Numbered source ``n`` of the answer (``[n]`` in the text) and its provenance."""

    n: int
    id: str
    text: str
    score: float
    title: str = ""
    origin: str = ""
    page: int | None = None
    start_s: float | None = None
    doc_id: str | None = None
    type: str = "chunk"


@dataclass(frozen=True)
class ChunkVerdict:
    """The grade of one retrieved chunk, and why."""

    id: str
    verdict: Verdict
    relevance: float
    reason: str = ""
    verified_by: str | None = None  # the id (or URL) of the independent evidence


@dataclass(frozen=True)
class Step:
    """One step of the trace: the tool, its status and what it cost."""

    tool: str
    status: str
    ms: float
    iteration: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cache_hits: int = 0
    note: str = ""
    cache_misses: int = 0


@dataclass(frozen=True)
class Answer:
    question: str
    text: str
    citations: tuple[Citation, ...] = ()
    verdicts: tuple[ChunkVerdict, ...] = ()
    evaluation: Evaluation | None = None
    iterations: int = 1
    mode: str = "none"  # the retrieval mode used: none | hybrid | reranked | graph | iterative
    retrieved: bool = True
    standalone_query: str = ""
    session_id: str | None = None
    trace: tuple[Step, ...] = ()
    gaps: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["evaluation"] = self.evaluation.to_json() if self.evaluation else None
        return out
