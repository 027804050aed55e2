"""Ask (JSON and server-sent events) and sessions over HTTP, over an ingested Markdown
note: the answer cites the note; the stream sends steps, the text, then the answer,
in that order; the session's history holds the turns until it is cleared."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from kredenc.engine import Kredenc
from kredenc.errors import ProviderError
from kredenc.loop.answer import Step

ErrorCheck = Callable[..., dict[str, Any]]
QUESTION = "How many attention heads does the Transformer use?"


@pytest.fixture(scope="module")
def client(
    start_server: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    note = tmp_path_factory.mktemp("notes") / "transformer.md"
    note.write_text(
        "# The Transformer\n\nThe Transformer uses 8 attention heads in each layer.\n\n"
        "## Training\n\nIt was trained on eight GPUs for twelve hours.\n"
    )

    def setup(kb: Kredenc) -> None:
        kb.ingest([note])

    with start_server(setup=setup).client() as c:
        yield c


def events(response: httpx.Response) -> list[tuple[str, Any]]:
    """The (event, data) pairs of a server-sent event stream."""
    out = []
    for block in response.text.split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((fields["event"], json.loads(fields["data"])))
    return out


def test_ask_returns_a_cited_answer(client: httpx.Client) -> None:
    response = client.post("/ask", json={"question": QUESTION})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert "8" in answer["text"] and "[1]" in answer["text"]
    assert answer["citations"][0]["origin"].endswith("transformer.md")
    assert answer["evaluation"]["hallucination_detected"] is False
    assert [s["tool"] for s in answer["trace"]][:3] == ["decide", "rewrite", "retrieve"]


@pytest.mark.parametrize("how", ["body", "accept"])
def test_stream_sends_steps_text_then_the_answer(client: httpx.Client, how: str) -> None:
    body: dict[str, Any] = {"question": QUESTION}
    headers = {}
    if how == "body":
        body["stream"] = True
    else:
        headers["Accept"] = "text/event-stream"
    response = client.post("/ask", json=body, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    got = events(response)
    names = [name for name, _ in got]
    assert names[-1] == "answer" and names.count("answer") == 1 and "error" not in names
    answer = got[-1][1]
    steps = [data for name, data in got if name == "step"]
    assert steps == answer["trace"]  # every step, live, in the order of the trace
    assert names.index("step") < names.index("delta")
    assert "".join(d["text"] for n, d in got if n == "delta") == answer["text"]
    assert "8" in answer["text"]


def test_a_bad_question_is_refused_before_the_stream(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    assert_error_shape(client.post("/ask", json={"question": "", "stream": True}), 422)
    assert_error_shape(
        client.post("/ask", json={"question": "  ", "stream": True}), 422, "invalid_input"
    )


def test_an_unknown_agent_is_refused_before_the_stream(
    client: httpx.Client, assert_error_shape: ErrorCheck
) -> None:
    response = client.post("/ask", json={"question": QUESTION, "agent": "nobody", "stream": True})
    assert "nobody" in assert_error_shape(response, 422, "invalid_input")["message"]


def test_a_failure_mid_stream_is_the_last_event(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(self: Kredenc, question: str, **options: Any) -> Any:
        options["on_step"](Step(tool="decide", status="ok", ms=1.0))
        raise ProviderError("the model is down", "start it again")

    monkeypatch.setattr(Kredenc, "ask", failing)
    got = events(client.post("/ask", json={"question": QUESTION, "stream": True}))
    assert [name for name, _ in got] == ["step", "error"]
    assert got[1][1] == {
        "error": {
            "code": "provider_error",
            "message": "the model is down",
            "hint": "start it again",
        }
    }


def test_a_fault_mid_stream_names_nothing_inside(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Kredenc, question: str, **options: Any) -> Any:
        raise RuntimeError("secret /private/path")

    monkeypatch.setattr(Kredenc, "ask", broken)
    response = client.post("/ask", json={"question": QUESTION, "stream": True})
    got = events(response)
    assert [name for name, _ in got] == ["error"]
    assert got[0][1]["error"]["code"] == "internal_error"
    assert "secret" not in response.text


def test_session_history_and_clear(client: httpx.Client) -> None:
    for _ in range(2):
        assert (
            client.post("/ask", json={"question": QUESTION, "session_id": "s-1"}).status_code == 200
        )
    history = client.get("/sessions/s-1").json()
    assert history["session_id"] == "s-1"
    assert [m["role"] for m in history["messages"]] == ["user", "assistant"] * 2
    assert history["messages"][0]["content"] == QUESTION
    assert len(client.get("/sessions/s-1", params={"limit": 1}).json()["messages"]) == 1
    listed = client.get("/sessions").json()
    assert "s-1" in [s["session"] for s in listed["items"]]
    assert client.delete("/sessions/s-1").json() == {"cleared": 4}
    assert client.get("/sessions/s-1").json()["messages"] == []
    assert "s-1" not in [s["session"] for s in client.get("/sessions").json()["items"]]
    assert client.delete("/sessions/s-1").json() == {"cleared": 0}
