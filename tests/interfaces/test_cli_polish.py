"""Rough edges a new user hits at the command line (issue 16): help with no arguments,
global options after the command, JSON errors under ``--json``, missing stores on read
commands, unknown loaders, and the proxy on a busy port.

In-process through the shared ``run`` fixture (tests/interfaces/conftest.py); the
proxy runs as a real process.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kredenc.plugins import LOADERS, names


def test_no_arguments_prints_the_help(run: Any) -> None:
    code, out, err = run.bare()
    assert code == 0, err
    assert err == ""
    assert out.startswith("Usage: kredenc [OPTIONS] COMMAND")
    assert "Commands:" in out and "search" in out
    assert "error:" not in out


@pytest.mark.parametrize("where", ["before", "after"])
def test_global_options_work_after_the_command_too(run: Any, tmp_path: Path, where: str) -> None:
    other = tmp_path / "other"
    code, _, err = run.bare("--store", str(other), "-n", "team", "remember", "The user drinks tea.")
    assert code == 0, err
    args = ["--store", str(other), "--namespace", "team", "--json"]
    if where == "before":
        code, out, err = run.bare(*args, "search", "tea", "--mode", "lexical")
    else:
        code, out, err = run.bare("search", "tea", "--mode", "lexical", *args)
    assert code == 0, err
    hits = json.loads(out)["hits"]
    assert [h["text"] for h in hits] == ["The user drinks tea."]
    # The default store (the fixture's) and namespace hold nothing of it.
    code, _, err = run.bare("search", "tea", "--store", str(other), "--mode", "lexical")
    assert code == 0 and err == ""


def test_the_commands_help_lists_the_global_options(run: Any) -> None:
    code, out, _ = run.bare("search", "--help")
    assert code == 0
    for line in ("--store DIR", "-n, --namespace NAME", "-v, --verbose", "--debug"):
        assert line in out
    assert "default:" not in out.split("--store DIR", 1)[1]


def test_verbose_and_debug_after_the_command(run: Any) -> None:
    code, _, err = run("remember", "Tea at noon.", "-v", "--debug")
    assert code == 0, err


def test_keys_add_keeps_its_own_namespace_option(run: Any) -> None:
    assert run("init")[0] == 0
    code, out, err = run("keys", "add", "--namespace", "alpha", "--json")
    assert code == 0, err
    assert json.loads(out)["namespace"] == "alpha"


def _json_error(err: str) -> dict[str, Any]:
    lines = err.splitlines()
    assert len(lines) == 1, err
    body = json.loads(lines[0])
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "hint"}
    return dict(body["error"])


@pytest.mark.parametrize("where", ["before", "after"])
def test_json_errors_are_json_on_stderr_with_the_same_exit_codes(
    run: Any, tmp_path: Path, where: str
) -> None:
    def go(*args: str) -> tuple[int, str, str]:
        return run(*args, "--json") if where == "after" else run("--json", *args)

    code, out, err = go("search", "tea", "--mode", "fuzzy")  # a usage error
    assert (code, out) == (2, "")
    error = _json_error(err)
    assert error["code"] == "usage"
    assert "fuzzy" in error["message"] and "--help" in error["hint"]

    code, out, err = go("remember", "x", "--importance", "7")  # invalid input
    assert (code, out) == (2, "")
    assert _json_error(err)["code"] == "invalid_input"

    code, out, err = run.bare("--store", str(tmp_path / "nowhere"), "--json", "search", "tea")
    assert (code, out) == (1, "")
    error = _json_error(err)
    assert error["code"] == "store_error"
    assert "no store at" in error["message"] and "init" in error["hint"]


def test_text_errors_stay_one_line(run: Any) -> None:
    code, _, err = run("search", "tea", "--mode", "fuzzy")
    assert code == 2
    assert err.startswith("error: ") and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        ("search", "tea"),
        ("graph", "tea"),
        ("recall", "tea"),
        ("get", "m-1"),
        ("stats",),
        ("forget", "m-1"),
        ("score", "m-1", "--importance", "0.9"),
        ("relate", "m-1", "m-2", "supports"),
        ("jobs", "run", "decay"),
        ("compact",),
        ("rebuild",),
    ],
)
def test_commands_on_a_missing_store_say_so_and_create_nothing(
    run: Any, tmp_path: Path, args: tuple[str, ...]
) -> None:
    typo = tmp_path / "sotre"
    code, out, err = run.bare("--store", str(typo), *args)
    assert code == 1, (out, err)
    assert err == (
        f"error: no store at {typo} (check --store, or create one there with"
        f" 'kredenc --store {typo} init')\n"
    )
    assert not typo.exists()


def test_a_store_that_lost_its_store_json_is_not_called_missing(run: Any, tmp_path: Path) -> None:
    """Its log still holds the records: every command says so, and the hint (salvage
    into a new store) works as written; 'init' would refuse it."""
    code, _, err = run("remember", "The user drinks tea.")
    assert code == 0, err
    (run.home / "store.json").unlink()
    lost = f"{run.home} has a haystack but no store.json"
    for args in (("search", "tea"), ("init",), ("stats",), ("remember", "More.")):
        code, out, err = run(*args)
        assert code == 1 and out == "", (args, out, err)
        assert err.startswith(f"error: {lost}"), (args, err)
        assert f"kredenc --store {run.home} salvage NEW_DIR" in err, (args, err)
    code, out, _ = run("check")
    assert code == 1 and lost in out and "salvage NEW_DIR" in out
    rescued = tmp_path / "rescued"
    code, out, err = run("salvage", str(rescued))
    assert code == 0, err
    code, out, err = run.bare("--store", str(rescued), "search", "tea")
    assert code == 0 and "The user drinks tea." in out, (out, err)


def test_a_write_that_fails_leaves_no_new_store_behind(run: Any, tmp_path: Path) -> None:
    """A write under a mistyped --store that fails (bad input, nothing filed) leaves no
    empty store there; one that existed before, empty folder or store, is left as is."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    for name, args, want in (
        ("remember", ("remember", ""), 2),
        ("import", ("import", str(bad)), 2),
        ("ingest", ("ingest", str(tmp_path / "no-such-file.md")), 1),
    ):
        typo = tmp_path / f"sotre-{name}"
        code, out, err = run.bare("--store", str(typo), *args)
        assert code == want, (name, out, err)
        assert not typo.exists(), name
    folder = tmp_path / "made-by-hand"
    folder.mkdir()
    code, _, _ = run.bare("--store", str(folder), "remember", "")
    assert code == 2 and folder.is_dir()


