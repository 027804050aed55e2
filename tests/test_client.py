"""``kredenc.Client`` against a real server (uvicorn on loopback over a real store):
every method returns what the facade returns in-process, and the server's errors come
back as the same exceptions, message and hint kept."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kredenc import (
    Answer,
    Client,
    ContextGraph,
    IngestReport,
    InvalidInput,
    Kredenc,
    KredencError,
    Memory,
    NotFound,
    ProviderError,
    RecallResult,
    Step,
    StoreLocked,
)
from kredenc.client import ServerUnreachable, error_from_body
from kredenc.interfaces.auth import KeyRing
from kredenc.interfaces.server.run import ServerThread
from kredenc.memory.lifecycle import JobReport
from kredenc.testing.embedders import HashEmbedder

NOTE = "# Kestrels\n\nThe kestrel nests on the old water tower by the mill.\n"


def _open(home: Path) -> Kredenc:
    return Kredenc.open(home, embedder=HashEmbedder(), durability="none")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kredenc, Client]]:
    kb = _open(tmp_path_factory.mktemp("client") / "store")
    kb.remember("Deploys happen on Tuesdays and Thursdays", kind="fact", tags=["process"])
    kb.remember("The production database is PostgreSQL 15 in Frankfurt", kind="fact")
    kb.remember("The user prefers dark mode in every editor", kind="preference")
    try:
        with ServerThread(kb) as url, Client(url) as client:
            yield kb, client
    finally:
        kb.close()


def test_remember_and_get_give_the_facades_memory(served: tuple[Kredenc, Client]) -> None:
    kb, client = served
    mem = client.remember("Anna owns billing", kind="fact", tags=["team"], importance=0.8)
    assert isinstance(mem, Memory)
    assert (mem.text, mem.kind, mem.tags, mem.importance) == (
        "Anna owns billing",
        "fact",
        ("team",),
        0.8,
    )
    assert client.get(mem.id) == kb.get(mem.id) == mem


def test_search_finds_what_the_facade_finds(served: tuple[Kredenc, Client]) -> None:
    kb, client = served
    remote = client.search("when do deploys happen", k=3)
    local = kb.search("when do deploys happen", k=3)
    assert [(h.id, round(h.score, 6)) for h in remote] == [(h.id, round(h.score, 6)) for h in local]
    assert remote[0].text.startswith("Deploys happen")
    assert remote[0].legs.keys() == local[0].legs.keys()
    only_prefs = client.search("dark mode", kinds=["preference"], mode="lexical")
    assert {h.kind for h in only_prefs} == {"preference"}
    # What the search read of a misspelt query comes back too.
    typed = client.search("when do deplyos happen", k=3)
    assert typed.corrections == kb.search("when do deplyos happen", k=3).corrections
    assert typed.corrections == {"deplyos": "deploys"}


def test_score_forget_and_a_missing_id(served: tuple[Kredenc, Client]) -> None:
    kb, client = served
    mem = client.remember("A memory to score and forget")
    scored = client.score(mem.id, importance=0.9, reason="it matters")
    assert scored.importance == 0.9 == kb.get(mem.id).importance
    client.forget(mem.id)
    with pytest.raises(NotFound) as caught:
        client.get(mem.id)
    assert caught.value.code == "not_found"
    assert mem.id in caught.value.message
    with pytest.raises(NotFound):
        kb.get(mem.id)


def test_relate_shows_in_relationships_and_the_context_graph(
    served: tuple[Kredenc, Client],
) -> None:
    kb, client = served
    a = client.remember("The kestrel hunts voles in the meadow", kind="fact")
    b = client.remember("Voles live in the meadow grass", kind="fact")
    client.relate(a.id, b.id, "depends_on", weight=0.7)
    edges = client.relationships_of(a.id)
    assert [(e.src, e.dst, e.rel) for e in edges] == [(a.id, b.id, "depends_on")]
    assert client.list_relationships(limit=1000) == kb.list_relationships(limit=1000)
    graph = client.context_graph("kestrel voles meadow", hops=1, k=3)
    assert isinstance(graph, ContextGraph)
    assert {a.id, b.id} <= {n.id for n in graph.nodes}
    assert (a.id, b.id, "depends_on") in {(e.src, e.dst, e.rel) for e in graph.edges}
    client.relate(a.id, b.id, "depends_on", remove=True)
    assert client.relationships_of(a.id) == []
    client.score(a.id, importance=0.9, reason="seen at dusk")
    changes = client.memory_history(a.id)
    assert changes == kb.memory_history(a.id)  # the same dataclasses, old and new values kept
    assert [c.change for c in changes] == ["created", "related", "unrelated", "changed"]
    assert (changes[-1].fields[0].old, changes[-1].fields[0].new) == (0.5, 0.9)
    assert client.memory_history(a.id, limit=1, offset=3) == changes[3:]
    with pytest.raises(NotFound):
        client.memory_history("m0000000000000000000")


def test_listing_pages_like_the_facade(served: tuple[Kredenc, Client]) -> None:
    kb, client = served
    assert client.list_memories(kinds=["fact"], limit=2) == kb.list_memories(
        kinds=["fact"], limit=2
    )
    assert client.list_memories(limit=1, offset=1) == kb.list_memories(limit=1, offset=1)
    assert client.list_memories(tags=["process"])[0].text.startswith("Deploys")


def test_recall_gives_a_recall_result(served: tuple[Kredenc, Client]) -> None:
    _kb, client = served
    messages = [{"role": "user", "content": "which database runs in production?"}]
    result = client.recall(messages, session_id="r1", dry_run=True)
    assert isinstance(result, RecallResult)
    assert result.messages[: len(messages)] == messages
    assert any("PostgreSQL" in item.text for item in result.items)


def test_ask_answers_and_streams_and_keeps_the_session(served: tuple[Kredenc, Client]) -> None:
    kb, client = served
    answer = client.ask("when do deploys happen?")
    assert isinstance(answer, Answer)
    assert answer.text == kb.ask("when do deploys happen?").text
    assert answer.citations and "Tuesdays" in answer.citations[0].text
    deltas: list[str] = []
    steps: list[Step] = []
    streamed = client.ask(
        "when do deploys happen?", session_id="s-client", stream=True, on_delta=deltas.append,
        on_step=steps.append,
    )  # fmt: skip
    assert [type(x) for x in steps] == [Step] * len(steps) and steps
    assert [x.tool for x in steps] == [x.tool for x in streamed.trace]
    assert deltas and streamed.text.startswith("".join(deltas).rstrip()[:10])
    history = client.session_history("s-client")
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert "s-client" in {s.session for s in client.list_sessions()}
    assert client.clear_session("s-client") == 2
    assert client.session_history("s-client") == []


def test_ingest_uploads_waits_and_the_document_can_go(
    served: tuple[Kredenc, Client], tmp_path: Path
) -> None:
    kb, client = served
    note = tmp_path / "kestrels.md"
    note.write_text(NOTE, encoding="utf-8")
    seen: list[str] = []
    report = client.ingest([note], on_progress=lambda source, _r: seen.append(source))
    assert isinstance(report, IngestReport)
    assert (report.documents, report.failed) == (1, [])
    assert seen == [str(note.resolve())]  # named by the local path, as a local ingest does
    assert [f.source for f in report.files] == [str(note.resolve())]
    docs = client.list_documents()
    assert len(docs) == 1
    assert client.read_document(docs[0].id) == kb.read_document(docs[0].id)
    hits = client.search("kestrel water tower", k=3)
    chunk = next(h for h in hits if h.type == "chunk")
    assert client.provenance(chunk.id)["document"] == docs[0].id  # type: ignore[index]
    client.delete_document(docs[0].id)
    assert client.list_documents() == []
    assert all(h.type != "chunk" for h in client.search("kestrel water tower", k=3))


def test_a_second_file_of_the_same_name_fails_rather_than_replace_the_first(
    served: tuple[Kredenc, Client], tmp_path: Path
) -> None:
    _kb, client = served
    for part in ("a", "b"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "notes.md").write_text(f"# Notes {part}\n\nHerons in {part}.\n")
    report = client.ingest([tmp_path], include=["*.md"])
    first, second = (str((tmp_path / p / "notes.md").resolve()) for p in ("a", "b"))
    assert (report.documents, list(report.doc_ids)) == (1, [first])
    assert [src for src, _why in report.failed] == [second]
    assert "same name" in report.failed[0][1]
    client.delete_document(report.doc_ids[first])


def test_ingest_names_a_missing_file_without_sending_it(
    served: tuple[Kredenc, Client], tmp_path: Path
) -> None:
    _kb, client = served
    report = client.ingest([tmp_path / "nope.md"])
    assert report.documents == 0
    assert len(report.failed) == 1 and "nope.md" in report.failed[0][1]


@pytest.mark.timeout(60)
def test_a_job_no_one_takes_is_announced_once_then_given_up_naming_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that queues to RQ with no worker running leaves the job queued: the
    client says so once, after a few seconds, and gives up after its bound with one
    line naming 'kredenc worker' and the job's id (it waited silently, forever).
    tests/interfaces/server/test_rq_jobs.py does the same against a real server."""
    import logging

    import httpx

    from kredenc import client as client_module

    monkeypatch.setattr(client_module, "QUEUED_NOTICE_S", 0.3)
    monkeypatch.setattr(client_module, "POLL_S", 0.05)
    job = {"id": "job_0f", "state": "queued", "sources": ["kestrels.md"], "progress": {},
           "report": None, "error": None, "created_at": 0.0, "finished_at": None}  # fmt: skip
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(f"{request.method} {request.url.path}")
        if request.method == "POST":
            return httpx.Response(202, json={"job": job})
        if request.url.path.endswith("/events"):  # a stream that ends: no events yet
            return httpx.Response(200, text="", headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json=job)

    note = tmp_path / "kestrels.md"
    note.write_text(NOTE, encoding="utf-8")
    transport = httpx.MockTransport(handler)
    with (
        Client("http://kredenc.test", transport=transport, queued_timeout_s=1.5) as client,
        caplog.at_level(logging.WARNING, logger="kredenc.client"),
        pytest.raises(KredencError) as caught,
    ):
        client.ingest([note])
    assert caught.value.exit_code == 1 and caught.value.code == "deadline_exceeded"
    said = str(caught.value)
    assert "job_0f" in said and "still queued" in said and "kredenc worker" in said
    assert "\n" not in said
    notices = [r.getMessage() for r in caplog.records if r.name == "kredenc.client"]
    assert len(notices) == 1, notices
    assert "job_0f" in notices[0] and "queued" in notices[0] and "kredenc worker" in notices[0]
    assert asked.count("GET /ingest/jobs/job_0f") >= 3  # it kept looking while it waited


