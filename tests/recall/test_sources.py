"""What recall serves (issue 16): document passages beside memories and turns, each
labelled for what it is; no parroting (duplicates, the assistant's own turns, messages
with nothing to search for)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.recall import recall
from kredenc.recall.render import PREAMBLE

from .blocks import parse

PAPER = """# Attention Is All You Need

## Model Architecture

The Transformer follows an encoder-decoder structure using stacked self-attention and
point-wise, fully connected layers for both the encoder and the decoder.

## Training

### Optimizer

We used the Adam optimizer with beta1 = 0.9, beta2 = 0.98 and epsilon = 1e-9. We varied
the learning rate over the course of training, increasing it linearly for the first
warmup steps and decreasing it thereafter.

### Regularization

We apply residual dropout to the output of each sub-layer, with a rate of 0.1.
"""

PDF = Path("/work/shared/data/documents/pdf/attention_is_all_you_need_1706.03762v7.pdf")


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_a_document_passage_is_recalled_with_its_title(
    kb: Kredenc, session: str, tmp_path: Path
) -> None:
    doc = tmp_path / "attention.md"
    doc.write_text(PAPER, encoding="utf-8")
    report = kb.ingest(doc)
    assert not report.failed
    kb.remember("The user prefers short answers.", kind="preference")
    result = recall(
        kb.store, kb.namespace, ask("What optimizer did the Transformer paper use?"),
        session_id=session,
    )  # fmt: skip
    items = parse(result.block)
    chunks = [i for i in items if "document" in i]
    assert chunks, items
    assert "Adam optimizer" in chunks[0]["text"]
    assert chunks[0]["document"] not in ("", "untitled")  # its document, by title or file
    assert "filed" in chunks[0]
    assert "earlier conversations" not in result.block
    assert result.block.startswith(PREAMBLE)


def test_memories_and_passages_share_one_budget(kb: Kredenc, session: str, tmp_path: Path) -> None:
    doc = tmp_path / "attention.md"
    doc.write_text(PAPER, encoding="utf-8")
    kb.ingest(doc)
    kb.remember("The Adam optimizer is what the user uses for training too.", kind="fact")
    result = recall(
        kb.store, kb.namespace, ask("Which optimizer, Adam or SGD, for training?"),
        session_id=session, budget={"items": 2, "total_chars": 900},
    )  # fmt: skip
    items = parse(result.block)
    assert 1 <= len(items) <= 2
    assert len(result.block) <= 900
    assert all("memory" in i or "document" in i for i in items)
    memory = [i for i in items if "memory" in i]
    assert memory and memory[0]["memory"] == "fact" and "filed" in memory[0]


@pytest.mark.slow
def test_the_attention_pdf_answers_the_optimizer_question(
    open_store: Callable[..., Kredenc], session: str
) -> None:
    if not PDF.exists():
        pytest.skip(f"{PDF} not found (the shared evaluation data is absent)")
    with open_store() as kb:
        assert not kb.ingest(PDF).failed
        result = recall(
            kb.store, kb.namespace, ask("What optimizer did the Transformer paper use?"),
            session_id=session, mode="lexical",
        )  # fmt: skip
        chunks = [i for i in parse(result.block) if "document" in i]
        assert any("Adam" in c["text"] and "page" in c for c in chunks), chunks


# -- no parroting ------------------------------------------------------------------------


def test_the_same_text_twice_is_recalled_once(kb: Kredenc, session: str) -> None:
    kb.remember("The user likes jasmine green tea in the morning.", kind="preference")
    kb.remember("The user likes jasmine green tea in the morning!", kind="preference")
    kb.remember("the user likes  Jasmine green tea in the morning.", kind="fact")
    kb.remember("The user drinks jasmine tea with lemon at night.", kind="fact")
    result = recall(kb.store, kb.namespace, ask("What jasmine tea do I like?"), session_id=session)
    texts = [i["text"] for i in parse(result.block)]
    assert len(texts) == 2, texts
    assert "The user drinks jasmine tea with lemon at night." in texts


def test_assistant_turns_are_not_recalled_unless_asked(
    open_store: Callable[..., Kredenc], session: str
) -> None:
    turns = [
        {"role": "user", "content": "Which pizza do I like? I think margherita pizza."},
        {"role": "assistant", "content": "Fake answer: you like pizza with tea."},
    ]
    with open_store() as kb:
        kb.file_turns("old-session", turns)
        result = recall(kb.store, kb.namespace, ask("Which pizza do I like?"), session_id=session)
        items = parse(result.block)
        assert [i["turn"] for i in items] == ["user"], items
    with open_store(recall_assistant_turns=True) as kb:
        result = recall(
            kb.store, kb.namespace, ask("Which pizza do I like?"), session_id=session + "-b"
        )
        assert {i["turn"] for i in parse(result.block)} == {"user", "assistant"}


@pytest.mark.parametrize("greeting", ["hi", "ok", "thanks", "Hello!", "ok thanks :)"])
def test_a_message_without_content_terms_recalls_nothing(
    kb: Kredenc, session: str, greeting: str
) -> None:
    kb.file_turns("other", [{"role": "user", "content": "Who is my manager? hi ok thanks"}])
    kb.remember("Hi! The user says hello and thanks a lot, ok.", kind="fact")
    result = recall(kb.store, kb.namespace, ask(greeting), session_id=session)
    assert not result.injected and result.items == []
    assert result.messages == ask(greeting)
    assert result.skipped and "content" in result.skipped


def test_a_turn_clears_the_same_floor_as_a_memory(
    open_store: Callable[..., Kredenc], session: str
) -> None:
    """Found by meaning alone, a turn needs the similarity a memory needs (a floor of
    1.0 admits neither; one of 0.0 admits both)."""
    text = "Sailing the boat around the lake every summer weekend"
    for floor, expected in ((1.0, set()), (0.0, {"memory", "turn"})):
        with open_store(recall_min_similarity=floor) as kb:
            kb.use_namespace(f"floor-{int(floor)}")
            kb.remember(text, kind="fact")
            kb.file_turns(
                "s-old", [{"role": "user", "content": "We go sailing by boat on the lake"}]
            )
            result = recall(
                kb.store, kb.namespace, ask("sailing the boat around the lake"),
                session_id=f"{session}-{floor}", mode="dense",
            )  # fmt: skip
            assert {i.type for i in result.items} == expected, (floor, result.items)
