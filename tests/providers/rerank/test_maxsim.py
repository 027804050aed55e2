"""``rerank = "maxsim"``: late interaction over the bundled MiniLM's token vectors,
with the real model (no fakes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kredenc.config import Settings
from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.providers.embed.minilm import MiniLMEmbedder
from kredenc.providers.rerank import make_reranker
from kredenc.providers.rerank.maxsim import MaxSimReranker, maxsim
from kredenc.retrieve.query import reranker_for


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(scope="module")
def reranker(embedder: MiniLMEmbedder) -> MaxSimReranker:
    made = make_reranker("maxsim")
    assert isinstance(made, MaxSimReranker)
    made.share(embedder)
    return made


def test_token_vectors_are_unit_rows_without_the_special_tokens(
    embedder: MiniLMEmbedder,
) -> None:
    one, long = embedder.token_vectors(["kestrel nests", "word " * 400], 16)
    assert one.shape == (len(embedder._ensure().tokenizer.encode("kestrel nests").ids) - 2, 384)
    assert np.allclose(np.linalg.norm(one, axis=1), 1.0, atol=1e-5)
    assert long.shape == (16, 384)  # capped
    (empty,) = embedder.token_vectors([""])
    assert empty.shape == (0, 384)


def test_a_passage_with_the_querys_tokens_scores_above_one_without(
    reranker: MaxSimReranker,
) -> None:
    query = "kestrel nesting on the cathedral tower"
    with_tokens = "A kestrel was seen nesting on the cathedral tower in spring."
    without = "Quarterly budget figures were approved by the finance committee."
    a, b = reranker.score(query, [with_tokens, without])
    assert a > b
    # The score is a sum over query tokens of a cosine: at most one per token.
    q = reranker._model().token_vectors([query])[0]
    assert 0 < a <= len(q) + 1e-4


def test_the_order_is_deterministic(reranker: MaxSimReranker) -> None:
    passages = [f"note {i}: the kestrel and the budget, item {i * 7}" for i in range(12)]
    first = reranker.score("kestrel budget", passages)
    again = reranker.score("kestrel budget", list(reversed(passages)))
    assert again == pytest.approx(list(reversed(first)), abs=1e-4)  # batching changes nothing
    assert reranker.score("kestrel budget", passages) == first


def test_maxsim_of_empty_sets_is_zero() -> None:
    unit = np.eye(3, dtype=np.float32)
    assert maxsim(unit[:0], unit) == 0.0 and maxsim(unit, unit[:0]) == 0.0
    assert maxsim(unit, unit) == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("maxsim:lots", "maxsim takes a number of word pieces, got 'lots'"),
        ("maxsim:0", "maxsim keeps 1..254 word pieces per passage, got 0"),
        ("maxsim:9000", "maxsim keeps 1..254 word pieces per passage, got 9000"),
    ],
)
def test_bad_settings_are_one_line_errors(spec: str, message: str) -> None:
    with pytest.raises(InvalidInput) as err:
        make_reranker(spec, Settings.model_construct())
    assert str(err.value).splitlines()[0].startswith(message)
    assert "\n" not in err.value.args[0]


def test_a_token_cap_is_kept() -> None:
    made = make_reranker("maxsim:64")
    assert isinstance(made, MaxSimReranker) and made.tokens == 64 and made.name == "maxsim:64"


def test_search_reranks_with_the_stores_own_model(tmp_path: Path) -> None:
    texts = [
        "The budget meeting moved to Thursday.",
        "Kestrels hunt voles along the river bank.",
        "The river flooded the lower field in March.",
        "A kestrel nests in the cathedral tower.",
    ]
    with Kredenc.open(tmp_path / "s", durability="none") as kb:
        kb.remember_many([{"text": t} for t in texts])
        hits = kb.search("where does the kestrel nest", k=3, rerank="maxsim")
        made = reranker_for(kb.store, "maxsim")
        assert isinstance(made, MaxSimReranker)
        assert made._embedder is kb.store.embedder  # one model load
    scores = [h.rerank for h in hits]
    assert all(s is not None for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert hits[0].text == texts[3]


def test_the_mix_setting_reaches_the_search(tmp_path: Path) -> None:
    texts = [f"note {i}: the kestrel and the budget, item {i * 7}" for i in range(8)]
    with Kredenc.open(tmp_path / "s", durability="none", rerank_mix=0.25) as kb:
        kb.remember_many([{"text": t} for t in texts])
        hits = kb.search("kestrel budget", k=5, rerank="maxsim")
    assert all(h.rerank is not None for h in hits)
    assert all(0.0 <= h.score <= 1.0 for h in hits)  # the blended, scaled score
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_a_mix_out_of_range_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as err:
        Kredenc.open(tmp_path / "s", durability="none", rerank_mix=2)
    assert "rerank_mix" in str(err.value).splitlines()[0]
