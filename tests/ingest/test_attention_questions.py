"""Natural questions about the Attention paper find their passage in the top 3.

End to end with the bundled MiniLM model: ingest the real PDF, search hybrid.
The PDF is read from the shared corpus beside the repository (never copied in).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kredenc.engine import Kredenc

PDF = (
    Path(__file__).resolve().parents[2].parent
    / "shared/data/documents/pdf/attention_is_all_you_need_1706.03762v7.pdf"
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not PDF.exists(), reason=f"shared corpus not found at {PDF}"),
]


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kredenc]:
    with Kredenc.open(tmp_path_factory.mktemp("att"), durability="none") as store:
        report = store.ingest(PDF)
        assert report.documents == 1 and not report.failed
        yield store


@pytest.mark.parametrize(
    ("question", "needle"),
    [
        ("How many parallel attention heads does the Transformer use?", "h = 8"),
        ("What BLEU score does the base model reach on English-to-German?", "27.3"),
        ("Which Adam optimizer settings were used for training?", "0.98"),
    ],
)
def test_question_finds_its_passage_in_top_3(kb: Kredenc, question: str, needle: str) -> None:
    hits = kb.search(question, k=3)
    assert any(needle in h.text for h in hits), [h.text[:80] for h in hits]
    assert all(h.page is not None and h.origin.endswith(".pdf") for h in hits)
