"""Calibrated relevance on search hits (MiniLM, the model the coefficients were fitted
with) and the ``min_score`` floor through the facade and the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.interfaces.cli import cli
from kredenc.records import Hit, LegScore
from kredenc.retrieve.relevance import WINDOW, features, relevance

FACTS = [
    "We used the Adam optimizer with beta1 = 0.9, beta2 = 0.98 and epsilon = 1e-9.",
    "The Transformer uses multi-head attention with h = 8 parallel attention heads.",
    "Our garden has tomatoes, beans and a small pond with goldfish.",
    "The quarterly budget meeting was moved to Thursday afternoon.",
    "Maria's favourite drink is green tea with a slice of lemon.",
    "The office coffee machine on the third floor is broken again.",
    "Tokyo hosted the conference on distributed databases last spring.",
    "Our cat Miso sleeps on the radiator every winter evening.",
]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("relevance")) / "store"
    with Kredenc.open(path) as kb:
        kb.remember_many([{"text": t} for t in FACTS])
    return path


@pytest.fixture(scope="module")
def kb(home: Path) -> Iterator[Kredenc]:
    with Kredenc.open(home) as store:
        yield store


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
def test_every_hit_has_a_probability(kb: Kredenc, mode: str) -> None:
    hits = kb.search("which optimizer was used", k=8, mode=mode)
    assert hits
    for h in hits:
        assert h.relevance is not None and 0.0 <= h.relevance <= 1.0
    # The fused score's top is 1.0 by construction; the relevance of the top is not.
    assert max(h.fused for h in hits) == pytest.approx(1.0) or mode == "dense"


def test_lexical_only_scores_when_asked(kb: Kredenc) -> None:
    assert all(h.relevance is None for h in kb.search("optimizer", mode="lexical"))
    floored = kb.search("optimizer", mode="lexical", min_score=0.0)
    assert floored and all(h.relevance is not None for h in floored)


def test_relevant_outranks_irrelevant_across_queries(kb: Kredenc) -> None:
    """The scale is shared: the right answer to one question scores above the best
    (wrong) hit of a question the store cannot answer, though each tops its own list."""
    right = kb.search("What drink does Maria like?", k=3)[0]
    wrong = kb.search("What is the boiling point of mercury?", k=3)[0]
    assert "tea" in right.text
    assert right.fused == pytest.approx(1.0)
    assert right.relevance is not None and wrong.relevance is not None
    assert right.relevance > 0.5 > wrong.relevance


def test_relevance_does_not_depend_on_k(kb: Kredenc) -> None:
    few = kb.search("attention heads in the Transformer", k=2)
    many = kb.search("attention heads in the Transformer", k=WINDOW)
    assert [(h.id, h.relevance) for h in few] == [(h.id, h.relevance) for h in many[:2]]


def test_the_clear_answer_leads_on_both_scales(kb: Kredenc) -> None:
    """The fused top that answers the question is also the most relevant, and the
    list's unrelated facts read as unlikely (the unit test below shows where the two
    orders may part)."""
    hits = kb.search("the Transformer's attention heads", k=8)
    assert "attention heads" in hits[0].text
    rel = [h.relevance or 0.0 for h in hits]
    assert rel[0] == max(rel)
    assert rel[0] > 0.5 and min(rel) < 0.2


def _hit(i: str, text: str, lex: int, dense: int) -> Hit:
    legs = {"lexical": LegScore(lex, 1.0), "dense": LegScore(dense, 0.5)}
    return Hit(id=i, text=text, score=0.0, kind="fact", drawer="d", legs=legs)


def test_rank_alone_orders_relevance_and_evidence_can_overturn_it() -> None:
    """Two hits equal but for their ranks: the better-ranked is more relevant. A
    lower-ranked hit holding the query's words and a closer vector outranks it."""
    q = np.array([1.0, 0.0], dtype=np.float32)
    same = {"a": np.array([0.6, 0.8]), "b": np.array([0.6, 0.8])}
    tie = [_hit("a", "kestrel river", 1, 1), _hit("b", "kestrel river", 2, 2)]
    first, second = relevance(features("kestrel river", tie, q, same))
    assert first > second
    close = {"a": np.array([0.2, 0.98]), "b": np.array([0.95, 0.31])}
    hits = [_hit("a", "quarterly budget", 1, 2), _hit("b", "the kestrel by the river", 3, 1)]
    top, below = relevance(features("kestrel river", hits, q, close))
    assert below > top


def test_min_score_drops_hits_below(kb: Kredenc) -> None:
    every = kb.search("What drink does Maria like?", k=8)
    kept = kb.search("What drink does Maria like?", k=8, min_score=0.5)
    assert kept and len(kept) < len(every)
    assert all(h.relevance is not None and h.relevance >= 0.5 for h in kept)
    assert [h.id for h in kept] == [h.id for h in every if (h.relevance or 0) >= 0.5]
    assert kb.search("What is the boiling point of mercury?", min_score=0.5) == []


@pytest.mark.parametrize("bad", [-0.1, 1.5, "high", True])
def test_min_score_out_of_range_is_one_clear_error(kb: Kredenc, bad: object) -> None:
    with pytest.raises(InvalidInput, match="min_score"):
        kb.search("tea", min_score=bad)  # type: ignore[arg-type]


def test_cli_min_score(home: Path) -> None:
    runner = CliRunner()
    args = ["--store", str(home), "--json", "search", "What drink does Maria like?"]
    every = json.loads(runner.invoke(cli, args).output)["hits"]
    result = runner.invoke(cli, [*args, "--min-score", "0.5"])
    assert result.exit_code == 0, result.output
    kept = json.loads(result.output)["hits"]
    assert kept and len(kept) < len(every)
    assert all(h["relevance"] >= 0.5 for h in kept)
    text = runner.invoke(cli, ["--store", str(home), "search", "Maria drink"]).output
    assert "relevance 0." in text
    bad = runner.invoke(cli, [*args, "--min-score", "2"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_search_and_grade_share_one_model(kb: Kredenc) -> None:
    """A hit's relevance is what the grade role computes for the same list."""
    from kredenc.loop.roles.grade import score_hits

    query = "Which optimizer and beta values were used?"
    hits = kb.search(query, k=WINDOW)
    graded = score_hits(kb.store, kb.namespace, query, hits)
    assert [h.relevance for h in hits] == [round(p, 4) for p in graded]
