"""``kredenc ask`` and ``kredenc session show|clear`` in-process through ``main()``, on a
real store with the real MiniLM embedder, tools and agents from folders (the
framework's test tools: the roles are tested with their own modules)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kredenc.interfaces.cli import main
from kredenc.loop.answer import REVISED
from loop._tools import SOURCE, agent_file

NOTES = {
    "heron.txt": "The heron nests by the mill pond.\n",
    "needle.txt": "A needle was found in the haystack behind the barn.\n",
}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for key in ("KREDENC_HOME", "KREDENC_NAMESPACE"):
        monkeypatch.delenv(key, raising=False)
    tools, agents = tmp_path / "tools", tmp_path / "agents"
    tools.mkdir()
    agents.mkdir()
    (tools / "finder.py").write_text(SOURCE, encoding="utf-8")
    (agents / "finder.md").write_text(agent_file(), encoding="utf-8")
    monkeypatch.setenv("KREDENC_TOOLS_DIR", str(tools))
    monkeypatch.setenv("KREDENC_AGENTS_DIR", str(agents))
    monkeypatch.setenv("KREDENC_EMBED_THREADS", "1")
    monkeypatch.setenv("KREDENC_DURABILITY", "none")
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    home = str(tmp_path / "store")
    main(["--store", home, "ingest", str(notes)])
    return home


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_ask_prints_the_answer_sources_and_the_confidence_card(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--store", store, "ask", "where was the needle found",
                         "--agent", "finder", "--session", "s1")  # fmt: skip
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert "needle" in lines[0] and lines[0].endswith("[1]")
    assert lines[1] == ""
    assert lines[2].startswith("[1] needle") and "score " in lines[2]
    assert lines[-1] == (
        "confidence 90 (context verified) · context sufficient · 1 iteration, hybrid"
    )


def test_ask_json_is_the_answer(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--store", store, "ask", "where was the needle found",
                       "--agent", "finder", "--json")  # fmt: skip
    assert code == 0
    data = json.loads(out)
    assert "needle" in data["text"] and data["citations"][0]["n"] == 1
    assert data["evaluation"]["confidence_score"] == 90
    assert [s["tool"] for s in data["trace"]] == [
        "decide",
        "retrieve",
        "generate",
        "judge",
        "reflect",
    ]
    assert data["meta"]["filed"]["session"].startswith("ask-")


def test_stream_prints_the_text_once(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--store", store, "ask", "where was the needle found",
                       "--agent", "finder", "--stream")  # fmt: skip
    assert code == 0
    assert out.count("A needle was found") == 1
    assert out.splitlines()[0] == "A needle was found in the haystack behind the barn. [1]"


@pytest.mark.parametrize(
    ("streamed", "text", "printed"),
    [
        ("A needle [1]", "A needle [1]", "\n"),
        ("A needle", "A needle [1]", " [1]\n"),  # citation marks added after the stream
        # Iterated: the kept answer was streamed after the marker; only its rest follows.
        (f"A heron [1]{REVISED}A needle", "A needle [1]", " [1]\n"),
        # The kept answer is not what was streamed last: it is printed whole, once, marked.
        ("A heron [1]", "A needle [1]", f"{REVISED}A needle [1]\n"),
        ("", "A needle [1]", "A needle [1]\n"),
    ],
)
def test_a_streamed_answer_is_finished_not_repeated(
    streamed: str, text: str, printed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from kredenc.interfaces.cli_ask import _finish_stream

    _finish_stream(streamed, text)
    assert capsys.readouterr().out == printed


def test_session_show_and_clear(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    for question in ("where was the needle found", "and the heron?"):
        assert run(capsys, "--store", store, "ask", question, "--agent", "finder",
                   "--session", "s1")[0] == 0  # fmt: skip
    code, out, _ = run(capsys, "--store", store, "session", "show", "s1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "user: where was the needle found"
    assert lines[1].startswith("assistant: ") and lines[2] == "user: and the heron?"
    code, out, _ = run(capsys, "--store", store, "session", "show", "s1", "--json")
    assert len(json.loads(out)["messages"]) == 4
    code, out, _ = run(capsys, "--store", store, "session", "clear", "s1")
    assert (code, out) == (0, "session s1: 4 turns forgotten\n")
    code, out, _ = run(capsys, "--store", store, "--json", "session", "show", "s1")
    assert json.loads(out) == {"session": "s1", "messages": []}


def test_errors_are_one_line(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--store", store, "ask", "hi", "--agent", "nobody")
    assert code == 2 and out == ""
    assert err.startswith("error: unknown agent 'nobody' (agents: answer, finder;")
    assert len(err.splitlines()) == 1
    code, _, err = run(capsys, "--store", store, "ask", "  ", "--agent", "finder")
    assert (code, err) == (2, "error: the question is empty (ask something)\n")


def test_a_role_set_to_llm_without_an_llm_is_one_line_and_exit_2(
    store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KREDENC_TOOLS_DIR")  # the shipped roles, not the test tools
    monkeypatch.setenv("KREDENC_LLM_PROVIDER", "none")
    monkeypatch.setenv("KREDENC_ROLE_GENERATE", "llm")
    code, out, err = run(capsys, "--store", store, "ask", "where was the needle found")
    assert (code, out) == (2, "")
    assert err == (
        "error: role_generate is 'llm' but no LLM is configured "
        "(configure an LLM, or set role_generate = 'rules')\n"
    )


def test_the_card_names_the_band_and_a_hallucination() -> None:
    from kredenc.grounding.base import Evaluation
    from kredenc.interfaces.cli_ask import _card
    from kredenc.loop.answer import Answer

    flagged = Evaluation(False, 35, True, "the year 1999 is not in the context", "unsupported")
    card = _card(Answer("q", "In 1999 [1].", evaluation=flagged, iterations=2, mode="graph"))
    assert card == (
        "confidence 35 (low) · context insufficient · hallucination: the year 1999 is not in "
        "the context · 2 iterations, graph"
    )
    assert _card(Answer("q", "Hello!", mode="none")) == "confidence: not judged · 1 iteration, none"


def test_ask_and_session_clear_refuse_a_missing_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --store is an error naming it, not an empty store answering nothing."""
    missing = tmp_path / "typo"
    for argv in (["ask", "what is the budget?"], ["session", "clear", "s1"]):
        code, _, err = run(capsys, "--store", str(missing), *argv)
        assert code == 1 and "no store at" in err, err
        assert not missing.exists()
