"""verify: ambiguous chunks need independent support; unverified and incorrect ones go."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.loop.answer import ChunkVerdict
from kredenc.loop.roles.verify import SUPPORT_MIN, Verify, best_first, key_sentence, support
from kredenc.records import Hit
from kredenc.retrieve.query import search
from kredenc.testing.openai_server import LoopbackServer, Reply

from .conftest import MakeServices
from .helpers import TinyLLM, mind

DOCS = {
    "training.md": "# Training\n\nThe Transformer was trained with the Adam optimizer "
    "using beta2 = 0.98 and warmup.",
    "notes.md": "# Notes\n\nFor training we relied on the Adam optimizer, with beta2 set to "
    "0.98 and warmup steps.",
    "garden.md": "# Garden\n\nTomatoes grow well in the sun and need daily water.",
}
REPLY = json.loads(
    (Path(__file__).parents[2] / "fixtures/websearch/searxng_eiffel.json").read_text()
)


def _ingest(kb: Kredenc, tmp_path: Path) -> dict[str, Hit]:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, body in DOCS.items():
        (folder / name).write_text(body)
    assert kb.ingest(folder).documents == 3
    out = {}
    for name in DOCS:
        hits = search(kb.store, kb.namespace, DOCS[name].split("\n\n")[1], k=1)
        out[name] = hits[0]
    return out


def _verdict(hit: Hit, verdict: str, relevance: float) -> ChunkVerdict:
    return ChunkVerdict(hit.id, verdict, relevance)  # type: ignore[arg-type]


def test_ambiguous_chunks_need_another_source(
    kb: Kredenc, services: MakeServices, tmp_path: Path
) -> None:
    hits = _ingest(kb, tmp_path)
    train, notes, garden = hits["training.md"], hits["notes.md"], hits["garden.md"]
    assert len({h.doc_id for h in hits.values()}) == 3
    m = mind(
        "Which beta2 did the Adam optimizer use?",
        retrieve_chunks=[train, notes, garden],
        grade_verdicts=[
            _verdict(train, "AMBIGUOUS", 0.3),
            _verdict(notes, "INCORRECT", 0.02),
            _verdict(garden, "AMBIGUOUS", 0.1),
        ],
    )
    result = Verify().run(m, services())
    t, n, g = m.read("verify.verdicts")
    assert (t.verdict, t.verified_by) == ("VERIFIED", notes.id)  # another document agrees
    assert n.verdict == "INCORRECT"  # left as graded
    assert g.verdict == "AMBIGUOUS" and g.reason.startswith("unverified")
    assert [h.id for h in m.read("verify.kept")] == [train.id]  # never INCORRECT, nor g
    assert result.note == "1 of 2 ambiguous verified; 1 chunks kept"


def test_kept_is_correct_and_verified_best_first(
    kb: Kredenc, services: MakeServices, tmp_path: Path
) -> None:
    hits = _ingest(kb, tmp_path)
    train, notes, garden = hits["training.md"], hits["notes.md"], hits["garden.md"]
    m = mind(
        "Which beta2 did the Adam optimizer use?",
        retrieve_chunks=[garden, train, notes],
        grade_verdicts=[
            _verdict(garden, "CORRECT", 0.6),
            _verdict(train, "AMBIGUOUS", 0.4),
            _verdict(notes, "CORRECT", 0.9),
        ],
    )
    Verify().run(m, services())
    assert [h.id for h in m.read("verify.kept")] == [notes.id, garden.id, train.id]


def test_the_same_document_is_no_evidence(kb: Kredenc, services: MakeServices) -> None:
    a = kb.remember("The Eiffel Tower is 330 metres tall.")
    hit = search(kb.store, kb.namespace, "Eiffel Tower tall", k=1)[0]
    assert hit.id == a.id
    m = mind(
        "How tall is the Eiffel Tower?",
        retrieve_chunks=[hit],
        grade_verdicts=[_verdict(hit, "AMBIGUOUS", 0.3)],
    )
    Verify().run(m, services())
    assert m.read("verify.verdicts")[0].reason == "unverified: no independent evidence"
    assert m.read("verify.kept") == []


def test_web_search_verifies_what_the_store_cannot(kb: Kredenc, services: MakeServices) -> None:
    kb.remember("The Eiffel Tower is 330 metres tall.")
    hit = search(kb.store, kb.namespace, "Eiffel Tower tall", k=1)[0]
    with LoopbackServer() as server:
        server.route("GET", "/search", lambda _r: Reply.json(REPLY))
        m = mind(
            "How tall is the Eiffel Tower?",
            retrieve_chunks=[hit],
            grade_verdicts=[_verdict(hit, "AMBIGUOUS", 0.3)],
        )
        Verify().run(m, services(web_search_url=f"http://127.0.0.1:{server.port}"))
        assert len(server.requests) == 1 and "Eiffel" in server.requests[0].path
    (v,) = m.read("verify.verdicts")
    assert (v.verdict, v.verified_by) == ("VERIFIED", "https://en.wikipedia.org/wiki/Eiffel_Tower")
    assert "the web" in v.reason


def test_a_failing_web_search_is_logged_not_raised(
    kb: Kredenc, services: MakeServices, caplog: pytest.LogCaptureFixture
) -> None:
    kb.remember("The Eiffel Tower is 330 metres tall.")
    hit = search(kb.store, kb.namespace, "Eiffel Tower tall", k=1)[0]
    with LoopbackServer() as server:
        server.route("GET", "/search", lambda _r: Reply.error(500, "boom"))
        m = mind(
            "How tall?", retrieve_chunks=[hit], grade_verdicts=[_verdict(hit, "AMBIGUOUS", 0.3)]
        )
        Verify().run(m, services(web_search_url=f"http://127.0.0.1:{server.port}"))
    assert m.read("verify.kept") == []
    assert "web search failed" in caplog.text


def test_the_llm_judges_the_candidates(kb: Kredenc, services: MakeServices, tmp_path: Path) -> None:
    hits = _ingest(kb, tmp_path)
    train = hits["training.md"]
    m = mind(
        "Which beta2?", retrieve_chunks=[train], grade_verdicts=[_verdict(train, "AMBIGUOUS", 0.3)]
    )
    llm = TinyLLM([{"supported": True, "evidence": 1, "reason": "same value"}])
    Verify().run(m, services(llm=llm, role_verify="llm"))
    (v,) = m.read("verify.verdicts")
    assert v.verdict == "VERIFIED" and v.reason == "same value"
    assert v.verified_by is not None and v.verified_by != train.id
    records = llm.calls[0][0][1]["content"]
    assert '"role":"claim"' in records and "beta2" in records


def test_skips_without_grades(services: MakeServices) -> None:
    assert Verify().run(mind("q", retrieve_chunks=[]), services()).status == "skipped"


def test_key_sentence_holds_the_query_terms() -> None:
    chunk = "Training took days. We used Adam with beta2 = 0.98 for it. The end came."
    assert key_sentence(chunk, "Which beta2 for Adam?") == "We used Adam with beta2 = 0.98 for it."


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kredenc]:
    with Kredenc.open(tmp_path_factory.mktemp("minilm"), durability="none") as kb:
        yield kb


@pytest.mark.slow
@pytest.mark.parametrize(
    ("claim", "evidence", "supported"),
    [
        (
            "The Transformer was trained with the Adam optimizer using beta2 = 0.98.",
            "For training we relied on the Adam optimizer, with beta2 set to 0.98.",
            True,
        ),
        (
            "The Eiffel Tower is 330 metres tall.",
            "The Eiffel Tower. It is 330 m (1,083 ft) tall, like an 81-storey building.",
            True,
        ),
        (
            "Marie Curie won the Nobel Prize in Physics in 1903.",
            "In 1903 Curie shared the Nobel Prize in Physics with Pierre Curie.",
            True,
        ),
        (
            "Marie Curie won the Nobel Prize in Physics in 1903.",
            "Albert Einstein received the Nobel Prize in Physics in 1921.",
            False,
        ),
        (
            "The base model was trained for 100,000 steps.",
            "The big models were trained for 300,000 steps (3.5 days).",
            False,
        ),
        (
            "The Eiffel Tower is 330 metres tall.",
            "The Statue of Liberty was a gift from France, dedicated in 1886.",
            False,
        ),
    ],
)
def test_support_separates_paraphrase_from_other_facts(
    minilm: Kredenc, claim: str, evidence: str, supported: bool
) -> None:
    (score,) = support(minilm.store, claim, [evidence])
    assert (score >= SUPPORT_MIN) is supported, score


def test_kept_chunks_come_in_the_rerankers_order_then_by_relevance() -> None:
    """What retrieve reranked goes first by its rerank score (generate's LLM reads the
    first ask_context_k); the chunks it did not rerank follow by grade's relevance."""

    def hit(i: str, rerank: float | None = None) -> Hit:
        return Hit(id=i, text=i, score=0.0, kind="memory", drawer="", rerank=rerank)

    kept = [hit("a"), hit("b", rerank=-1.0), hit("c"), hit("d", rerank=2.0)]
    relevance = {"a": 0.6, "b": 0.9, "c": 0.8, "d": 0.1}
    verdicts = [ChunkVerdict(i, "CORRECT", r) for i, r in relevance.items()]
    assert [h.id for h in best_first(kept, verdicts)] == ["d", "b", "c", "a"]
    plain = [hit("a"), hit("c")]
    assert [h.id for h in best_first(plain, verdicts)] == ["c", "a"]  # no reranker: relevance
