"""Store upkeep on the command line (issue 13, findings 7 and 4), real processes.

Read commands never change a byte under the store, intact or damaged; every hint an
error gives names a command that, run as printed, works.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc

from .test_cli import kredenc, one_error_line

CANARY = "zebracanary the vault code is 8812"


def _tree(home: Path) -> dict[str, str]:
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file()
    }


def _hint_command(error_line: str) -> list[str]:
    found = re.search(r"'kredenc (.+?)'", error_line)
    assert found, error_line
    return shlex.split(found.group(1))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store filed with the real embedder, and a copy whose log is damaged in the
    middle (a flipped byte) and torn at the end."""
    root = tmp_path_factory.mktemp("cli_store")
    home = root / "intact"
    with Kredenc.open(home) as kb:
        ids = [kb.remember(f"note {i}: the garden has {i} roses").id for i in range(8)]
        kb.relate(ids[0], ids[1], "related_to")
    damaged = root / "damaged"
    shutil.copytree(home, damaged)
    log = damaged / "haystack.log"
    data = bytearray(log.read_bytes())
    offsets = [m.start() for m in re.finditer(b"KRD1", bytes(data))]
    data[offsets[3] + 40] ^= 0xFF
    log.write_bytes(bytes(data[:-10]))
    return {"home": home, "damaged": damaged, "ids": ids, "root": root}


@pytest.mark.parametrize("which", ["home", "damaged"])
def test_read_commands_never_change_the_store(built: dict[str, Any], which: str) -> None:
    home: Path = built[which]
    before = _tree(home)
    runs = {
        "search": kredenc("--store", str(home), "search", "roses"),
        "get": kredenc("--store", str(home), "get", built["ids"][1]),
        "stats": kredenc("--store", str(home), "stats"),
        "graph": kredenc("--store", str(home), "graph", "roses"),
        "recall": kredenc("--store", str(home), "recall", "how many roses?"),
        "check": kredenc("--store", str(home), "check"),
    }
    assert _tree(home) == before
    for name, proc in runs.items():
        assert "Traceback" not in proc.stderr, (name, proc.stderr)
        if name == "check":
            assert proc.returncode == (0 if which == "home" else 1), proc.stdout
        elif which == "home" or proc.returncode != 0:
            # On damage a read works from the index, or (when it must read a damaged
            # record) fails in one line that names the salvage command.
            assert proc.returncode == 0 or "salvage" in proc.stderr.splitlines()[-1], name
            assert proc.returncode == 0 or which == "damaged"
    for name in ("get", "stats"):
        assert runs[name].returncode == 0, (name, runs[name].stderr)


def test_the_salvage_hint_of_a_writer_on_a_damaged_log_works(built: dict[str, Any]) -> None:
    damaged: Path = built["damaged"]
    work = built["root"] / "work"
    shutil.copytree(damaged, work)
    refused = kredenc("--store", str(work), "remember", "one more")
    line = one_error_line(refused.stderr)
    assert refused.returncode == 1 and "byte offset" in line and "salvage" in line
    command = _hint_command(line)
    assert command[2] == "salvage"
    before = _tree(work)
    done = kredenc(*command, "--json")
    assert done.returncode == 0, done.stderr
    assert _tree(work) == before
    dest = Path(command[3])
    ok = kredenc("--store", str(dest), "search", "roses", "--json")
    assert ok.returncode == 0 and built["ids"][7] in ok.stdout  # after the damage
    assert kredenc("--store", str(dest), "check").returncode == 0


@pytest.mark.parametrize("name", ["index.db", "embeddings.db"])
def test_a_garbage_derived_file_is_named_and_rebuild_fixes_it(
    built: dict[str, Any], name: str
) -> None:
    work = built["root"] / f"garbage-{name}"
    shutil.copytree(built["home"], work)
    (work / name).write_bytes(b"not a database at all " * 500)
    proc = kredenc("--store", str(work), "remember", "x")
    line = one_error_line(proc.stderr)
    assert name in line, line
    fixed = kredenc(*_hint_command(line))
    assert fixed.returncode == 0, fixed.stderr
    assert list(work.glob(f"{name}.bad-*"))
    assert "roses" in kredenc("--store", str(work), "search", "roses").stdout
    assert kredenc("--store", str(work), "check").returncode == 0