def test_a_queued_job_that_starts_is_followed_to_its_end(
    served: tuple[Kredenc, Client], tmp_path: Path
) -> None:
    """The thread queue's jobs start at once: no notice, the report as before."""
    kb, _client = served
    note = tmp_path / "herons.md"
    note.write_text("# Herons\n\nHerons fish at dawn by the weir.\n", encoding="utf-8")
    with Client(_client.url, queued_timeout_s=30) as client:
        report = client.ingest([note])
    assert report.documents == 1
    client_docs = [d for d in kb.list_documents() if d.origin.endswith("herons.md")]
    assert len(client_docs) == 1
    kb.delete_document(client_docs[0].id)


def test_stats_check_and_jobs(served: tuple[Kredenc, Client]) -> None:
    kb, client = served
    assert client.stats()["namespace"] == kb.stats()["namespace"]
    assert client.stats()["records"] == kb.stats()["records"]
    assert client.check()["sound"] is True
    reports = client.run_jobs(["decay"])
    assert [type(r) for r in reports] == [JobReport]
    assert reports[0].job == "decay"


def test_export_then_import_round_trips(served: tuple[Kredenc, Client]) -> None:
    kb, client = served
    out = io.StringIO()
    n = client.export(out)
    lines = out.getvalue().splitlines()
    assert n == len(lines) > 1
    local = io.StringIO()
    kb.export(local, [kb.namespace])
    assert [json.loads(x).get("id") for x in lines[1:]] == [
        json.loads(x).get("id") for x in local.getvalue().splitlines()[1:]
    ]
    report = client.import_lines(lines, skip_existing=True)
    assert report.records == 0 and report.skipped > 0


