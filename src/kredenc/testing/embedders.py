"""A deterministic embedder for tests that need vectors but not meaning.

It hashes word tokens into a fixed number of buckets (feature hashing), so texts
that share words are close in cosine. This is a fake at our own provider seam;
it is never the default.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from kredenc.providers.embed.base import Embedder, Vectors, l2_normalise

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder(Embedder):
    def __init__(self, dim: int = 384, model_id: str = "test-hash") -> None:
        self.dim = dim
        self.model_id = f"{model_id}-{dim}"
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                sign = 1.0 if digest[4] & 1 else -1.0
                out[row, bucket] += sign
            if not out[row].any():
                out[row, 0] = 1.0
        return l2_normalise(out)
