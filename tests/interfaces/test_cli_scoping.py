"""``--user-id``, ``--agent-id``, ``--run-id`` on remember, search, recall, graph and list;
``remember --meta key=value``, ``search --tag`` and ``--where key=value``; bad input is
exit 2 with one line."""

from __future__ import annotations

import json

import pytest

from .conftest import CliRun


def _remember(run: CliRun, *args: str) -> str:
    code, out, err = run("remember", *args, "--json")
    assert code == 0, err
    return str(json.loads(out)["id"])


@pytest.fixture
def filed(run: CliRun) -> dict[str, str]:
    return {
        "alex": _remember(
            run, "Alex drinks green tea every morning", "--user-id", "u-alex",
            "--agent-id", "planner", "--run-id", "r1", "--tags", "drinks,morning",
        ),
        "sam": _remember(
            run, "Sam drinks green tea at night", "--user-id", "u-sam", "--tags", "drinks",
        ),
        "shared": _remember(run, "Green tea is grown in Japan"),
    }  # fmt: skip


def _hit_ids(run: CliRun, *args: str) -> list[str]:
    code, out, err = run("search", *args, "--json")
    assert code == 0, err
    return [h["id"] for h in json.loads(out)["hits"]]


def test_remember_shows_and_files_the_ids(run: CliRun) -> None:
    code, out, err = run("remember", "Alex drinks tea", "--user-id", "u-alex", "--run-id", "r1")
    assert code == 0, err
    assert "user u-alex · run r1" in out
    rid = out.split()[0]
    code, out, _ = run("get", rid, "--json")
    data = json.loads(out)
    assert (data["user_id"], data["agent_id"], data["run_id"]) == ("u-alex", None, "r1")
    code, out, _ = run("get", rid)
    assert "user u-alex · run r1" in out.splitlines()[1]
    code, out, _ = run("remember", "nobody's", "--json")
    assert json.loads(out)["user_id"] is None


def test_search_filters_on_the_ids_tags_and_meta(run: CliRun, filed: dict[str, str]) -> None:
    assert set(_hit_ids(run, "green tea")) >= {filed["alex"], filed["sam"], filed["shared"]}
    assert _hit_ids(run, "green tea", "--user-id", "u-sam") == [filed["sam"]]
    assert _hit_ids(run, "green tea", "--agent-id", "planner") == [filed["alex"]]
    assert _hit_ids(run, "green tea", "--run-id", "r1", "--mode", "lexical") == [filed["alex"]]
    assert _hit_ids(run, "green tea", "--user-id", "nobody") == []
    assert _hit_ids(run, "green tea", "--tag", "drinks", "--tag", "morning") == [filed["alex"]]
    assert set(_hit_ids(run, "green tea", "--tag", "drinks")) == {filed["alex"], filed["sam"]}
    code, out, _ = run("search", "green tea", "--user-id", "u-alex")
    assert code == 0 and "user u-alex · agent planner · run r1" in out
    code, out, _ = run("search", "green tea", "--user-id", "u-alex", "--json")
    (hit,) = json.loads(out)["hits"]
    assert (hit["user_id"], hit["agent_id"], hit["run_id"]) == ("u-alex", "planner", "r1")


def test_search_where_reads_json_scalars(run: CliRun, open_meta: None) -> None:
    def found(*wheres: str) -> list[str]:
        args = [a for w in wheres for a in ("--where", w)]
        code, out, err = run("search", "ledger", *args, "--json")
        assert code == 0, err
        return sorted(h["text"] for h in json.loads(out)["hits"])

    assert found("team=blue") == ["ledger one", "ledger two"]
    assert found("priority=1") == ["ledger one"]  # the number 1
    assert found('priority="1"') == ["ledger two"]  # the string "1"
    assert found("urgent=true") == ["ledger one"]
    assert found("team=blue", "urgent=false") == ["ledger two"]
    assert found("note=null") == ["ledger two"]
    assert found("team=red") == []


