"""Reading a recall block back, strictly: what a test needs to say what a model sees."""

from __future__ import annotations

import json
from typing import Any

from kredenc.recall.render import CLOSE, OPEN, PREAMBLE


def parse(block: str) -> list[dict[str, Any]]:
    """The items of a block: the preamble, the opening tag, one JSON object per line,
    the closing tag; nothing else, and no line break but the newlines between them."""
    lines = block.split("\n")
    assert block.splitlines() == lines  # no \r, \x85, \u2028, … that a reader splits on
    assert lines[:2] == [PREAMBLE, OPEN]
    assert lines[-1] == CLOSE
    items = [json.loads(line) for line in lines[2:-1]]
    # Each line says what it is: a memory (its kind), a turn (its speaker) or a passage
    # (its document), once.
    assert all(isinstance(i, dict) and set(i) >= {"n", "text"} for i in items)
    assert all(len(set(i) & {"memory", "turn", "document"}) == 1 for i in items)
    assert [i["n"] for i in items] == list(range(1, len(items) + 1))
    # The tags and the preamble appear once: nothing inside an item can spell them.
    assert block.count(OPEN) == 1 and block.count(CLOSE) == 1 and block.count(PREAMBLE) == 1
    return items
