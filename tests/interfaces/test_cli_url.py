"""The CLI over ``--url``: the same commands, the same output, through a running server.

One real server (uvicorn on loopback) holds a real store for the module; the CLI runs
in-process through ``main()``, with the test embedder at the provider seam on both
sides. Read commands also run locally beside the server (a read-only open), so the
remote output is compared with the local output of the same store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.interfaces.cli import main
from kredenc.interfaces.server import advert
from kredenc.interfaces.server.run import ServerThread
from kredenc.testing.embedders import HashEmbedder


class Served:
    def __init__(self, kb: Kredenc, url: str) -> None:
        self.kb = kb
        self.url = url
        self.home = kb.home


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("kredenc.engine.make_default_embedder", lambda _s: HashEmbedder())
        for key in ("KREDENC_HOME", "KREDENC_NAMESPACE", "KREDENC_URL", "KREDENC_API_KEY"):
            mp.delenv(key, raising=False)
        mp.setenv("KREDENC_DURABILITY", "none")
        kb = Kredenc.open(tmp_path_factory.mktemp("url") / "store", embedder=HashEmbedder())
        kb.remember("Deploys happen on Tuesdays and Thursdays", kind="fact", tags=["process"])
        kb.remember("The production database is PostgreSQL 15", kind="fact")
        try:
            with ServerThread(kb) as url:
                yield Served(kb, url)
        finally:
            kb.close()


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def both(s: Served, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[Any, Any]:
    """``args`` with ``--json`` locally (read-only beside the server) and over --url."""
    code, local, err = run(capsys, "--store", str(s.home), *args, "--json")
    assert (code, err) == (0, "")
    code, remote, err = run(capsys, "--url", s.url, *args, "--json")
    assert (code, err) == (0, "")
    return json.loads(local), json.loads(remote)


def test_remember_over_url_then_get_prints_the_same(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "--url", served.url, "remember", "Anna owns billing", "--kind", "fact",
        "--tags", "team", "--importance", "0.8", "--json",
    )  # fmt: skip
    assert (code, err) == (0, "")
    mem = json.loads(out)
    assert (mem["text"], mem["importance"], mem["tags"]) == ("Anna owns billing", 0.8, ["team"])
    assert served.kb.get(mem["id"]).text == "Anna owns billing"
    local, remote = both(served, capsys, "get", mem["id"])
    assert local == remote
    local, remote = both(served, capsys, "history", mem["id"])
    assert local == remote and remote["items"][0]["text"] == "Anna owns billing"
    # The human form too, after the command name or before it.
    code, out, _err = run(capsys, "get", mem["id"], "--url", served.url)
    assert code == 0 and out.startswith(f"{mem['id']} [fact] Anna owns billing")


def test_search_and_list_print_what_the_local_form_prints(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    local, remote = both(served, capsys, "search", "when do deploys happen", "-k", "3")
    assert local == remote
    assert remote["hits"][0]["text"].startswith("Deploys happen")
    local, remote = both(served, capsys, "list", "memories", "--kind", "fact", "--limit", "2")
    assert local == remote and len(remote["memories"]) == 2
    code, human_local, _ = run(capsys, "--store", str(served.home), "search", "database")
    code2, human_remote, _ = run(capsys, "--url", served.url, "search", "database")
    assert (code, code2) == (0, 0)
    assert human_local == human_remote


def test_stats_over_url(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    local, remote = both(served, capsys, "stats")
    assert (remote["namespace"], remote["store"]) == (local["namespace"], local["store"])
    assert remote["drawers"] == local["drawers"]


def test_stats_over_url_with_a_key_prints_the_namespaces_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tenant's /stats names no folder and no log size: the human form prints what
    it has."""
    from kredenc.interfaces.auth import KeyRing

    with Kredenc.open(tmp_path / "store", embedder=HashEmbedder(), durability="none") as kb:
        key, _ = KeyRing(kb.home).add("alpha")
        kb.scoped("alpha").remember("Alpha keeps the notes", kind="fact")
        with ServerThread(kb) as url:
            code, out, err = run(capsys, "--url", url, "--api-key", key, "stats")
    assert (code, err) == (0, "")
    assert out.startswith("namespace alpha  model ") and str(tmp_path) not in out
    assert "memories" in out and "log:" not in out


def test_ask_over_url_answers_and_files_the_session(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "--url", served.url, "ask", "when do deploys happen?", "--session", "u1", "--json"
    )
    assert (code, err) == (0, "")
    answer = json.loads(out)
    expected = served.kb.ask("when do deploys happen?").to_json()
    assert answer["text"] == expected["text"]
    assert [c["id"] for c in answer["citations"]] == [c["id"] for c in expected["citations"]]
    code, out, _err = run(capsys, "--url", served.url, "session", "show", "u1")
    assert code == 0
    assert out.splitlines()[0] == "user: when do deploys happen?"
    code, out, _err = run(capsys, "--url", served.url, "ask", "x", "--max-iterations", "2")
    assert code == 2 and "max_iterations" in out + _err


