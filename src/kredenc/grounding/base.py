"""The judge's result and the seam every judge implements.

``Evaluation.to_json()`` is exactly the schema the answer loop, the REST API and
``kredenc eval judge`` report: ``context_sufficient``, ``confidence_score`` (0-100),
``hallucination_detected``, ``hallucination_reason``, ``evaluation_summary``, plus
``sentences`` (per-sentence support with the supporting context).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

#: A statement the generator marks as not coming from the context.
OUTSIDE_KNOWLEDGE = "[OUTSIDE KNOWLEDGE]"


def band(confidence_score: int) -> str:
    """The judge's band: 90-100 and 70-89 'context verified', 40-69 'moderate', 0-39 'low'."""
    if confidence_score >= 70:
        return "context verified"
    if confidence_score >= 40:
        return "moderate"
    return "low"


@dataclass(frozen=True)
class SentenceSupport:
    """One sentence of an answer and how far the context supports it.

    ``start``/``end`` are character offsets in the answer; ``support`` is in [0, 1];
    ``context`` is the index of the best supporting context (None when none does);
    ``reason`` says why it is unsupported (empty when supported).
    """

    text: str
    start: int
    end: int
    support: float
    supported: bool
    context: int | None = None
    evidence: str = ""
    reason: str = ""


@dataclass(frozen=True)
class Evaluation:
    context_sufficient: bool
    confidence_score: int
    hallucination_detected: bool
    hallucination_reason: str
    evaluation_summary: str
    sentences: tuple[SentenceSupport, ...] = field(default_factory=tuple)

    @property
    def band(self) -> str:
        return band(self.confidence_score)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["sentences"] = [asdict(s) for s in self.sentences]
        return out


class Judge(Protocol):
    """Judges an answer against the contexts it was given (and nothing else)."""

    def judge(self, question: str, answer: str, contexts: Sequence[str]) -> Evaluation: ...
