"""``kredenc eval`` in-process: one fresh store per configuration, multihop walks one
hop by default."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.eval import agreement, read_run, write_run
from kredenc.interfaces import cli_eval
from kredenc.testing.embedders import HashEmbedder

from .test_cli import run_main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eval" / "multihop"


@pytest.fixture
def stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every store the eval opens, in order (HashEmbedder: no model is loaded)."""
    opened: list[Path] = []

    @contextmanager
    def fake_store(cache: str) -> Iterator[Kredenc]:
        home = tmp_path / f"store{len(opened)}"
        opened.append(home)
        kb = Kredenc.open(home, "eval", embedder=HashEmbedder(), durability="none")
        try:
            yield kb
        finally:
            kb.close()

    monkeypatch.setattr(cli_eval, "_eval_store", fake_store)
    return opened


def _multihop(*args: str) -> list[str]:
    q, c = FIXTURES / "hotpotqa_questions.json", FIXTURES / "hotpotqa_corpus.json"
    return ["--json", "eval", "multihop", str(q), str(c), *args]


def test_each_configuration_gets_its_own_store(
    stores: list[Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # BM25 statistics span the whole FTS table: a shared store would let the corpora
    # filed for earlier rows shift the scores of later ones.
    argv = _multihop("--mode", "lexical", "--mode", "hybrid", "--hops", "0", "--hops", "1")
    code, out, err = run_main(argv, capsys, monkeypatch)
    assert code == 0, err
    rows = json.loads(out)
    assert [r["config"] for r in rows] == [
        {"mode": "lexical"},
        {"mode": "lexical", "hops": 1},
        {"mode": "hybrid"},
        {"mode": "hybrid", "hops": 1},
    ]
    assert len(stores) == 4 and len(set(stores)) == 4


def test_multihop_walks_one_hop_unless_told(
    stores: list[Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run_main(_multihop("--mode", "lexical"), capsys, monkeypatch)
    assert code == 0, err
    row = json.loads(out)
    assert row["config"] == {"mode": "lexical", "hops": 1}
    code, out, err = run_main(_multihop("--mode", "lexical", "--hops", "0"), capsys, monkeypatch)
    assert code == 0, err
    assert json.loads(out)["config"] == {"mode": "lexical"}


def _judge_file(tmp_path: Path) -> Path:
    rows = [
        {
            "knowledge": "The Oberoi Group is a hotel company with its head office in Delhi.",
            "question": "The Oberoi Group has its head office in what city?",
            "right_answer": "Delhi",
            "hallucinated_answer": "Mumbai, the financial capital of India.",
        },
        {
            "knowledge": "Arthur's Magazine (1844-1846) was an American literary periodical.",
            "question": "When did Arthur's Magazine start?",
            "right_answer": "1844",
            "hallucinated_answer": "It started in 1901 in London.",
        },
    ]
    path = tmp_path / "qa_dev.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_eval_judge_scores_and_writes_the_run(
    stores: list[Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_file = tmp_path / "judge.run.jsonl"
    argv = ["--json", "eval", "judge", str(_judge_file(tmp_path)), "--run", str(run_file)]
    code, out, err = run_main(argv, capsys, monkeypatch)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["dataset"] == "halueval"
    m = summary["metrics"]
    assert m["n"] == 4 and m["hallucinated"] == 2
    assert m["auroc"]["value"] == 1.0 and m["f1"]["value"] == 1.0
    assert set(m["floors"]) == {"auroc_length", "auroc_one_minus_overlap"}
    rows = [json.loads(line) for line in run_file.read_text().splitlines()]
    assert [(r["i"], r["label"], r["hallucination_detected"]) for r in rows] == [
        (0, "right", False),
        (0, "hallucinated", True),
        (1, "right", False),
        (1, "hallucinated", True),
    ]
    code, out, _ = run_main(["eval", "judge", str(_judge_file(tmp_path))], capsys, monkeypatch)
    assert code == 0
    assert "auroc" in out and "floor auroc_length" in out and "[" in out


def test_eval_judge_refuses_an_unknown_format(
    stores: list[Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "x", "docs": []}\n', encoding="utf-8")
    code, _, err = run_main(["eval", "judge", str(bad)], capsys, monkeypatch)
    assert code == 2
    assert "not a judge record" in err
    assert "Traceback" not in err
    assert stores == []  # no store opened, no model loaded


def test_multihop_iterative_runs_each_depth_with_cis_and_its_cost(
    stores: list[Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = _multihop("--iterative", "--hops", "0", "--hops", "2")
    code, out, err = run_main(argv, capsys, monkeypatch)
    assert code == 0, err
    plain, deep = json.loads(out)
    assert plain["config"] == {"mode": "hybrid", "hops": 0, "iterative": True}
    assert deep["config"] == {"mode": "hybrid", "hops": 2, "iterative": True}
    assert plain["timing"]["searches_per_query"] == 1.0  # hops 0: the question alone
    assert deep["timing"]["searches_per_query"] > 1.0  # bridge rounds ran
    lo, hi = deep["metrics"]["ci95"]["recall@5"]
    assert 0.0 <= lo <= deep["metrics"]["recall@5"] <= hi <= 1.0


def _longmemeval(*args: str) -> list[str]:
    path = FIXTURES.parent / "longmemeval.json"
    return ["--json", "eval", "longmemeval", str(path), *args]


def test_longmemeval_pooled_searches_every_question_against_all_sessions(
    stores: list[Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run_main(_longmemeval("--pooled", "--mode", "lexical"), capsys, monkeypatch)
    assert code == 0, err
    row = json.loads(out)
    m = row["metrics"]
    # 8 distinct session ids across the four questions (s_a twice in q1, s_c in q3 and
    # q4); the skipped questions' sessions are in the pool, the questions are not asked.
    assert m["pooled"] is True and m["n_sessions"] == 8 and m["duplicate_sessions"] == 2
    assert m["n_questions"] == 2 and m["skipped_abstention"] == m["skipped_no_target"] == 1
    assert row["timing"]["n_indexed"] == 8 and row["timing"]["n_searches"] == 2
    assert m["recall_any@3"] == 1.0  # lexical finds each question's own answer session
    assert set(m["ci95"]) >= {"recall_any@5", "recall_any@10", "recall_all@5"}
    assert 0.0 <= m["ci95"]["recall_any@5"][0] <= m["recall_any@5"] <= 1.0


def test_longmemeval_pooled_is_session_level(
    stores: list[Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run_main(_longmemeval("--pooled", "--granularity", "turn"), capsys, monkeypatch)
    assert code == 2 and "--pooled is session level" in err and "Traceback" not in err


def test_eval_agree_compares_two_run_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_run(a, {"q1": ["x", "y"], "q2": ["x", "y"]})
    write_run(b, {"q1": ["y", "x"], "q2": ["x", "z"]})
    code, out, err = run_main(["eval", "agree", str(a), str(b), "--json"], capsys, monkeypatch)
    assert code == 0, err
    result = json.loads(out)
    assert (result["same_set"], result["same_order"], result["overlap"]) == (0.5, 0.0, 0.75)
    assert result["differ"] == ["q2"]
    code, out, _ = run_main(["eval", "agree", str(a), str(b), "--k", "1"], capsys, monkeypatch)
    assert code == 0
    assert "sets differ: q1" in out
    code, _, err = run_main(["eval", "agree", str(a), str(tmp_path / "no")], capsys, monkeypatch)
    assert code != 0
    assert "does not exist" in err


@pytest.mark.postgres
def test_eval_beir_on_postgres_uses_a_schema_per_configuration_and_the_file_cache(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    postgres_dsn: str,
) -> None:
    from kredenc import engine
    from kredenc.storage.postgres import migrate

    monkeypatch.setattr(engine, "make_default_embedder", lambda settings: HashEmbedder())
    beir = FIXTURES.parent / "beir"
    cache = tmp_path / "cache.db"
    runs = {}
    for backend in ("sqlite", "postgres"):
        argv = ["eval", "beir", str(beir), "--backend", backend, "--cache", str(cache)]
        argv += [
            "--mode",
            "lexical",
            "--mode",
            "dense",
            "--run",
            str(tmp_path / f"{backend}.jsonl"),
        ]
        if backend == "postgres":
            argv += ["--postgres-dsn", postgres_dsn]
        code, out, err = run_main([*argv, "--json"], capsys, monkeypatch)
        assert code == 0, err
        runs[backend] = json.loads(out)
        assert postgres_dsn not in out + err  # a secret
    assert [s["metrics"] for s in runs["sqlite"]] == [s["metrics"] for s in runs["postgres"]]
    for mode in ("lexical", "dense"):
        same = agreement(
            read_run(tmp_path / f"sqlite.{mode}.jsonl"),
            read_run(tmp_path / f"postgres.{mode}.jsonl"),
        )
        assert same["same_order"] == 1.0, mode
    with sqlite3.connect(cache) as conn:
        cached = conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    assert cached > 0
    with migrate.connect(postgres_dsn, "public") as conn:
        left = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'eval\\_%'"
        ).fetchall()
    assert left == []  # each configuration's schema is dropped after it


# -- bad dataset files: one line naming the file, exit 2, nothing on stdout ----------

LATIN = b'{"question": "caf\xe9"}\n'  # Latin-1, not UTF-8: the bad byte is at offset 17


def _eval_argv(command: str, path: Path, tmp_path: Path) -> list[str]:
    """``kredenc eval COMMAND`` with ``path`` as the dataset file (or folder) it reads."""
    if command == "beir":
        return ["eval", "beir", str(path)]
    if command == "multihop":
        corpus = FIXTURES / "hotpotqa_corpus.json"
        return ["eval", "multihop", str(path), str(corpus)]
    if command == "answer":
        (tmp_path / "docs").mkdir(exist_ok=True)
        return ["eval", "answer", str(path), "--docs", str(tmp_path / "docs")]
    if command == "agree":
        other = tmp_path / "other.jsonl"
        other.write_text('{"qid": "a", "ranked": ["1"]}\n', encoding="utf-8")
        return ["eval", "agree", str(path), str(other)]
    return ["eval", command, str(path)]


def _beir_folder(tmp_path: Path, **files: bytes) -> Path:
    """The BEIR fixture copied, with ``files`` (name: bytes) put in its place."""
    import shutil

    root = tmp_path / "beir"
    shutil.copytree(FIXTURES.parent / "beir", root)
    for name, data in files.items():
        (root / name.replace("__", "/")).write_bytes(data)
    return root


def _assert_one_line(code: int, out: str, err: str, *needles: str) -> None:
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert "internal error" not in err and "Traceback" not in err
    for needle in needles:
        assert needle in err, err


@pytest.mark.parametrize(
    "command", ["judge", "locomo", "multihop", "longmemeval", "answer", "agree", "beir"]
)
def test_a_dataset_that_is_not_utf8_is_one_line_naming_the_byte(
    command: str,
    stores: list[Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes(LATIN)
    shown = path
    if command == "beir":
        path = _beir_folder(tmp_path, **{"queries.jsonl": LATIN})
        shown = path / "queries.jsonl"
    code, out, err = run_main(_eval_argv(command, path, tmp_path), capsys, monkeypatch)
    _assert_one_line(code, out, err, f"{shown}: not UTF-8 (at byte 17)")
    assert stores == []  # the file fails before a store is opened


def test_a_gzipped_dataset_that_is_not_utf8_is_one_line(
    stores: list[Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gzip

    path = tmp_path / "latin.json.gz"
    path.write_bytes(gzip.compress(b'[{"question": "caf\xe9"}]'))
    code, out, err = run_main(["eval", "locomo", str(path)], capsys, monkeypatch)
    _assert_one_line(code, out, err, f"{path}: not UTF-8 (at byte 18")


@pytest.mark.parametrize("command", ["beir", "multihop", "locomo", "longmemeval", "judge"])
def test_a_missing_dataset_is_bad_input_naming_the_file(
    command: str,
    stores: list[Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nope = tmp_path / "nope"
    code, out, err = run_main(_eval_argv(command, nope, tmp_path), capsys, monkeypatch)
    _assert_one_line(code, out, err, str(nope))


def test_a_dataset_that_is_not_gzip_is_one_line_naming_it(
    stores: list[Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = tmp_path / "fake.json.gz"
    fake.write_bytes(b"not gzip at all\n")
    code, out, err = run_main(["eval", "longmemeval", str(fake)], capsys, monkeypatch)
    _assert_one_line(code, out, err, f"{fake}: not a gzip file")


@pytest.mark.parametrize(
    ("command", "content", "what"),
    [
        ("multihop", b"[]", "holds no questions"),
        ("locomo", b"[]", "holds no questions"),
        ("longmemeval", b"[]", "holds no questions"),
        ("agree", b"", "holds no queries"),
        ("answer", b"\n", "holds no cases"),
    ],
)
def test_a_dataset_with_nothing_to_ask_is_bad_input(
    command: str,
    content: bytes,
    what: str,
    stores: list[Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "empty.json"
    path.write_bytes(content)
    code, out, err = run_main(_eval_argv(command, path, tmp_path), capsys, monkeypatch)
    _assert_one_line(code, out, err, f"{path} {what}")
    assert stores == []


@pytest.mark.parametrize(
    ("name", "what"),
    [("corpus.jsonl", "holds no documents"), ("queries.jsonl", "holds no queries")],
)
def test_a_beir_folder_with_an_empty_file_is_bad_input(
    name: str,
    what: str,
    stores: list[Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = _beir_folder(tmp_path, **{name: b""})
    code, out, err = run_main(["eval", "beir", str(root)], capsys, monkeypatch)
    _assert_one_line(code, out, err, f"{root / name} {what}")
    assert stores == []


def test_eval_answer_with_no_docs_folder_prints_nothing_on_stdout(
    stores: list[Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = run_main(
        ["eval", "answer", "--docs", str(tmp_path / "nope")], capsys, monkeypatch
    )
    _assert_one_line(code, out, err, str(tmp_path / "nope"))
    assert stores == []
