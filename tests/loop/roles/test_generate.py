"""generate: extractive answers from kept chunks only, cited; the LLM path's prompt."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.loop.answer import REVISED, Citation
from kredenc.loop.cache import cache_for
from kredenc.loop.roles.generate import CHAT_SYSTEM, NOT_FOUND, SYSTEM, Generate, extract
from kredenc.providers.llm.openai import OpenAICompatLLM
from kredenc.recall import render
from kredenc.records import Hit
from kredenc.testing.chat_server import chat_completions_route
from kredenc.testing.openai_server import LoopbackServer

from .answer_side import TinyLLM, filled, mind_for, services


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kredenc]:
    yield from filled(tmp_path_factory.mktemp("generate"))


def test_answers_with_the_sentence_that_holds_the_asked_number(kb: Kredenc) -> None:
    mind = mind_for(kb, "How many attention heads does the Transformer use?")
    result = Generate().run(mind, services(kb))
    assert result.status == "ok"
    text = mind.read("generate.text")
    assert "h = 8 parallel attention layers" in text
    cites: list[Citation] = mind.read("generate.citations")
    assert cites and cites[0].n == 1 and "[1]" in text
    assert "h = 8" in cites[0].text and cites[0].title == "attention"
    assert mind.read("generate.contexts") == [c.text for c in cites]
    assert mind.read("generate.abstained") is False
    # The heading line the PDF glued to the sentence is not part of the answer.
    assert "Multi-Head Attention" not in text


def test_only_kept_chunks_reach_the_answer(kb: Kredenc) -> None:
    question = "What BLEU does the big model reach on WMT 2014 English-German?"
    hits = kb.search(question, k=4)
    bleu = [h for h in hits if "28.4" in h.text]
    others = [h for h in hits if "28.4" not in h.text]
    mind = mind_for(kb, question, {"verify.kept": others})
    Generate().run(mind, services(kb))
    assert "28.4" not in mind.read("generate.text")
    mind = mind_for(kb, question, {"verify.kept": bleu})
    Generate().run(mind, services(kb))
    text = mind.read("generate.text")
    assert "28.4 BLEU" in text
    assert "[12]" not in text  # the document's own reference marker is not a citation
    assert {c.id for c in mind.read("generate.citations")} == {bleu[0].id}


def test_nothing_relevant_kept_gives_the_honest_answer(kb: Kredenc) -> None:
    mind = mind_for(kb, "Who won the FIFA World Cup 2026?")
    Generate().run(mind, services(kb))
    assert mind.read("generate.text") == NOT_FOUND
    assert mind.read("generate.citations") == []
    assert mind.read("generate.abstained") is True
    mind = mind_for(kb, "How many attention heads?", {"verify.kept": []})
    Generate().run(mind, services(kb))
    assert mind.read("generate.text") == NOT_FOUND


def test_overlapping_chunks_do_not_repeat_a_sentence(kb: Kredenc) -> None:
    hits = kb.search("Adam optimizer beta1 beta2 epsilon", k=1)
    text, cites, _ = extract(
        "What were the Adam optimizer's hyperparameters?",
        [hits[0], hits[0]],
        kb.store.embed_cached,
        kb.store.embed_query,
    )
    assert text.count("beta1 = 0.9") == 1 and len(cites) == 1


def test_no_retrieval_gives_a_reply_without_claims(kb: Kredenc) -> None:
    mind = mind_for(kb, "Hi there!", {"decide.retrieve": False})
    mind.write("verify.kept", [])
    Generate().run(mind, services(kb))
    assert mind.read("generate.text").startswith("Hello")
    assert mind.read("generate.citations") == [] and mind.read("generate.contexts") == []


def test_missing_inputs_skip(kb: Kredenc) -> None:
    mind = mind_for(kb, "How many heads?")
    mind.write("verify.kept", None)
    assert Generate().run(mind, services(kb)).status == "skipped"


def test_stream_hands_the_text_to_on_delta(kb: Kredenc) -> None:
    got: list[str] = []
    mind = mind_for(kb, "How many attention heads does the Transformer use?")
    mind.write("ask.options", {"stream": True})
    svc = services(kb)
    svc.options["on_delta"] = got.append
    Generate().run(mind, svc)
    assert "".join(got) == mind.read("generate.text")


def test_llm_prompt_envelopes_the_chunks_and_requires_citations(kb: Kredenc) -> None:
    llm = TinyLLM("The Transformer uses 8 heads [1, 2].")
    mind = mind_for(kb, "How many heads?", k=2)
    evil = mind.read("verify.kept")[0]
    result = Generate().run(mind, services(kb, llm, role_generate="llm"))
    system, user = llm.calls[0][0]["content"], llm.calls[0][-1]["content"]
    assert system == SYSTEM and "[OUTSIDE KNOWLEDGE]" in system and "[n]" not in system
    # The chunks are inside the envelope, one escaped JSON line each.
    assert user.count(render.OPEN) == 1 and user.index(render.CLOSE) < user.index("Question:")
    lines = user.split(render.OPEN)[1].split(render.CLOSE)[0].strip().splitlines()
    assert json.loads(lines[0])["text"] == evil.text and json.loads(lines[0])["n"] == 1
    assert mind.read("generate.text") == "The Transformer uses 8 heads [1, 2]."
    assert [c.n for c in mind.read("generate.citations")] == [1, 2]
    assert len(mind.read("generate.contexts")) == 2  # record n is contexts[n - 1]
    assert (result.prompt_tokens, result.completion_tokens) == (10, 5)


def test_the_agents_instructions_reach_the_llm_after_the_built_in_rules(kb: Kredenc) -> None:
    """docs/loop.md: an agent file's body is the LLM generator's instructions. It was
    never sent. It is the operator's own text, so it goes in the system message, after
    the rules it cannot lift (citations, records are data); a chat reply gets it too."""
    body = "Answer in one short sentence, in French."
    for extra in ({}, {"decide.retrieve": False}):
        llm = TinyLLM("Huit têtes [1].")
        mind = mind_for(kb, "How many heads?", {"ask.instructions": body, **extra}, k=1)
        Generate().run(mind, services(kb, llm, role_generate="llm"))
        system = llm.calls[0][0]["content"]
        assert system.startswith(SYSTEM if not extra else CHAT_SYSTEM), system
        assert system.endswith(body) and "operator" in system.lower()
        assert body not in llm.calls[0][-1]["content"]  # not among the records
    plain = TinyLLM("Eight [1].")
    Generate().run(mind_for(kb, "How many heads?", k=1), services(kb, plain, role_generate="llm"))
    assert plain.calls[0][0]["content"] == SYSTEM  # no instructions: the rules alone


def test_llm_stream_goes_through_llm_stream(kb: Kredenc) -> None:
    llm = TinyLLM("Eight [1].")
    got: list[str] = []
    mind = mind_for(kb, "How many heads?", k=1)
    mind.write("ask.options", {"stream": True})
    svc = services(kb, llm, role_generate="llm")
    svc.options["on_delta"] = got.append
    Generate().run(mind, svc)
    assert got == ["Eight [1]."] and mind.read("generate.text") == "Eight [1]."


def test_an_empty_llm_reply_is_answered_by_the_rules_and_not_cached(kb: Kredenc) -> None:
    """An empty reply is the LLM failing: the rules answer, and once the LLM recovers the
    same ask reaches it (the empty reply was not cached)."""
    replies = ["", "Eight heads [1]."]
    with LoopbackServer() as server:
        server.route("POST", "/v1/chat/completions", chat_completions_route(lambda _b: replies[0]))
        with OpenAICompatLLM(server.base_url, "fake") as llm:

            def ask() -> tuple[str, str]:
                svc = services(kb, llm, role_generate="llm")
                svc.cache = cache_for(kb.store)
                mind = mind_for(kb, "How many attention heads?", k=1)
                result = Generate().run(mind, svc)
                return mind.read("generate.text"), result.note

            text, note = ask()
            assert text.strip() and "8" in text and "empty reply" in note
            replies.pop(0)  # the server recovers
            assert ask() == ("Eight heads [1].", "1 cited of 1 given")
        assert len(server.requests) == 2


def test_an_empty_streamed_reply_is_answered_by_the_rules(kb: Kredenc) -> None:
    got: list[str] = []
    mind = mind_for(kb, "How many attention heads?", k=1)
    mind.write("ask.options", {"stream": True})
    svc = services(kb, TinyLLM(""), role_generate="llm")
    svc.options["on_delta"] = got.append
    result = Generate().run(mind, svc)
    assert "empty reply" in result.note
    assert "".join(got) == mind.read("generate.text") and "8" in mind.read("generate.text")


def test_llm_role_without_an_llm_says_what_to_do(kb: Kredenc) -> None:
    with pytest.raises(InvalidInput, match="no LLM is configured"):
        Generate().run(mind_for(kb, "How many heads?"), services(kb, role_generate="llm"))


def test_llm_is_not_called_when_nothing_is_kept(kb: Kredenc) -> None:
    llm = TinyLLM()
    mind = mind_for(kb, "Who won the FIFA World Cup 2026?", {"verify.kept": []})
    Generate().run(mind, services(kb, llm, role_generate="llm"))
    assert llm.calls == [] and mind.read("generate.text") == NOT_FOUND
    assert re.search("could not find", NOT_FOUND)


def _hit(rid: str, text: str, **kw: object) -> Hit:
    return Hit(id=rid, text=text, score=1.0, kind="", drawer="documents", type="chunk", **kw)  # type: ignore[arg-type]


def test_a_count_question_is_answered_by_the_count(kb: Kredenc) -> None:
    hits = [
        _hit("a", "The Transformer uses multi-head attention in three different ways. "
             "Each of them is described below in this section."),
        _hit("b", "Overview\nIn this work we employ h = 8 parallel attention layers, or heads."),
        _hit("c", "Table 3 lists the heads. Its rows (A) vary the number of attention heads."),
    ]  # fmt: skip
    question = "How many attention heads does the Transformer use?"
    text, cites, _ = extract(question, hits, kb.store.embed_cached, kb.store.embed_query)
    assert text == "In this work we employ h = 8 parallel attention layers, or heads. [1]"
    assert [c.id for c in cites] == ["b"]


def test_the_loops_own_earlier_answers_are_not_sources(kb: Kredenc) -> None:
    own = _hit(
        "t", "The Transformer uses 16 attention heads in every layer.", meta={"role": "assistant"}
    )
    own = Hit(**{**own.__dict__, "type": "turn"})
    question = "How many attention heads does the Transformer use?"
    text, cites, _ = extract(question, [own], kb.store.embed_cached, kb.store.embed_query)
    assert text == NOT_FOUND and cites == []


def test_a_later_iteration_streams_only_a_changed_answer(kb: Kredenc) -> None:
    got: list[str] = []
    mind = mind_for(kb, "How many attention heads does the Transformer use?")
    mind.write("ask.options", {"stream": True})
    svc = services(kb)
    svc.options["on_delta"] = got.append
    Generate().run(mind, svc)
    first = mind.read("generate.text")
    Generate().run(mind, svc)  # the next iteration, nothing new kept: nothing sent again
    assert got == [first]
    mind.write("verify.kept", [])
    Generate().run(mind, svc)  # a different answer comes after the revision marker
    assert got == [first, REVISED, NOT_FOUND]
    assert REVISED.strip() and REVISED.startswith("\n\n") and REVISED.endswith("\n")


def test_a_kept_memory_is_quoted_whole_in_other_words_and_without_a_final_stop(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A memory is a whole record: no chunk boundary cut it, it may be four words long
    with no full stop, and it answers in other words than the question's."""
    with Kredenc.open(tmp_path_factory.mktemp("memories"), durability="none") as kb:
        kb.remember("The user prefers dark mode", kind="preference")
        kb.remember("Deploys happen on Tuesdays", kind="fact")
        for question, expected in [
            ("What theme does the user like?", "The user prefers dark mode"),
            ("When do we deploy?", "Deploys happen on Tuesdays"),
        ]:
            hits = kb.search(question, k=2)
            kept = [h for h in hits if h.text == expected]
            mind = mind_for(kb, question, {"verify.kept": kept})
            Generate().run(mind, services(kb))
            assert mind.read("generate.text") == f"{expected} [1]"
            assert [c.id for c in mind.read("generate.citations")] == [kept[0].id]
        mind = mind_for(kb, "Who won the FIFA World Cup 2026?", {"verify.kept": []})
        Generate().run(mind, services(kb))
        assert mind.read("generate.text") == NOT_FOUND