def test_a_command_without_a_remote_form_is_refused(
    served: Served, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for args in (["--url", served.url, "rebuild"], ["compact", "--url", served.url]):
        code, out, err = run(capsys, *args)
        assert code == 2 and out == ""
        (line,) = err.splitlines()
        assert line.startswith("error: 'kredenc ") and "local store only" in line
    monkeypatch.setenv("KREDENC_URL", served.url)
    code, _out, err = run(capsys, "keys", "list")
    assert code == 2 and "KREDENC_URL" in err


def test_a_server_that_cannot_be_reached_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--url", "http://127.0.0.1:9", "stats")
    assert code == 1 and out == ""
    (line,) = err.splitlines()
    assert "cannot reach the kredenc server at http://127.0.0.1:9" in line


def test_a_held_store_goes_through_the_advertised_server(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    advert.write(served.home, served.url)  # this process holds the store's lock
    try:
        code, out, err = run(capsys, "--store", str(served.home), "remember", "Routed by itself")
        assert code == 0
        assert err.splitlines() == [f"using the running server at {served.url}"]
        assert served.kb.get(out.split()[0]).text == "Routed by itself"
        code, out, err = run(capsys, "--store", str(served.home), "rebuild")
        assert code == 1 and out == ""
        (line,) = err.splitlines()
        assert f"held by the running server at {served.url}" in line
        assert "--url" in line
    finally:
        advert.remove(served.home)
    assert not (served.home / advert.FILE).exists()


def test_a_stale_advertisement_is_ignored(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = {"url": served.url, "pid": int(gone.stdout), "started_at": 0.0}
    (served.home / advert.FILE).write_text(json.dumps(stale), encoding="utf-8")
    try:
        assert advert.read(served.home) is None
        code, out, err = run(capsys, "--store", str(served.home), "remember", "Not routed")
        assert code == 1 and out == ""
        (line,) = err.splitlines()
        assert f"store is locked by pid {os.getpid()}" in line
        assert "using the running server" not in err
    finally:
        (served.home / advert.FILE).unlink()


def test_the_advertisement_is_private_and_names_its_process(tmp_path: Path) -> None:
    (tmp_path / "lock").write_text(f"{os.getpid()}\n", encoding="ascii")
    path = advert.write(tmp_path, "http://127.0.0.1:8765")
    assert path.stat().st_mode & 0o777 == 0o600
    found = advert.read(tmp_path)
    assert found is not None and (found.url, found.pid) == ("http://127.0.0.1:8765", os.getpid())
    (tmp_path / "lock").write_text("1\n", encoding="ascii")  # another process holds it
    assert advert.read(tmp_path) is None
    advert.remove(tmp_path)
    assert not path.exists()


def test_the_other_remote_commands_over_url(
    served: Served, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = served.url

    def ok(*args: str) -> Any:
        code, out, err = run(capsys, "--url", url, *args, "--json")
        assert (code, err) == (0, ""), (args, err)
        return json.loads(out) if out.strip() else None

    note = tmp_path / "kestrels.md"
    note.write_text("# Kestrels\n\nThe kestrel nests on the old water tower.\n", "utf-8")
    ingested = ok("ingest", str(note))
    assert (ingested["documents"], ingested["failed"]) == (1, [])
    local, remote = both(served, capsys, "list", "documents")
    assert local == remote and len(remote["documents"]) == 1
    local, remote = both(served, capsys, "graph", "kestrel water tower", "--hops", "1")
    # The server counts the nodes as recalled (a read-only local handle does not), so
    # only their order and edges must agree, not scores that recency moves.
    assert [n["id"] for n in remote["nodes"]] == [n["id"] for n in local["nodes"]]
    assert remote["edges"] == local["edges"]
    local, remote = both(served, capsys, "recall", "which database runs in production")
    assert [i["id"] for i in remote["items"]] == [i["id"] for i in local["items"]]
    assert remote["budget"] == local["budget"]
    a = ok("remember", "Kestrels eat voles", "--kind", "fact")
    b = ok("remember", "Voles live in meadows", "--kind", "fact")
    assert ok("score", a["id"], "--importance", "0.9")["importance"] == 0.9
    assert ok("relate", a["id"], b["id"], "depends_on")["rel"] == "depends_on"
    assert served.kb.context_graph("kestrels voles", hops=1).edges
    assert ok("forget", b["id"]) == {"id": b["id"], "forgotten": True}
    assert [r["job"] for r in ok("jobs", "run", "decay")["jobs"]] == ["decay"]
    assert ok("check")["sound"] is True
    ok("ask", "what do kestrels eat?", "--session", "u2")
    assert ok("session", "clear", "u2") == {"session": "u2", "forgotten": 2}
    assert "u2" not in {x["session"] for x in ok("list", "sessions")["sessions"]}
    code, exported, err = run(capsys, "--url", url, "export")
    assert code == 0 and err == ""
    dump = tmp_path / "dump.jsonl"
    dump.write_text(exported, "utf-8")
    report = ok("import", str(dump), "--skip-existing")
    records = [json.loads(line) for line in exported.splitlines()[1:]]
    assert report["records"] == 0
    assert report["skipped"] == sum(1 for r in records if r.get("op") != "edge")


def test_a_namespace_the_server_does_not_serve_is_refused(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--url", served.url, "-n", "other", "search", "deploys")
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert "serves namespace 'default' to this key, not 'other'" in line
    code, out, err = run(capsys, "--url", served.url, "-n", "default", "stats", "--json")
    assert code == 0 and json.loads(out)["namespace"] == "default"
    code, out, err = run(capsys, "--url", served.url, "export", "-n", "other")
    assert code == 2 and "key's namespace only" in err


def test_ask_streams_over_url_to_the_same_text(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    question = "which database runs in production?"
    code, plain, err = run(capsys, "--url", served.url, "ask", question)
    assert (code, err) == (0, "")
    code, streamed, err = run(capsys, "--url", served.url, "ask", question, "--stream")
    assert (code, err) == (0, "")
    assert streamed == plain
    assert "PostgreSQL" in plain.splitlines()[0]
    assert plain.splitlines()[-1].startswith("confidence")