def test_bad_input_is_invalid_input_with_the_servers_hint(
    served: tuple[Kredenc, Client],
) -> None:
    _kb, client = served
    with pytest.raises(InvalidInput) as caught:
        client.search("x", k=10**6)
    assert caught.value.hint
    with pytest.raises(InvalidInput):
        client.remember("")


def test_a_key_is_needed_and_its_absence_says_what_to_do(tmp_path: Path) -> None:
    home = tmp_path / "keyed"
    kb = _open(home)
    secret, _key = KeyRing(home).add("default")
    try:
        with ServerThread(kb) as url:
            for key in (None, "not-the-key"):
                with Client(url, key) as client, pytest.raises(KredencError) as caught:
                    client.stats()
                assert caught.value.code == "unauthorized"
                assert caught.value.hint
            with Client(url, secret) as client:
                assert client.stats()["namespace"] == "default"
    finally:
        kb.close()


def test_no_server_is_a_provider_error_naming_the_url() -> None:
    with Client("http://127.0.0.1:9", timeout=5) as client, pytest.raises(ProviderError) as caught:
        client.stats()
    assert isinstance(caught.value, ServerUnreachable)
    assert "http://127.0.0.1:9" in caught.value.message
    assert "http://127.0.0.1:9" in caught.value.hint


