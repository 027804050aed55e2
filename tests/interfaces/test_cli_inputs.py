"""Hostile and careless input at the command line (issue 13, findings 3, 8 and 9).

In-process through ``main()`` with the test embedder (no model loads), as in
the shared ``run`` fixture of conftest.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kredenc.interfaces.terminal import escape, json_text, one_line

CANARY = "canary-7d3c"


def _fold(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text(f"root:x:0:0 {CANARY}\n", encoding="utf-8")
    (outside / "shadow").write_text(f"root:{CANARY}:19000\n", encoding="utf-8")
    fold = tmp_path / "fold"
    (fold / "sub").mkdir(parents=True)
    (fold / "notes.md").write_text("# Notes\n\nThe kestrel nests.\n", encoding="utf-8")
    (fold / "passwd.txt").symlink_to(outside / "passwd")
    (fold / "sub" / "shadow.md").symlink_to(outside / "shadow")
    return fold


def test_ingest_reports_symlinks_out_of_the_folder(run: Any, tmp_path: Path) -> None:
    fold = _fold(tmp_path)
    code, out, _ = run("ingest", str(fold))
    assert code == 0
    assert "1 document filed" in out and "2 skipped" in out
    assert f"  skipped: {fold / 'passwd.txt'}: symlink leaves the folder" in out
    assert f"  skipped: {fold / 'sub' / 'shadow.md'}: symlink leaves the folder" in out
    code, out, _ = run("search", CANARY, "--mode", "lexical", "--json")
    assert json.loads(out)["hits"] == []
    code, out, _ = run("ingest", str(fold), "--follow-symlinks", "--json")
    data = json.loads(out)
    assert (code, data["documents"], data["skipped"]) == (0, 2, [])  # passwd.txt, sub/shadow.md
    code, out, _ = run("search", CANARY, "--mode", "lexical", "--json")
    assert len(json.loads(out)["hits"]) == 2


def test_ingest_json_lists_skipped_files(run: Any, tmp_path: Path) -> None:
    fold = _fold(tmp_path)
    code, out, err = run("ingest", str(fold), "--json")
    assert code == 0, err
    skipped = json.loads(out)["skipped"]
    assert skipped == [
        {"source": str(fold / "passwd.txt"), "reason": "symlink leaves the folder"},
        {"source": str(fold / "sub" / "shadow.md"), "reason": "symlink leaves the folder"},
    ]


# -- control characters never reach the terminal raw; JSON stays JSON -----------------

HOSTILE = "ring\x07bell \x1b[2J\x1b[31mred\x9b1m \u202eevil\x7f done"
RAW = ("\x07", "\x1b", "\x9b", "\u202e", "\x7f")


def _clean(text: str) -> bool:
    return not any(c in text for c in RAW)


def test_human_output_escapes_control_characters(run: Any) -> None:
    code, out, err = run("remember", HOSTILE, "--tags", "t", "--json")
    assert code == 0, err
    mem = json.loads(out)
    assert mem["text"] == HOSTILE  # JSON carries the text exactly
    assert _clean(out)  # ... with every control character as an escape
    code, out, _ = run("get", mem["id"])
    assert code == 0 and _clean(out)
    # (click drops whole ANSI sequences itself when the output is not a terminal)
    assert "ring\\x07bell" in out and "red\\x9b1m \\u202eevil\\x7f" in out
    code, out, _ = run("get", mem["id"], "--json")
    assert _clean(out) and json.loads(out)["text"] == HOSTILE
    code, out, _ = run("search", "ring bell", "--mode", "lexical")
    assert code == 0 and "ring\\x07bell" in out and _clean(out)
    code, out, _ = run("search", "ring bell", "--mode", "lexical", "--json")
    assert json.loads(out)["hits"][0]["text"] == HOSTILE and _clean(out)


def test_error_lines_escape_control_characters(run: Any, tmp_path: Path) -> None:
    run("init")
    code, out, err = run("get", "m\x1b[2Jx")
    assert code == 1 and out == ""
    assert err.startswith("error: ") and _clean(err) and "\\x1b[2J" in err
    code, out, err = run("ingest", str(tmp_path / "gone\x07.md"))
    assert code == 1 and _clean(out) and _clean(err)
    assert "gone\\x07.md" in out


def test_escape_and_json_text() -> None:
    assert escape(HOSTILE) == ("ring\\x07bell \\x1b[2J\\x1b[31mred\\x9b1m \\u202eevil\\x7f done")
    assert escape("tab\tand\nnewline stay") == "tab\tand\nnewline stay"
    assert one_line("new\nline\t.md\x07") == "new\\nline\\t.md\\x07"  # a path in a line
    line = json_text({"t": HOSTILE})
    assert _clean(line) and json.loads(line) == {"t": HOSTILE}


# -- secrets in URLs are never echoed; hints name real settings ---------------------


def test_url_credentials_are_not_echoed(run: Any) -> None:
    url = "http://alice:hunter2@127.0.0.1:9/private"
    code, out, err = run("ingest", url)
    assert code == 1
    assert "hunter2" not in out + err and "alice" not in out + err
    assert "http://***@127.0.0.1:9/private" in out
    code, out, err = run("ingest", url, "--json")
    assert "hunter2" not in out + err
    failed = json.loads(out)["failed"]
    assert failed[0]["source"] == "http://***@127.0.0.1:9/private"


def test_fetch_refusal_hint_names_real_settings(run: Any) -> None:
    from kredenc.config import Settings

    _, out, _ = run("ingest", "http://127.0.0.1:9/x", "--json")
    error = json.loads(out)["failed"][0]["error"]
    named = set(re.findall(r"\b(fetch_[a-z_]+)", error))
    assert named and named <= set(Settings.model_fields), error
    assert "allow_hosts for" not in error


# -- a bad setting in the environment is a usage error, not an internal one ---------


def test_bad_settings_in_the_environment_are_one_line_exit_2(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run("init")[0] == 0
    for env, value, command in (
        ("KREDENC_FETCH_ALLOW_HOSTS", "wiki.internal", "stats"),
        ("KREDENC_SCHEDULER_INTERVALS", "garbage", "stats"),
        ("KREDENC_LOCK_TTL_S", "inf", "rebuild"),
        ("KREDENC_REDIS_URL", "redis://:hunter2@127.0.0.1:notaport/0", "rebuild"),
        ("KREDENC_OPCACHE_REDIS_URL", "redis://127.0.0.1:6379/abc", "stats"),
        ("KREDENC_JOBS_REDIS_URL", "redis:///", "worker"),
    ):
        with monkeypatch.context() as m:
            m.setenv(env, value)
            code, out, err = run(command)
        assert code == 2, err
        assert out == "" and len(err.splitlines()) == 1, err
        assert err.startswith("error: invalid setting ") and "internal error" not in err
        assert env.removeprefix("KREDENC_").lower() in err and "hunter2" not in err


# -- the ingest summary: empty files skipped, every path on one line -----------------


def test_ingest_summary_skips_empty_files_and_prints_each_path_on_one_line(
    run: Any, tmp_path: Path
) -> None:
    fold = tmp_path / "x"
    fold.mkdir()
    (fold / "empty.md").write_text("")
    (fold / "new\nline.md").write_text("# Split\n\nThe kestrel nests.\n")
    (fold / "tab\tbad\x1b.txt").write_bytes(b"\x00\xff\xfe binary")
    code, out, err = run("ingest", str(fold))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("1 document filed (1 chunk), 0 unchanged, 1 failed, 1 skipped")
    assert f"  filed: {fold}/new\\nline.md (1 chunk)" in lines
    assert f"  skipped: {fold}/empty.md: empty file" in lines
    assert any(line.startswith(f"  failed: {fold}/tab\\tbad\\x1b.txt: ") for line in lines), out
    assert len(lines) == 4, out  # the counts, then one line a file (no symlink hint)


@pytest.mark.parametrize("name", ["", " ", "a b/c", "x" * 65, "tab\there"])
def test_a_worker_name_redis_cannot_take_is_a_usage_error(run: Any, name: str) -> None:
    """'--name ""' silently took the default and 'a b/c' printed Redis's raw
    'CLIENT SETNAME' warning: a name is letters, digits and . _ : - (1-64)."""
    code, out, err = run("worker", "--burst", "--name", name)
    assert code == 2 and out == "", err
    assert "--name" in err and len(err.splitlines()) == 1, err
