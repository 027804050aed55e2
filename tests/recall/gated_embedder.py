"""An embedder that holds an embedding until the test opens its gate.

The test HashEmbedder, except that an embedding of a batch with a text containing
``marker`` waits for ``gate`` (and sets ``entered`` first). Filing a turn embeds its
texts, so a test can hold a filing in its middle and look at what callers see.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from kredenc.providers.embed.base import Vectors
from kredenc.testing.embedders import HashEmbedder

WAIT = 10.0


class GatedEmbedder(HashEmbedder):
    def __init__(self, marker: str = "GATED") -> None:
        super().__init__()
        self.marker = marker
        self.gate = threading.Event()
        self.entered = threading.Event()

    def embed(self, texts: Sequence[str]) -> Vectors:
        if any(self.marker in t for t in texts):
            self.entered.set()
            assert self.gate.wait(WAIT), "the test never opened the gate"
        return super().embed(texts)
