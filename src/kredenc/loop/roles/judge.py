"""judge: an independent evaluation of the answer against what it was built from.

Reads ``generate.text``, ``generate.contexts`` (``contexts[n - 1]`` is record ``n``),
``generate.abstained``, ``decide.retrieve`` and the question; writes
``judge.evaluation`` (an :class:`~kredenc.grounding.base.Evaluation`).

The question judged is the standalone query (``rewrite.query``, which equals
``ask.question`` when there was nothing to resolve): "What were its
hyperparameters?" cannot be checked for sufficiency, its standalone form can. The
answer's ``[n]`` citation markers are stripped before judging (they are pointers, not
words of a claim); ``[OUTSIDE KNOWLEDGE]`` stays, and the judges count a sentence
that carries it as unsupported.

* **rules** (the default): :class:`~kredenc.grounding.judge.SupportJudge` over the
  store's cached MiniLM vectors (``Store.embed_cached``);
* **llm** (``role_judge = "llm"``): :class:`~kredenc.grounding.llm_judge.LLMJudge`,
  a separate call with the judge prompt.

Both run through the operation cache (``cached_judge``). Two answers make no claim and
are not sent to a judge: the honest :data:`~kredenc.loop.roles.generate.NOT_FOUND`
(``context_sufficient`` false, confidence 0, nothing hallucinated) and, when
``decide.retrieve`` is False, a conversational reply (sufficient, 100) unless the
message asked something factual, which is then judged against no context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kredenc.grounding.base import Evaluation, Judge
from kredenc.grounding.judge import SupportJudge
from kredenc.loop.roles.common import RoleTool, cached_judge, query_of, skipped
from kredenc.loop.roles.text import content_terms, is_question, strip_citations
from kredenc.loop.tool import Services, ToolResult

if TYPE_CHECKING:
    from kredenc.loop.mind import Mind

__all__ = ["JudgeTool", "abstention", "conversational"]


def abstention() -> Evaluation:
    """The evaluation of an answer that says nothing was found: no claim, no context."""
    return Evaluation(
        context_sufficient=False,
        confidence_score=0,
        hallucination_detected=False,
        hallucination_reason="",
        evaluation_summary="nothing trusted in the store addresses the question; "
        "the answer says so and makes no claim",
    )


def conversational() -> Evaluation:
    """The evaluation of a conversational reply to a message that asked no fact."""
    return Evaluation(
        context_sufficient=True,
        confidence_score=100,
        hallucination_detected=False,
        hallucination_reason="",
        evaluation_summary="a conversational reply: no retrieval was needed and no claim made",
    )


class JudgeTool(RoleTool):
    """Writes ``judge.evaluation`` for ``generate.text`` (module doc)."""

    name = "judge"
    reads = ("ask.question", "rewrite.query", "decide.retrieve", "generate.text",
             "generate.contexts", "generate.abstained")  # fmt: skip
    writes = ("judge.evaluation",)

    def run_rules(self, mind: Mind, services: Services) -> ToolResult:
        return self._run(mind, services, SupportJudge(services.store.embed_cached))

    def run_llm(self, mind: Mind, services: Services) -> ToolResult:
        from kredenc.grounding.llm_judge import LLMJudge

        return self._run(mind, services, LLMJudge(services.llm))

    def _run(self, mind: Mind, services: Services, judge: Judge) -> ToolResult:
        text = mind.read("generate.text", None)
        if text is None:
            return skipped("missing input: generate.text")
        question = query_of(mind)
        abstained = bool(mind.read("generate.abstained", False))
        if mind.read("decide.retrieve", True) is False:
            if not (is_question(question) and content_terms(question)):
                mind.write("judge.evaluation", conversational())
                return ToolResult(note="conversational reply")
            contexts: list[str] = []
        elif abstained:
            mind.write("judge.evaluation", abstention())
            return ToolResult(note="the answer abstains")
        else:
            contexts = [str(c) for c in mind.read("generate.contexts", None) or []]
        evaluation = cached_judge(services, judge, question, strip_citations(str(text)), contexts)
        mind.write("judge.evaluation", evaluation)
        return ToolResult(note=f"{evaluation.confidence_score} ({evaluation.band})")