def test_a_missing_log_is_named_and_init_new_log_works(built: dict[str, Any]) -> None:
    work = built["root"] / "nolog"
    shutil.copytree(built["home"], work)
    (work / "haystack.log").unlink()
    opened = one_error_line(kredenc("--store", str(work), "remember", "x").stderr)
    init = kredenc("--store", str(work), "init")
    init_line = one_error_line(init.stderr)
    assert "missing" in opened and "missing" in init_line and init_line != opened
    assert init.returncode == 1
    for line in (opened, init_line):
        assert "init --new-log" in line
        # a PostgreSQL store made before store.json named its backend looks the same
        assert "KREDENC_BACKEND=postgres" in line
    fresh = kredenc(*_hint_command(opened))
    assert fresh.returncode == 0, fresh.stderr
    assert kredenc("--store", str(work), "remember", "a new start").returncode == 0
    assert kredenc("--store", str(work), "check").returncode == 0


def test_compact_purge_erases_forgotten_text(built: dict[str, Any]) -> None:
    work = built["root"] / "purge"
    shutil.copytree(built["home"], work)
    with Kredenc.open(work) as kb:
        secret = kb.remember(CANARY).id
    assert kredenc("--store", str(work), "forget", secret).returncode == 0
    assert any(b"zebracanary" in p.read_bytes() for p in work.rglob("*") if p.is_file())
    proc = kredenc("--store", str(work), "compact", "--purge", "--json")
    assert proc.returncode == 0, proc.stderr
    assert '"purged": 1' in proc.stdout
    assert not [p for p in work.rglob("*") if p.is_file() and b"zebracanary" in p.read_bytes()]
    assert kredenc("--store", str(work), "check", "--full").returncode == 0


def test_reembed_moves_a_store_to_a_model_folder(tmp_path: Path) -> None:
    """`kredenc reembed --to onnx:PATH` in real processes: the new model opens the
    store, the old is refused with a hint naming reembed, bad specs are one line."""
    from kredenc.testing.tiny_models import build_embedder

    old = build_embedder(tmp_path / "old").path
    new = build_embedder(tmp_path / "new", seed=4, dim=6).path
    home = tmp_path / "s"
    with Kredenc.open(home, embed_provider="onnx", embed_model_path=old) as kb:
        kb.remember_many([{"text": t} for t in ("red boat on the sea", "kestrel and heron")])
    toml = home / "kredenc.toml"
    toml.write_text(f'embed_provider = "onnx"\nembed_model_path = "{old}"\n')
    done = kredenc("--store", str(home), "--json", "reembed", "--to", f"onnx:{new}")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["changed"] and out["dim"] == 6 and out["model"].startswith("onnx:new@")
    refused = kredenc("--store", str(home), "search", "red boat")
    assert refused.returncode != 0
    assert "kredenc reembed" in one_error_line(refused.stderr)
    toml.write_text(f'embed_provider = "onnx"\nembed_model_path = "{new}"\n')
    found = kredenc(
        "--store", str(home), "--json", "search", "red boat on the sea", "--mode", "dense"
    )
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["hits"][0]["text"] == "red boat on the sea"
    again = kredenc("--store", str(home), "reembed")
    assert again.returncode == 0 and "nothing to do" in again.stdout
    for spec, message in (
        ("bogus", "unknown embedder 'bogus'"),
        (f"onnx:{tmp_path}/none", "does not exist"),
    ):
        bad = kredenc("--store", str(home), "reembed", "--to", spec)
        assert bad.returncode == 2 and message in one_error_line(bad.stderr)