@pytest.fixture
def open_meta(run: CliRun) -> None:
    """Two memories with meta, filed by ``remember --meta`` (read as --where reads)."""
    one = ("--meta", "team=blue", "--meta", "priority=1", "--meta", "urgent=true")
    _remember(run, "ledger one", *one)
    two = ("--meta", "team=blue", "--meta", 'priority="1"', "--meta", "urgent=false")
    _remember(run, "ledger two", *two, "--meta", "note=null")


def test_remember_meta_is_filed_as_given(run: CliRun) -> None:
    mid = _remember(run, "ledger three", "--meta", "team=green", "--meta", "priority=2")
    code, out, err = run("get", mid, "--json")
    assert code == 0, err
    assert json.loads(out)["meta"] == {"team": "green", "priority": 2}
    code, out, err = run("remember", "ledger four", "--meta", "a=[1]")
    assert code == 2 and out == ""
    assert "--meta a=[1] must be one value" in err


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--where", "team"], "--where 'team' is not key=value"),
        (["--where", "=blue"], "--where '=blue' is not key=value"),
        (["--where", "a=1", "--where", "a=2"], "--where names 'a' twice"),
        (["--where", "a=[1, 2]"], "--where a=[1, 2] must be one value, not a JSON list"),
        (["--where", 'a"b=1'], "quote"),
        (["--user-id", ""], "--user-id must be a non-empty name"),
        (["--agent-id", "a\x07b"], "--agent-id must not contain control characters"),
        (["--tag", ""], "tags must be a list of non-empty strings"),
    ],
)
def test_bad_search_filters_are_usage_errors(
    run: CliRun, filed: dict[str, str], args: list[str], why: str
) -> None:
    code, out, err = run("search", "green tea", *args)
    assert code == 2 and out == ""
    assert why in err and len(err.strip().splitlines()) <= 2 and "Traceback" not in err


@pytest.mark.parametrize("command", ["remember", "recall", "graph"])
def test_a_bad_id_is_a_usage_error_on_every_command(run: CliRun, command: str) -> None:
    code, _, err = run(command, "green tea", "--user-id", "a\nb")
    assert code == 2 and "--user-id must not contain control characters" in err
    code, _, err = run("list", "memories", "--run-id", " ")
    assert code == 2 and "--run-id must be a non-empty name" in err


def test_list_memories_by_ids(run: CliRun, filed: dict[str, str]) -> None:
    code, out, _ = run("list", "memories", "--user-id", "u-alex", "--json")
    assert code == 0 and [m["id"] for m in json.loads(out)["memories"]] == [filed["alex"]]
    code, out, _ = run("list", "memories", "--agent-id", "planner")
    assert code == 0
    (line,) = out.splitlines()
    assert line.startswith(filed["alex"]) and "(user u-alex · agent planner · run r1)" in line
    _, out, _ = run("list", "memories", "--run-id", "r9")
    assert out.strip() == "no memories"


def test_graph_by_ids(run: CliRun, filed: dict[str, str]) -> None:
    code, out, err = run("graph", "green tea", "--user-id", "u-sam", "--json")
    assert code == 0, err
    assert [n["id"] for n in json.loads(out)["nodes"]] == [filed["sam"]]
    code, out, _ = run("graph", "green tea", "--user-id", "u-sam")
    assert "(user u-sam)" in out.splitlines()[0]


def test_recall_by_ids(run: CliRun, filed: dict[str, str]) -> None:
    code, out, err = run("recall", "Which green tea do I drink?", "--user-id", "u-sam", "--json")
    assert code == 0, err
    assert [i["id"] for i in json.loads(out)["items"]] == [filed["sam"]]
    code, out, _ = run("recall", "Which green tea do I drink?", "--json")
    assert {i["id"] for i in json.loads(out)["items"]} >= {filed["alex"], filed["sam"]}