def test_writes_that_file_something_create_the_store(run: Any, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    code, _, err = run.bare("--store", str(fresh), "remember", "The user drinks tea.")
    assert code == 0, err
    assert (fresh / "store.json").exists()


def test_an_unknown_loader_is_a_usage_error_naming_the_loaders(run: Any) -> None:
    run("remember", "The user drinks tea.")
    code, out, err = run("search", "tea", "--loader", "pfd")
    assert (code, out) == (2, "")
    assert err.startswith("error: unknown loader 'pfd' (available: ")
    for name in names(LOADERS):
        assert name in err
    code, out, err = run("list", "documents", "--loader", "pfd")
    assert (code, out) == (2, "") and err.startswith("error: unknown loader 'pfd' (available: ")
    code, _, err = run("search", "tea", "--loader", "pdf")  # a known one filters
    assert code == 0, err


def test_proxy_on_a_busy_port_exits_1_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KREDENC_")}
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                "from kredenc.interfaces.cli import main; main()",
                "--store",
                str(tmp_path / "store"),
                "proxy",
                "--upstream",
                "http://127.0.0.1:9/v1",
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: cannot listen on 127.0.0.1:{port}: "), lines
    assert "another --port" in lines[0]


def test_graph_prints_the_prompt_text_the_docs_promise(run: Any) -> None:
    run("remember", "The user likes to drink tea", "--kind", "preference", "--importance", "0.2")
    run("remember", "The user's manager is Bob", "--kind", "fact", "--importance", "1.0")
    code, out, err = run("graph", "what does the user drink", "--budget", "400")
    assert code == 0, err
    nodes, _, prompt = out.partition("\nprompt text (")
    assert nodes.splitlines()[0].endswith("[preference] The user likes to drink tea")
    head, *lines = prompt.splitlines()
    assert head.endswith(" of 400 characters):")
    assert lines[0].startswith("[m") and "(preference, " in lines[0]
    assert lines[0].endswith("The user likes to drink tea")
    code, out, _ = run("graph", "what does the user drink", "--budget", "400", "--json")
    assert json.loads(out)["prompt"] == "\n".join(lines)


def test_memory_hits_show_their_date_and_importance(run: Any) -> None:
    code, out, _ = run("remember", "The user drinks tea.", "--importance", "0.8", "--json")
    mem = json.loads(out)
    run("score", mem["id"], "--importance", "0.9")  # the current score is shown
    code, out, err = run("search", "tea", "--mode", "lexical")
    assert code == 0, err
    first, provenance = out.splitlines()[:2]
    assert mem["id"] in first
    day = provenance.split()[0]
    assert len(day) == 10 and day[4] == "-" and day[7] == "-"
    assert "importance 0.90" in provenance
    hit = json.loads(run("search", "tea", "--mode", "lexical", "--json")[1])["hits"][0]
    assert hit["importance"] == 0.9 and hit["created_at"] > 0


def test_ingest_lists_each_file_once_and_counts_in_the_singular(
    run: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = tmp_path / "notes.txt"
    good.write_text("The kestrel nests on the old water tower.\n", encoding="utf-8")
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.4 not really a pdf")
    code, out, err = run("ingest", str(good), str(bad))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("1 document filed (1 chunk), 0 unchanged, 1 failed, 0 skipped")
    assert lines[1] == f"  filed: {good} (1 chunk)"
    assert lines[2].startswith(f"  failed: {bad}: ")
    assert len(lines) == 3
    assert out.count(str(bad)) == 1 and str(bad) not in err  # printed once, on stdout
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    good.write_text("The kestrel nests on the new water tower.\n", encoding="utf-8")
    other = tmp_path / "other.md"
    other.write_text("# Other\n\nHeron.\n\nEgret.\n", encoding="utf-8")
    code, out, _ = run("ingest", str(good), str(other))
    assert out.startswith(
        "2 documents filed (2 chunks; 1 of them a new version of a file filed before),"
        " 0 unchanged, 0 failed"
    )
    good.write_text("The kestrel nests on the old water tower.\n", encoding="utf-8")
    other.write_text("# Other\n\nHeron and egret.\n", encoding="utf-8")
    code, out, _ = run("ingest", str(good), str(other), "--json")
    assert json.loads(out)["files"] == [
        {"source": str(good), "status": "replaced", "chunks": 1},
        {"source": str(other), "status": "replaced", "chunks": 1},
    ]
    code, out, _ = run("ingest", str(good))
    assert out.splitlines() == [
        out.splitlines()[0],
        f"  unchanged: {good}",
    ]
    assert out.startswith("0 documents filed (0 chunks), 1 unchanged, 0 failed")


def test_search_asked_at_reads_the_time_the_query_names(run: Any) -> None:
    """`kredenc search --asked-at TIME`: "two months ago" puts what was filed since then
    first; a time that is not one exits 2 with one line."""
    from kredenc.engine import Kredenc
    from kredenc.testing.embedders import HashEmbedder

    day, asked = 86_400.0, 1_700_000_000.0
    with Kredenc.open(run.home, embedder=HashEmbedder(), durability="none") as kb:
        kb.file_turns("a", [{"role": "user", "content": "The museum trip: a museum day.",
                             "at": asked - 150 * day}])  # fmt: skip
        kb.file_turns("b", [{"role": "user", "content": "I saw a museum.", "at": asked - 58 * day}])
    query = ("search", "museum trip two months ago", "--mode", "lexical", "-k", "2", "--json")
    code, out, _ = run(*query)
    plain = [h["text"] for h in json.loads(out)["hits"]]
    assert code == 0 and plain[0].startswith("The museum trip")
    code, out, _ = run(*query, "--asked-at", "2023-11-14T22:13:20Z")
    assert code == 0 and [h["text"] for h in json.loads(out)["hits"]] == plain[::-1]
    code, _, err = run(*query, "--asked-at", "the other day")
    assert code == 2 and "asked_at" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["search", "graph"])
def test_a_blank_query_is_a_usage_error(run: Any, command: str) -> None:
    run("remember", "The user drinks tea.")
    for blank in ("", "   "):
        code, out, err = run(command, blank)
        assert (code, out) == (2, "")
        assert err == "error: the query is empty (give the words to search for)\n"
