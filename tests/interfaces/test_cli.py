"""The command line, end to end: real processes, the real MiniLM embedder.

Each command is run with ``--json`` and its stable field names are pinned. Errors are
one line on stderr starting with ``error:``, never a traceback, with exit code 2 for
usage and invalid input and 1 for failures; a refused write leaves the log as it was.
Usage errors that fail before any process state matters run in-process through
``main()`` (the same code path, minus the interpreter start).
"""

from __future__ import annotations

import io
import json
import os
import pty
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kredenc.interfaces.cli import main
from kredenc.storage.haystack import scan

ENTRY = "from kredenc.interfaces.cli import main; main()"
LOG = "haystack.log"

Arg = str | bytes


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KREDENC_")}
    env["KREDENC_EMBED_THREADS"] = "1"
    return env


def kredenc(*args: Arg, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    """Run ``kredenc ARGS`` in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *args],
        input=stdin.decode("utf-8", "surrogateescape"),
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="surrogateescape",
        env=_env(),
        timeout=120,
        check=False,
    )


def ok_json(*args: Arg, stdin: bytes = b"") -> Any:
    proc = kredenc(*args, "--json", stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return json.loads(proc.stdout)


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def log_state(home: Path) -> tuple[int, int]:
    """(log size in bytes, committed records): what "nothing written" compares."""
    data = (home / LOG).read_bytes()
    return len(data), scan(data, home / LOG).records


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store made by the CLI: init, one memory from an argument, one from stdin."""
    home = tmp_path_factory.mktemp("cli") / "store"
    init = ok_json("--store", str(home), "init")
    first = ok_json(
        "--store", str(home), "remember", "The kestrel nests on the old water tower",
        "--kind", "fact", "--tags", "birds, city",
    )  # fmt: skip
    second = ok_json(
        "--store", str(home), "remember", "-", stdin=b"Quarterly budget review on Friday\n"
    )
    return {"home": home, "init": init, "first": first, "second": second}


def copy_of(seeded: dict[str, Any], tmp_path: Path) -> Path:
    home = tmp_path / "store"
    shutil.copytree(seeded["home"], home, ignore=shutil.ignore_patterns("lock"))
    return home


def test_init_and_remember(seeded: dict[str, Any]) -> None:
    init, first, second = seeded["init"], seeded["first"], seeded["second"]
    assert init["records"] == 0 and init["log_records"] == 0
    assert init["model"] and init["dim"] == 384
    for mem in (first, second):
        assert {"id", "seq", "offset", "text", "kind"} <= set(mem)
    assert first["seq"] == 1 and first["offset"] == 24  # just past the 24-byte file header
    assert first["kind"] == "fact"
    assert second["seq"] == 2 and second["offset"] > first["offset"]
    assert second["text"] == "Quarterly budget review on Friday\n"  # stdin, byte for byte


def test_end_to_end(seeded: dict[str, Any], tmp_path: Path) -> None:
    home = copy_of(seeded, tmp_path)
    store = ("--store", str(home))
    first, second = seeded["first"]["id"], seeded["second"]["id"]

    found = ok_json(*store, "search", "where do kestrels nest?")
    assert {"query", "mode", "hits"} <= set(found) and found["mode"] == "hybrid"
    hit = found["hits"][0]
    assert {"id", "seq", "offset", "text", "score", "legs", "fused", "kind", "drawer"} <= set(hit)
    assert (hit["id"], hit["seq"], hit["offset"]) == (first, 1, 24)
    assert hit["tags"] == ["birds", "city"]
    assert set(hit["legs"]) == {"lexical", "dense"}
    assert {"rank", "score"} == set(hit["legs"]["dense"]) and hit["legs"]["dense"]["rank"] == 1

    lexical = ok_json(*store, "--json", "search", "budget", "--mode", "lexical", "-k", "1")
    assert [h["id"] for h in lexical["hits"]] == [second]
    assert set(lexical["hits"][0]["legs"]) == {"lexical"}

    got = ok_json(*store, "get", first)
    assert {"id", "text", "seq", "offset", "kind", "tags"} <= set(got)
    assert (got["id"], got["seq"], got["offset"]) == (first, 1, 24)
    assert got["text"] == "The kestrel nests on the old water tower"

    assert ok_json(*store, "forget", first) == {"id": first, "forgotten": True}

    missing = kredenc(*store, "get", first)
    assert missing.returncode == 1 and missing.stdout == ""
    assert first in one_error_line(missing.stderr)

    rebuilt = ok_json(*store, "rebuild")
    assert {"records", "last_seq", "seconds"} <= set(rebuilt)
    assert rebuilt["last_seq"] == 3  # two puts and a tombstone

    check = ok_json(*store, "check")
    assert check["sound"] is True and check["findings"][-1] == "sound"

    stats = ok_json(*store, "stats")
    assert {"records", "drawers", "edges", "store", "namespace", "log_records", "log_bytes"} <= set(
        stats
    )
    assert stats["records"] == 1 and stats["log_records"] == 3
    assert stats["log_bytes"] == log_state(home)[0]


def test_search_iterative_follows_the_bridge_and_says_each_round(tmp_path: Path) -> None:
    store = ("--store", str(tmp_path / "store"))
    film = "Kiss and Tell is a 1945 American comedy film starring Shirley Temple."
    ambassador = "Shirley Temple Black served as United States ambassador to Ghana."
    for text in (film, ambassador, "The budget meeting moved to room 4."):
        ok_json(*store, "remember", text)
    query = "What position was held by the woman who starred in Kiss and Tell?"
    found = ok_json(*store, "search", query, "-k", "3", "--iterative", "--hops", "1")
    assert {film, ambassador} <= {h["text"] for h in found["hits"]}
    first, second = found["rounds"]
    assert first["hop"] == 0 and first["queries"] == [query]
    assert second["hop"] == 1 and "Shirley Temple" in second["bridges"]
    human = kredenc(*store, "search", query, "-k", "3", "--iterative", "--hops", "1")
    assert human.returncode == 0, human.stderr
    assert human.stdout.startswith(f"round 0: searched {query!r}")
    assert "round 1: searched 'Shirley Temple" in human.stdout
    plain = ok_json(*store, "search", query, "-k", "2")
    assert "rounds" not in plain


def test_search_says_which_misspelt_words_it_searched_as_which(tmp_path: Path) -> None:
    store = ("--store", str(tmp_path / "store"))
    ok_json(*store, "remember", "The kestrel nests above the quarry.")
    ok_json(*store, "remember", "The budget meeting moved to room 4.")
    found = ok_json(*store, "search", "kestral quarry", "-k", "1")
    assert found["corrections"] == {"kestral": "kestrel"}
    assert found["hits"][0]["text"] == "The kestrel nests above the quarry."
    human = kredenc(*store, "search", "kestral quarry", "-k", "1")
    assert human.returncode == 0, human.stderr
    assert human.stdout.startswith("searched 'kestral' as 'kestrel' (no card holds")
    assert ok_json(*store, "search", "kestrel quarry", "-k", "1")["corrections"] == {}
    assert "searched" not in kredenc(*store, "search", "kestrel quarry", "-k", "1").stdout
    # Recall corrects them too (recall_spelling, on with SQLite) and says so.
    recalled = ok_json(*store, "recall", "where does the kestral nest?")
    assert recalled["corrections"] == {"kestral": "kestrel"}
    assert "The kestrel nests above the quarry." in recalled["block"]
    human = kredenc(*store, "recall", "where does the kestral nest?")
    assert human.returncode == 0, human.stderr
    assert human.stderr.startswith("searched 'kestral' as 'kestrel' (no card holds")
    assert ok_json(*store, "recall", "where does the kestrel nest?")["corrections"] == {}


def test_search_filters_hops_and_provenance(seeded: dict[str, Any], tmp_path: Path) -> None:
    """`kredenc search` exposes the facade's filters and graph expansion, and shows why
    each hit ranks: legs, fused score, the edge that added it."""
    home = copy_of(seeded, tmp_path)
    store = ("--store", str(home))
    notes = tmp_path / "notes"
    notes.mkdir()
    filler = "The tower keeper logged the weather, the visitors and the repairs. " * 12
    (notes / "tower.md").write_text(
        "# Tower survey\n\nThe kestrel survey of the old water tower found two nests. "
        f"{filler}\n\n## Second visit\n\nThe kestrel survey returned in May. {filler}\n"
    )
    (notes / "river.txt").write_text("The kestrel survey of the river bend found none.\n")
    ok_json(*store, "ingest", str(notes))

    def ids(*args: str) -> list[str]:
        return [h["id"] for h in ok_json(*store, "search", "kestrel survey", *args)["hits"]]

    md = ok_json(*store, "search", "kestrel survey", "--loader", "markdown")["hits"]
    assert md and {h["source"] for h in md} == {str((notes / "tower.md").resolve())}
    assert md[0]["title"] == "Tower survey" and md[0]["fused"] > 0
    txt = ok_json(*store, "search", "kestrel survey", "--source", "*/river.txt")["hits"]
    assert txt and all(h["source"].endswith("river.txt") for h in txt)
    assert ids("--pages", "2-5") == []  # text files have no pages
    everything = ids("-k", "20")
    assert seeded["first"]["id"] in everything  # the kestrel memory too
    assert ids("-k", "20", "--since", "2000-01-01T00:00:00Z") == everything
    assert ids("--until", "2000-01-01") == []
    assert ids("--kind", "fact", "-k", "20") == [seeded["first"]["id"]]
    chunks = ok_json(*store, "search", "kestrel survey", "-k", "20")["hits"]
    tower = [h for h in chunks if h["source"].endswith("tower.md")]
    assert len(tower) >= 2  # the long page was cut in pieces
    per_doc = ok_json(*store, "search", "kestrel survey", "-k", "20", "--per-document")["hits"]
    assert len(per_doc) == len(chunks) - len(tower) + 1  # one piece per document

    lexical = ("search", "two nests", "--mode", "lexical", "--loader", "markdown")
    plain = ok_json(*store, *lexical)["hits"]
    assert len(plain) == 1 and plain[0]["graph"] is None  # only the first piece says it
    expanded = ok_json(*store, *lexical, "--hops", "1")["hits"]
    assert expanded[0]["id"] == plain[0]["id"] and len(expanded) >= 2
    assert expanded[1]["graph"] == f"next of {plain[0]['id']}"  # the piece after it
    human = kredenc(*store, "search", "kestrel survey", "--loader", "markdown")
    assert human.returncode == 0, human.stderr
    assert "Tower survey" in human.stdout and "lexical #1" in human.stdout
    assert "fused" in human.stdout
    # The first hit holds the query's terms: its score carries that coverage bonus
    # (shown on its provenance line, the one after the hit's own).
    lines = human.stdout.splitlines()
    assert lines[0].startswith(" 1.") and "coverage +" in lines[1]

    for args, message in (
        (["--pages", "9-2"], "is not a page range"),
        (["--pages", "two"], "is not a page range"),
        (["--pages", "1-99999999999999999999999"], "is not a page range"),
        (["--since", "2030-01-01", "--until", "2029-01-01"], "since must be earlier than until"),
        (["--since", "last week"], "is not a time"),
    ):
        before = log_state(home)
        bad = kredenc(*store, "search", "kestrel", *args)
        assert bad.returncode == 2 and bad.stdout == ""
        assert message in one_error_line(bad.stderr)
        assert log_state(home) == before


def test_ingest_summary_and_a_progress_bar_only_on_a_terminal(tmp_path: Path) -> None:
    """The summary goes to stdout; the progress bar to stderr, and only when stderr is a
    terminal (here a pseudo-terminal), so a pipe or a log never gets its escape codes."""
    home = tmp_path / "store"
    good = tmp_path / "notes.txt"
    good.write_text("The kestrel nests on the old water tower.\n")
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.4 not really a pdf")
    args = [sys.executable, "-c", ENTRY, "--store", str(home), "ingest", str(good), str(bad)]

    piped = subprocess.run(
        args, capture_output=True, text=True, env=_env(), timeout=120, check=False
    )
    assert piped.returncode == 0, piped.stderr  # one good file: not a failed run
    summary, filed, failure = piped.stdout.splitlines()
    assert summary.startswith("1 document filed (1 chunk), 0 unchanged, 1 failed")
    assert filed == f"  filed: {good} (1 chunk)"
    assert failure.startswith(f"  failed: {bad}")
    assert "\x1b[" not in piped.stderr and "ingesting" not in piped.stderr

    leader, follower = pty.openpty()
    try:
        tty = subprocess.run(
            [*args, str(tmp_path / "missing.md")],
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
            env={**_env(), "TERM": "xterm"},
            timeout=120,
            check=False,
        )
    finally:
        os.close(follower)
    screen = b""
    while True:
        try:
            block = os.read(leader, 65536)
        except OSError:  # the terminal is closed once everything was read
            break
        if not block:
            break
        screen += block
    os.close(leader)
    assert b"files done" in screen and b"\x1b[" in screen  # the bar was drawn on stderr
    assert tty.stdout.startswith("0 documents filed (0 chunks), 1 unchanged")
    assert "\x1b[" not in tty.stdout

    all_bad = kredenc("--store", str(home), "ingest", str(bad))
    assert all_bad.returncode == 1  # nothing filed and nothing unchanged
    assert "1 failed" in all_bad.stdout


def test_invalid_utf8_argument_is_refused(seeded: dict[str, Any], tmp_path: Path) -> None:
    home = copy_of(seeded, tmp_path)
    before = log_state(home)
    proc = kredenc(b"--store", os.fsencode(home), b"remember", b"caf\xc3 \xff\xfe")
    assert proc.returncode == 2
    line = one_error_line(proc.stderr)
    assert "not valid UTF-8" in line
    assert log_state(home) == before


def test_check_reports_a_damaged_store(seeded: dict[str, Any], tmp_path: Path) -> None:
    home = copy_of(seeded, tmp_path)
    raw = bytearray((home / LOG).read_bytes())
    raw[24 + 12 + 20] ^= 0xFF  # a payload byte of the first record; the second is intact
    (home / LOG).write_bytes(bytes(raw))
    proc = kredenc("--store", str(home), "check", "--json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["sound"] is False
    assert any("offset 24" in line for line in report["findings"])


def test_newer_store_format_is_refused(seeded: dict[str, Any], tmp_path: Path) -> None:
    home = copy_of(seeded, tmp_path)
    meta = json.loads((home / "store.json").read_text())
    (home / "store.json").write_text(json.dumps({**meta, "format": 99}))
    before = log_state(home)
    proc = kredenc("--store", str(home), "remember", "hello")
    assert proc.returncode == 1
    line = one_error_line(proc.stderr)
    assert "format version 99" in line and "upgrade kredenc" in line
    assert log_state(home) == before


def test_newer_log_version_is_refused(seeded: dict[str, Any], tmp_path: Path) -> None:
    home = copy_of(seeded, tmp_path)
    raw = bytearray((home / LOG).read_bytes())
    raw[4:6] = (99).to_bytes(2, "little")  # header: b"KRDH" | u16 version | …
    (home / LOG).write_bytes(bytes(raw))
    before = (home / LOG).read_bytes()
    proc = kredenc("--store", str(home), "remember", "hello")
    assert proc.returncode == 1
    line = one_error_line(proc.stderr)
    assert "log format version 99" in line and "upgrade kredenc" in line
    assert (home / LOG).read_bytes() == before


def test_store_path_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "not-a-dir"
    path.write_text("precious\n")
    proc = kredenc("--store", str(path), "remember", "hello")
    assert proc.returncode == 1
    assert "is a file, not a directory" in one_error_line(proc.stderr)
    assert path.read_text() == "precious\n"


# -- in-process: the same main(), no interpreter start -------------------------------


def run_main(
    argv: Sequence[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    stdin: bytes = b"",
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    for key in [k for k in os.environ if k.startswith("KREDENC_")]:
        monkeypatch.delenv(key)
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "x", "--mode", "fuzzy"], "Invalid value for '--mode'"),
        (["search", "x", "-k", "0"], "Invalid value for '-k'"),
        (["search", "x", "-k", "1001"], "Invalid value for '-k'"),
        (["search", "x", "-k", "ten"], "Invalid value for '-k'"),
        (["search"], "Missing argument 'QUERY'"),
        (["frobnicate"], "No such command 'frobnicate'"),
        (["remember", "x", "--colour", "red"], "No such option"),
        (["remember", "caf\udcc3"], "not valid UTF-8"),  # what Python makes of b"caf\xc3"
        (["--store", "s\udcff", "stats"], "not valid UTF-8"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    args: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv = args if args[0] == "--store" else ["--store", str(tmp_path / "s"), *args]
    code, out, err = run_main(argv, capsys, monkeypatch)
    assert code == 2
    assert out == ""
    assert message in one_error_line(err)
    assert not (tmp_path / "s").exists()  # refused before any store was made


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["remember", ""], b"", "text is empty"),
        (["remember", " \n\t "], b"", "text is empty"),
        (["remember", "-"], b"", "text is empty"),
        (["remember", "-"], b"ok so far \xff\xfe", "standard input is not valid UTF-8"),
        (["remember", "-"], b"x" * (50 * 1024 * 1024), "the limit for one memory is"),
        (["remember", "hi", "--kind", "mood"], b"", "unknown kind 'mood'"),
        (["remember", "hi", "--drawer", " "], b"", "drawer must be"),
    ],
    ids=["empty", "blank", "empty-stdin", "bad-stdin", "50MB-stdin", "kind", "drawer"],
)
def test_invalid_input_exits_2_and_writes_nothing(
    args: list[str],
    stdin: bytes,
    message: str,
    seeded: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = copy_of(seeded, tmp_path)
    before = log_state(home)
    code, out, err = run_main(["--store", str(home), *args], capsys, monkeypatch, stdin)
    assert code == 2
    assert out == ""
    assert message in one_error_line(err)
    assert log_state(home) == before


def test_failures_exit_1_with_one_line(
    seeded: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = copy_of(seeded, tmp_path)
    before = log_state(home)
    for args, message in (
        (["get", "m000000000000deadbeef"], "no record 'm000000000000deadbeef'"),
        (["forget", "m000000000000deadbeef"], "no record"),
        (["--namespace", "other", "get", seeded["first"]["id"]], "in namespace 'other'"),
    ):
        code, out, err = run_main(["--store", str(home), *args], capsys, monkeypatch)
        assert (code, out) == (1, ""), err
        assert message in one_error_line(err)
        assert "(it was never filed in this namespace, or was forgotten: " in err  # a hint
    code, _, err = run_main(["--store", str(tmp_path / "none"), "stats"], capsys, monkeypatch)
    assert code == 1 and "no store at" in one_error_line(err)
    assert log_state(home) == before


class _CtrlC(io.RawIOBase):
    """Standard input that is interrupted (Ctrl-C) while a command reads it."""

    def readable(self) -> bool:
        return True

    def readinto(self, _buffer: Any) -> int:
        raise KeyboardInterrupt


def test_ctrl_c_exits_130_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/cli.md: an abort exits 130 (not 1 or 2), with one error line and no traceback.
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(_CtrlC())))
    with pytest.raises(SystemExit) as exit_info:
        main(["--store", str(tmp_path / "store"), "remember", "-"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 130
    assert out == ""
    assert err.strip() == "error: aborted"
    assert not (tmp_path / "store").exists()


def test_demo_files_the_samples_finds_them_and_runs_again(tmp_path: Path) -> None:
    """``kredenc demo``, the README's main job: each sample query finds its memory first,
    and a second run files nothing twice."""
    home = tmp_path / "demo-store"
    first = ok_json("--store", str(home), "demo")
    steps = {s["step"]: s for s in first["steps"]}
    assert list(steps) == ["open store", "load embedding model", "file sample memories"]
    assert steps["file sample memories"]["detail"].startswith("20 memories")
    assert "queries:" in steps["load embedding model"]["detail"]
    top = {s["query"]: s["hits"][0]["text"] for s in first["searches"]}
    assert "Tuesdays and Thursdays" in top["when do we deploy?"]
    assert "PostgreSQL" in top["which database runs in production"]
    assert "peanuts" in top["food the user cannot eat"]  # by meaning only (dense)
    assert "Pogácsa" in top["Pogácsa"]  # by words only (lexical)
    assert all(len(s["hits"]) == 3 for s in first["searches"] if s["mode"] != "lexical")
    records = first["stats"]["records"]

    again = ok_json("--store", str(home), "demo")
    assert again["steps"][2]["detail"] == "already filed earlier; skipped"
    assert again["stats"]["records"] == records
    assert [s["hits"] for s in again["searches"]] == [s["hits"] for s in first["searches"]]


def test_search_feedback_comes_from_the_store_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kredenc search` runs RM3 feedback when kredenc.toml asks for it, and a bad
    feedback setting is one line on stderr with exit 2."""
    home = tmp_path / "store"
    store = ["--store", str(home)]
    falcons = "peregrine falcons nest on the quarry cliff ledge too"
    texts = (
        "the kestrel hovers over the cliff before it dives at a vole",
        "a kestrel nests on the cliff ledge above the quarry",
        falcons,
        "the invoice for the quarterly budget review is due",
    )
    for text in texts:
        assert run_main([*store, "remember", text], capsys, monkeypatch)[0] == 0

    def found() -> set[str]:
        code, out, err = run_main(
            [*store, "search", "kestrel", "--mode", "lexical", "--json"], capsys, monkeypatch
        )
        assert code == 0, err
        return {h["text"] for h in json.loads(out)["hits"]}

    assert falcons not in found()
    (home / "kredenc.toml").write_text('feedback = "rm3"\nfeedback_docs = 2\n')
    assert falcons in found()
    (home / "kredenc.toml").write_text('feedback = "rm9"\n')
    code, _, err = run_main([*store, "search", "kestrel"], capsys, monkeypatch)
    assert code == 2 and "feedback" in err and len(err.strip().splitlines()) == 1
