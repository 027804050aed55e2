"""user_id / agent_id / run_id on memories: filed, read back, listed by, fixed once filed,
and kept by export and import."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.testing.embedders import HashEmbedder


def open_store(home: Path) -> Kredenc:
    return Kredenc.open(home, embedder=HashEmbedder(), durability="none")


def test_remember_files_the_ids_in_the_payload_and_reads_them_back(kb: Kredenc) -> None:
    mem = kb.remember("Alex drinks tea", user_id="u-alex", agent_id="planner", run_id="r1")
    assert (mem.user_id, mem.agent_id, mem.run_id) == ("u-alex", "planner", "r1")
    got = kb.get(mem.id)
    assert (got.user_id, got.agent_id, got.run_id) == ("u-alex", "planner", "r1")
    payload = kb.haystack.read(got.offset)
    assert (payload["user_id"], payload["agent_id"], payload["run_id"]) == (
        "u-alex", "planner", "r1",
    )  # fmt: skip
    plain = kb.remember("no owner")
    assert (plain.user_id, plain.agent_id, plain.run_id) == (None, None, None)
    assert not {"user_id", "agent_id", "run_id"} & set(kb.haystack.read(plain.offset))


def test_remember_many_takes_the_ids_per_item(kb: Kredenc) -> None:
    a, b = kb.remember_many(
        [{"text": "one", "user_id": "u1"}, {"text": "two", "agent_id": "bot", "run_id": "r9"}]
    )
    assert (a.user_id, a.agent_id, b.agent_id, b.run_id) == ("u1", None, "bot", "r9")
    with pytest.raises(InvalidInput, match="user_id must not contain control characters"):
        kb.remember_many([{"text": "fine", "user_id": "ok"}, {"text": "bad", "user_id": "a\nb"}])
    assert len(kb.list_memories()) == 2  # the bad batch wrote nothing


def test_bad_ids_write_nothing(kb: Kredenc) -> None:
    seq = kb.haystack.last_seq
    for bad in ("", " ", "x" * 201, "a\x1fb"):
        with pytest.raises(InvalidInput, match="user_id"):
            kb.remember("text", user_id=bad)
    with pytest.raises(InvalidInput, match="run_id"):
        kb.remember("text", run_id=3)
    assert kb.haystack.last_seq == seq


def test_the_ids_are_fixed_once_filed(kb: Kredenc) -> None:
    mem = kb.remember("Alex drinks tea", user_id="u-alex")
    for key in ("user_id", "agent_id", "run_id"):
        with pytest.raises(InvalidInput, match="cannot be changed by score") as err:
            kb.score(mem.id, **{key: "someone else"})
        assert "remember it again" in (err.value.hint or "")
    assert kb.get(mem.id).user_id == "u-alex"


def test_list_memories_filters_on_the_ids_and_tags_in_sql(kb: Kredenc) -> None:
    rows: list[dict[str, Any]] = [
        {"text": "a", "user_id": "u1", "agent_id": "bot", "tags": ["x", "y"]},
        {"text": "b", "user_id": "u2", "agent_id": "bot", "run_id": "r1", "tags": ["x"]},
        {"text": "c", "user_id": "u1", "run_id": "r1"},
        {"text": "d"},
    ]
    ids = [m.id for m in kb.remember_many(rows)]
    kb.scoped("elsewhere").remember("e", user_id="u1", tags=["x"])

    def listed(**filters: object) -> list[int]:
        return [ids.index(m.id) for m in kb.list_memories(**filters)]  # type: ignore[arg-type]

    assert listed(user_id="u1") == [0, 2]
    assert listed(user_id="u1", limit=1, offset=1) == [2]
    assert listed(agent_id="bot") == [0, 1]
    assert listed(run_id="r1") == [1, 2]
    assert listed(user_id="u1", run_id="r1") == [2]
    assert listed(tags=["x"]) == [0, 1]
    assert listed(tags=["x", "y"]) == [0]
    assert listed(tags=["x"], user_id="u2") == [1]
    assert listed(user_id="nobody") == []
    kb.forget(ids[0])
    assert listed(user_id="u1") == [2]
    with pytest.raises(InvalidInput, match="user_id must be a non-empty name"):
        kb.list_memories(user_id="")


def test_export_and_import_keep_the_ids(tmp_path: Path) -> None:
    with open_store(tmp_path / "a") as a:
        mem = a.remember("Alex drinks tea", user_id="u-alex", agent_id="planner", run_id="r1")
        a.remember("no owner")
        a.scoped("team").remember("Sam drinks coffee", user_id="u-sam")
        out = io.StringIO()
        a.export(out)
    lines = out.getvalue().splitlines()
    assert sum('"user_id":"u-alex"' in line for line in lines) == 1
    with open_store(tmp_path / "b") as b:
        report = b.import_lines(lines)
        assert report.records == 3 and report.namespaces == ["default", "team"]
        got = b.get(mem.id)
        assert (got.user_id, got.agent_id, got.run_id) == ("u-alex", "planner", "r1")
        assert [m.id for m in b.list_memories(user_id="u-alex")] == [mem.id]
        assert [h.id for h in b.search("tea", user_id="u-alex")] == [mem.id]
        assert [m.text for m in b.scoped("team").list_memories(user_id="u-sam")] == [
            "Sam drinks coffee"
        ]
        again = io.StringIO()
        b.export(again)
    # The second export holds the same records (ids and scope ids included).
    assert sorted(again.getvalue().splitlines()[1:]) == sorted(lines[1:])


def test_an_import_refuses_a_bad_id_naming_its_line(tmp_path: Path) -> None:
    with open_store(tmp_path / "a") as a:
        a.remember("Alex drinks tea", user_id="u-alex")
        out = io.StringIO()
        a.export(out)
    lines = out.getvalue().splitlines()
    lines[1] = lines[1].replace('"user_id":"u-alex"', '"user_id":"u\\u0000alex"')
    with open_store(tmp_path / "b") as b:
        with pytest.raises(InvalidInput, match="input line 2: user_id must not contain control"):
            b.import_lines(lines)
        assert b.haystack.last_seq == 0
