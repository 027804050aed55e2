"""``kredenc list``, ``export`` and ``import`` on the command line (issue 16)."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import CliRun


def _remember(run: CliRun, *args: str) -> str:
    code, out, err = run("remember", *args, "--json")
    assert code == 0, err
    return str(json.loads(out)["id"])


def test_list_memories_text_json_and_paging(run: CliRun) -> None:
    a = _remember(run, "tea in the morning", "--kind", "preference", "--tags", "drink")
    b = _remember(run, "renew the passport", "--kind", "task", "--importance", "0.8")
    code, out, _ = run("list", "memories")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(a) and "preference" in lines[0] and "#drink" in lines[0]
    assert lines[1].startswith(b) and "imp 0.80" in lines[1]
    code, out, _ = run("list", "memories", "--limit", "1", "--json")
    data = json.loads(out)
    assert [m["id"] for m in data["memories"]] == [a]
    assert (data["offset"], data["next_offset"]) == (0, 1)  # the next page's --offset
    code, out, _ = run("list", "memories", "--limit", "1")
    assert "(more may follow: --offset 1)" in out
    code, out, _ = run("list", "memories", "--kind", "task", "--json")
    assert [m["id"] for m in json.loads(out)["memories"]] == [b]
    assert json.loads(out)["next_offset"] is None  # a page not full: nothing follows
    code, out, _ = run("list", "memories", "--tag", "drink", "--offset", "1")
    assert out.strip() == "no memories"
    code, _, err = run("list", "memories", "--kind", "bogus")
    assert code == 2 and "unknown kind 'bogus'" in err


def test_list_documents_sessions_and_get_of_a_chunk(run: CliRun, tmp_path: Path) -> None:
    doc = tmp_path / "owls.md"
    doc.write_text("# Owls\n\nOwls hunt at night and see in the dark.\n", encoding="utf-8")
    code, _, err = run("ingest", str(doc))
    assert code == 0, err
    code, out, _ = run("list", "documents", "--json")
    (entry,) = json.loads(out)["documents"]
    assert entry["origin"].endswith("owls.md") and entry["chunks"] >= 1
    code, out, _ = run("list", "documents", "--source", "*.pdf")
    assert out.strip() == "no documents"
    code, out, _ = run("search", "owls night", "--json")
    chunk = json.loads(out)["hits"][0]["id"]
    code, out, _ = run("get", chunk)
    assert out.startswith(f"{chunk} [chunk] ")  # what it is (it had a memory's "note")
    assert f"from document {entry['id']} (Owls): " in out and "owls.md" in out
    code, out, _ = run("get", chunk, "--json")
    assert json.loads(out)["source_document"]["document"] == entry["id"]
    # A document shows its title, file, loader and chunks (it showed its id alone).
    code, out, _ = run("get", entry["id"])
    assert out.splitlines() == [
        f"{entry['id']} [document]",
        f"Owls: {entry['origin']} (markdown, {entry['chunks']} chunk, version 1)",
    ]
    code, out, _ = run("get", entry["id"], "--json")
    assert json.loads(out)["document"] == entry
    code, out, _ = run("list", "sessions")
    assert out.strip() == "no sessions"


def test_export_import_round_trip(run: CliRun, tmp_path: Path) -> None:
    _remember(run, "the user likes oolong", "--importance", "0.9", "--status", "validated")
    _remember(run, "a note for the team", "-n", "team")
    code, exported, err = run("export")
    assert code == 0, err
    lines = exported.splitlines()
    assert json.loads(lines[0])["namespaces"] == ["default", "team"] and len(lines) == 3
    dump = tmp_path / "store.jsonl"
    dump.write_text(exported, encoding="utf-8")
    other = CliRun(tmp_path / "other", run._capsys)
    code, out, err = other("import", str(dump))
    assert code == 0, err
    assert out.strip() == "imported 2 records and 0 edges into default, team in 1 batch"
    code, again, _ = other("export")
    assert sorted(again.splitlines()) == sorted(lines)
    code, only, _ = other("export", "--namespace", "team")
    assert len(only.splitlines()) == 2
    code, _, err = other("import", str(dump))
    assert code == 2 and "already exist" in err and "--skip-existing" in err
    code, out, _ = other("import", str(dump), "--skip-existing", "--json")
    assert json.loads(out)["skipped"] == 2


def test_import_bad_line_is_one_error_and_writes_nothing(run: CliRun, tmp_path: Path) -> None:
    _remember(run, "something to export")
    code, exported, _ = run("export")
    dump = tmp_path / "bad.jsonl"
    dump.write_text(exported + "{broken\n", encoding="utf-8")
    other = CliRun(tmp_path / "other", run._capsys)
    code, _, err = other("import", str(dump))
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: {dump} line 3 is not JSON (")
    assert not (tmp_path / "other").exists()  # nothing filed: no store left behind
    other("init")
    other("import", str(dump))
    code, out, _ = other("list", "memories", "--json")
    assert json.loads(out)["memories"] == []


def test_import_from_mem0(run: CliRun, tmp_path: Path) -> None:
    data = {
        "results": [
            {
                "id": "f38b689d-6b24-45b7-bced-17fbb4d8bac7",
                "memory": "Travelling to Paris",
                "user_id": "alex",
                "hash": "62bc074f56d1f909f1b4c2b639f56f6a",
                "metadata": None,
                "created_at": "2023-02-25T23:57:00.108347-07:00",
                "updated_at": "2024-07-25T23:57:00.108367-07:00",
            }
        ]
    }
    src = tmp_path / "mem0.json"
    src.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = run("-n", "alex", "import", "--from", "mem0", str(src))
    assert code == 0, err
    assert "imported 1 record " in out
    code, out, _ = run("-n", "alex", "get", "f38b689d-6b24-45b7-bced-17fbb4d8bac7", "--json")
    got = json.loads(out)
    assert got["text"] == "Travelling to Paris" and got["user_id"] == "alex"
    assert "user_id" not in got["meta"]
    src.write_text("[{", encoding="utf-8")
    code, _, err = run("import", "--from", "mem0", str(src))
    assert code == 2 and "is not JSON" in err


def test_export_of_a_namespace_the_store_lacks_is_an_error(run: CliRun) -> None:
    """A mistyped --namespace gave a header and nothing else, exit 0: an empty backup."""
    _remember(run, "something to export")
    code, out, err = run("export", "--namespace", "nosuch")
    assert (code, out) == (1, "")
    assert err == (
        "error: no namespace 'nosuch' in this store (none of its records is live there)"
        " (its namespaces: default)\n"
    )