def test_a_non_http_url_is_refused() -> None:
    with pytest.raises(InvalidInput, match="not an http"):
        Client("127.0.0.1:8765")


@pytest.mark.parametrize(
    "url",
    ["http://[::1", "http://127.0.0.1:99999", "http://127.0.0.1:port", "http://", "https:///x"],
)
def test_a_url_that_does_not_parse_is_bad_input_not_an_internal_error(url: str) -> None:
    """'http://[::1' was an internal error (httpx's InvalidURL), port 99999 a refused
    connection: both are a mistyped --url."""
    with pytest.raises(InvalidInput, match="is not a server URL") as caught:
        Client(url)
    assert "e.g. http://127.0.0.1:8765" in caught.value.hint


def test_error_codes_map_to_the_exception_tree() -> None:
    locked = error_from_body(503, {"error": {"code": "store_locked", "message": "m", "hint": "h"}})
    assert type(locked) is StoreLocked
    assert (locked.message, locked.hint, locked.code) == ("m", "h", "store_locked")
    unknown = error_from_body(404, {"error": {"code": "no_route", "message": "gone", "hint": ""}})
    assert isinstance(unknown, NotFound)
    assert unknown.code == "no_route"
    shapeless = error_from_body(500, "<html>")
    assert type(shapeless) is KredencError
    assert "500" in shapeless.message


def test_fields_a_route_does_not_take_are_refused_not_dropped(
    served: tuple[Kredenc, Client],
) -> None:
    kb, client = served
    before = kb.stats()["records"]
    with pytest.raises(InvalidInput, match="read_only"):
        client.remember("A read-only memory", read_only=True)
    with pytest.raises(InvalidInput, match="max_iterations"):
        client.ask("when do deploys happen?", max_iterations=2)
    assert kb.stats()["records"] == before


def test_each_method_takes_the_facades_arguments_with_its_defaults() -> None:
    import inspect

    shared = [
        "remember", "get", "score", "forget", "relate", "search", "context_graph", "recall",
        "ask", "session_history", "clear_session", "list_memories", "list_documents",
        "list_sessions", "ingest", "delete_document", "stats", "export", "import_lines",
        "import_mem0", "run_jobs", "check", "provenance", "close", "relationships_of",
        "list_relationships", "read_document", "memory_history",
    ]  # fmt: skip
    for name in shared:
        ours = inspect.signature(getattr(Client, name)).parameters
        theirs = inspect.signature(getattr(Kredenc, name)).parameters
        for param in ours.values():
            if param.name == "self" or param.kind is param.VAR_KEYWORD:
                continue
            assert param.name in theirs, (name, param.name)
            assert param.default == theirs[param.name].default, (name, param.name)
            assert param.kind == theirs[param.name].kind, (name, param.name)
        # Every argument of the facade without a default is the client's too.
        required = [p.name for p in theirs.values() if p.default is p.empty and p.name != "self"]
        assert [p for p in required if p not in ours and p not in ("args", "kwargs")] == [], name


def test_a_refused_streamed_ask_raises_before_any_text(served: tuple[Kredenc, Client]) -> None:
    _kb, client = served
    deltas: list[str] = []
    with pytest.raises(KredencError) as caught:
        client.ask("when?", agent="no-such-agent", stream=True, on_delta=deltas.append)
    assert "no-such-agent" in caught.value.message
    assert caught.value.hint and deltas == []


def test_scope_ids_and_filters_travel_over_the_client(served: tuple[Kredenc, Client]) -> None:
    _kb, client = served
    mine = client.remember("Kiri paddles a green canoe", kind="fact", user_id="kiri", tags=["boat"])
    other = client.remember("Tane paddles a grey canoe", user_id="tane", meta={"lake": "taupo"})
    assert (mine.user_id, other.user_id) == ("kiri", "tane")
    assert [h.id for h in client.search("paddles canoe", user_id="kiri")] == [mine.id]
    assert [h.id for h in client.search("paddles canoe", where={"lake": "taupo"})] == [other.id]
    assert [h.id for h in client.search("paddles canoe", tags=["boat"])] == [mine.id]
    assert [m.id for m in client.list_memories(user_id="tane")] == [other.id]
    graph = client.context_graph("paddles canoe", user_id="tane")
    assert {n.id for n in graph.nodes} == {other.id}
    for forgotten in (mine, other):
        client.forget(forgotten.id)
