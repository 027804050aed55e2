"""``kredenc remember|score|history|relate|graph|jobs run`` in-process through ``main()``.

The store is opened with the test embedder (swapped in at the provider seam) so no
model loads; one subprocess run checks the real entry point with the real model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import kredenc.interfaces.cli_memory  # noqa: F401  (registers the commands)


def ok(run: Any, *args: str) -> Any:
    code, out, err = run(*args, "--json")
    assert code == 0 and err == "", err
    return json.loads(out)


def fails(run: Any, code: int, *args: str) -> str:
    got, out, err = run(*args)
    assert isinstance(err, str)
    assert got == code and out == "", (got, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_remember_with_fields(run: Any) -> None:
    mem = ok(
        run, "remember", "The kestrel nests on the old water tower", "--kind", "fact",
        "--importance", "0.8", "--tags", "a,b", "--episode", "E", "--confidence", "0.7",
        "--valid-from", "2026-01-01T00:00:00Z",
    )  # fmt: skip
    assert {"id", "seq", "offset", "text", "kind"} <= set(mem)
    assert (mem["kind"], mem["importance"], mem["confidence"]) == ("fact", 0.8, 0.7)
    assert (mem["tags"], mem["episode_id"], mem["valid_from"]) == (["a", "b"], "E", 1767225600.0)
    frozen = ok(run, "remember", "a rule", "--read-only", "--status", "validated")
    assert frozen["read_only"] is True and frozen["status"] == "validated"
    assert "importance must be between 0 and 1" in fails(
        run, 2, "remember", "x", "--importance", "1.5"
    )
    assert "Invalid value for '--importance'" in fails(
        run, 2, "remember", "x", "--importance", "hi"
    )


def test_score(run: Any) -> None:
    mem = ok(run, "remember", "a task", "--kind", "task")
    got = ok(run, "score", mem["id"], "--importance", "0.9", "--status", "validated",
             "--task-status", "done", "--reason", "checked")  # fmt: skip
    assert (got["importance"], got["status"], got["task_status"]) == (0.9, "validated", "done")
    assert got["confidence"] == 0.5  # only the fields given change
    code, out, _ = run("score", mem["id"], "--stability", "0.2")
    assert code == 0 and out.strip() == f"{mem['id']}: stability 0.2"
    assert "nothing to change" in fails(run, 2, "score", mem["id"])
    assert "no record 'm-nope'" in fails(run, 1, "score", "m-nope", "--importance", "0.1")
    frozen = ok(run, "remember", "a rule", "--read-only")
    assert "is read-only" in fails(run, 1, "score", frozen["id"], "--importance", "0.1")
    assert "unknown status 'great'" in fails(run, 2, "score", mem["id"], "--status", "great")


def test_history(run: Any) -> None:
    mem = ok(run, "remember", "the kettle is descaled monthly", "--importance", "0.4")
    ok(run, "score", mem["id"], "--importance", "0.7", "--reason", "it furs up")
    got = ok(run, "history", mem["id"])
    assert [e["change"] for e in got["items"]] == ["created", "changed"]
    assert got["items"][1]["fields"] == [{"field": "importance", "old": 0.4, "new": 0.7}]
    code, out, _ = run("history", mem["id"])
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2
    assert lines[0].endswith("created [note] the kettle is descaled monthly")
    assert lines[1].endswith("importance 0.4 -> 0.7  (it furs up)")
    assert (
        ok(run, "history", mem["id"], "--offset", "1", "--limit", "1")["items"] == got["items"][1:]
    )
    assert "no memory 'm-nope'" in fails(run, 1, "history", "m-nope")


def test_relate_and_graph(run: Any) -> None:
    a = ok(run, "remember", "The kestrel nests on the old water tower")["id"]
    b = ok(run, "remember", "Kestrels hunt voles in the field by the tower")["id"]
    assert ok(run, "relate", b, a, "supports", "--weight", "0.5") == {
        "src": b, "dst": a, "rel": "supports", "weight": 0.5, "removed": False
    }  # fmt: skip
    graph = ok(run, "graph", "kestrel water tower", "--hops", "1", "--k", "1", "--budget", "300")
    assert {"query", "nodes", "edges", "prompt"} == set(graph)
    keys = {"id", "type", "kind", "text", "score", "similarity", "importance", "recency", "hop",
            "via"}  # fmt: skip
    assert all(keys <= set(n) for n in graph["nodes"])
    assert {n["id"] for n in graph["nodes"]} == {a, b}
    assert graph["edges"] == [{"src": b, "dst": a, "rel": "supports", "weight": 0.5}]
    assert 0 < len(graph["prompt"]) <= 300 and f"[{b}] supports [{a}]" in graph["prompt"]
    removed = ok(run, "relate", b, a, "supports", "--remove")
    assert removed["removed"] is True
    assert ok(run, "graph", "kestrel", "--hops", "1")["edges"] == []
    assert "unknown relation 'loves'" in fails(run, 2, "relate", a, b, "loves")
    assert "weight must be between 0 and 1" in fails(run, 2, "relate", a, b, "supports",
                                                     "--weight", "3")  # fmt: skip
    assert "no record 'm-nope'" in fails(run, 1, "relate", a, "m-nope", "supports")
    assert "Invalid value for '--hops'" in fails(run, 2, "graph", "x", "--hops", "9")


def test_jobs_run(run: Any) -> None:
    for text in ("Packed the tent.", "Pitched the tent by the lake.", "Took the tent down."):
        ok(run, "remember", text)
    out = ok(run, "jobs", "run")
    assert [j["job"] for j in out["jobs"]] == ["episodes", "contradictions", "reflect", "decay"]
    by_name = {j["job"]: j for j in out["jobs"]}
    assert by_name["episodes"]["changed"] == 3 and by_name["reflect"]["changed"] == 1
    assert {"job", "examined", "changed", "records", "seconds", "details"} == set(by_name["decay"])
    only = ok(run, "jobs", "run", "decay", "reflect")
    assert [j["job"] for j in only["jobs"]] == ["reflect", "decay"]
    assert only["jobs"][0]["changed"] == 0  # reflecting again never duplicates
    code, text, _ = run("jobs", "run", "episodes")
    assert code == 0 and text.startswith("episodes: 0 changed of 3 examined")
    assert "Invalid value for '[JOB]...'" in fails(run, 2, "jobs", "run", "sleep")


STEPS = """
import sys
import kredenc.interfaces.cli_memory
from kredenc.interfaces.cli import main

for args in (
    ["remember", "The pharmacy is open on Sundays", "--kind", "fact"],
    ["remember", "The pharmacy is closed on Sundays", "--importance", "0.9"],
    ["jobs", "run", "contradictions"],
):
    main(["--store", sys.argv[1], "--json", *args])
"""


def test_real_entry_point_with_the_real_model(tmp_path: Path) -> None:
    """One process with the default embedder: the real model finds the candidate pair."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KREDENC_")}
    env.update(KREDENC_EMBED_THREADS="1", KREDENC_DURABILITY="none")
    proc = subprocess.run(
        [sys.executable, "-c", STEPS, str(tmp_path / "store")],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    first, second, jobs = (json.loads(line) for line in proc.stdout.splitlines())
    assert second["importance"] == 0.9
    (report,) = jobs["jobs"]
    assert report["changed"] == 1
    assert report["details"][0]["older"] == first["id"]
    assert report["details"][0]["similarity"] >= 0.8
