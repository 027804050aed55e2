"""Walking folders for ingest: symlinks that lead out of the folder are not followed.

The attack (issue 13, finding 3): ``kredenc ingest hostile/fold`` filed ``passwd.txt``
and ``sub/shadow.md``, symlinks to files outside the folder, and made their text
searchable. Each such file is skipped and reported; ``follow_symlinks`` opts in.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import OpenStore
from kredenc.ingest.loaders.notion import NotionLoader
from kredenc.ingest.sources import DANGLING, LEAVES_FOLDER, iter_sources, symlink_policy

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ingest"
NOTION = FIXTURES / "notion_export"
CANARY = "canary-password-hash-5f1e"


def _tree(root: Path) -> None:
    for rel in [
        "a.md",
        "b.txt",
        "c.pdf",
        "skip.pptx",
        ".hidden.md",
        ".git/config.md",
        "sub/d.jsonl",
        "sub/deeper/e.md",
        "drafts/f.md",
    ]:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x", encoding="utf-8")


def test_iter_sources_walks_folders_in_order(tmp_path: Path) -> None:
    _tree(tmp_path)
    found = [Path(s).relative_to(tmp_path).as_posix() for s in iter_sources([tmp_path])]
    assert found == ["a.md", "b.txt", "c.pdf", "drafts/f.md", "sub/d.jsonl", "sub/deeper/e.md"]


def test_iter_sources_include_and_exclude(tmp_path: Path) -> None:
    _tree(tmp_path)

    def rel(include: list[str] | None, exclude: list[str] | None) -> list[str]:
        found = iter_sources([str(tmp_path)], include=include, exclude=exclude)
        return [Path(s).relative_to(tmp_path).as_posix() for s in found]

    assert rel(["*.md"], None) == ["a.md", "drafts/f.md", "sub/deeper/e.md"]
    assert rel(["sub/*"], None) == ["sub/d.jsonl", "sub/deeper/e.md"]
    assert rel(None, ["drafts", "*.pdf"]) == ["a.md", "b.txt", "sub/d.jsonl", "sub/deeper/e.md"]
    assert rel(["*.md"], ["sub/deeper"]) == ["a.md", "drafts/f.md"]


def test_iter_sources_keeps_named_files_urls_and_notion_exports_whole(tmp_path: Path) -> None:
    explicit = tmp_path / "slides.pptx"
    explicit.write_bytes(b"PK")
    export = FIXTURES / "notion_export"
    sources = list(
        iter_sources([explicit, "https://example.com/post", FIXTURES, str(explicit), export])
    )
    assert sources[:2] == [str(explicit.resolve()), "https://example.com/post"]
    # The walk of the fixtures folder yields the export as one source, not its pages.
    assert str(export.resolve()) in sources
    assert not any("Acme Wiki" in s for s in sources)
    assert str((FIXTURES / "markdown" / "changelog.md").resolve()) in sources
    assert len(sources) == len(set(sources))


def _hostile(tmp_path: Path) -> tuple[Path, Path]:
    """``fold/`` with a note, a link inside it, and two links to ``outside/``."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text(f"root:x:0:0 {CANARY} passwd\n", encoding="utf-8")
    (outside / "shadow").write_text(f"root:{CANARY} shadow\n", encoding="utf-8")
    (outside / "dir").mkdir()
    (outside / "dir" / "leak.md").write_text(f"{CANARY} in a folder\n", encoding="utf-8")
    fold = tmp_path / "fold"
    (fold / "sub").mkdir(parents=True)
    (fold / "notes.md").write_text("# Notes\n\nThe kestrel nests on the tower.\n", "utf-8")
    (fold / "sub" / "real.md").write_text("# Real\n\nA real page.\n", encoding="utf-8")
    (fold / "passwd.txt").symlink_to(outside / "passwd")
    (fold / "sub" / "shadow.md").symlink_to(outside / "shadow")
    (fold / "alias.md").symlink_to(fold / "sub" / "real.md")  # stays inside: fine
    (fold / "linked").symlink_to(outside / "dir", target_is_directory=True)
    return fold, outside


def test_walk_skips_and_reports_symlinks_that_leave_the_folder(tmp_path: Path) -> None:
    fold, _ = _hostile(tmp_path)
    skipped: list[tuple[str, str]] = []
    with symlink_policy(on_skip=lambda source, why: skipped.append((source, why))):
        found = [Path(s).relative_to(fold).as_posix() for s in iter_sources([fold])]
    assert found == ["alias.md", "notes.md"]  # alias.md is sub/real.md: one source
    assert sorted((Path(s).relative_to(fold).as_posix(), w) for s, w in skipped) == [
        ("linked", LEAVES_FOLDER),
        ("passwd.txt", LEAVES_FOLDER),
        ("sub/shadow.md", LEAVES_FOLDER),
    ]
    assert LEAVES_FOLDER == "symlink leaves the folder"


def test_follow_symlinks_opts_in(tmp_path: Path) -> None:
    fold, _ = _hostile(tmp_path)
    skipped: list[tuple[str, str]] = []
    with symlink_policy(follow=True, on_skip=lambda s, w: skipped.append((s, w))):
        found = [Path(s).relative_to(fold).as_posix() for s in iter_sources([fold])]
    assert found == [
        "alias.md",
        "notes.md",
        "passwd.txt",
        "linked/leak.md",
        "sub/shadow.md",
    ]
    assert skipped == []


def test_follow_symlinks_survives_a_loop(tmp_path: Path) -> None:
    fold = tmp_path / "fold"
    (fold / "a").mkdir(parents=True)
    (fold / "a" / "x.md").write_text("x", encoding="utf-8")
    (fold / "a" / "back").symlink_to(fold, target_is_directory=True)
    with symlink_policy(follow=True):
        found = [Path(s).relative_to(fold).as_posix() for s in iter_sources([fold])]
    assert found == ["a/x.md"]


def test_a_symlink_named_on_the_command_line_is_read(tmp_path: Path) -> None:
    # Yielded by its own name (its folder resolved), as a walk yields it: the loader is
    # chosen by the link's name either way (a day-one audit: `ingest syml/passwd.md`
    # found no loader for "passwd", while a walk with --follow-symlinks read it).
    fold, _ = _hostile(tmp_path)
    named = fold / "sub" / "shadow.md"
    assert list(iter_sources([named])) == [str(fold.resolve() / "sub" / "shadow.md")]


def test_a_md_link_to_a_file_without_suffix_reads_the_same_named_or_walked(
    tmp_path: Path, open_store: OpenStore
) -> None:
    fold, _ = _hostile(tmp_path)
    with open_store() as kb:
        named = kb.ingest(fold / "sub" / "shadow.md")
        assert (named.documents, named.failed) == (1, [])
    with open_store(tmp_path / "other") as kb:
        walked = kb.ingest(fold, follow_symlinks=True)
        assert "shadow" in {Path(f.source).name for f in walked.files if f.status == "filed"}


def test_a_dangling_symlink_is_reported_as_dangling(tmp_path: Path) -> None:
    fold = tmp_path / "fold"
    fold.mkdir()
    (fold / "gone.md").symlink_to(tmp_path / "nowhere.md")
    (fold / "gone-inside.md").symlink_to(fold / "nothing.md")
    for follow in (False, True):
        skipped: list[tuple[str, str]] = []
        with symlink_policy(follow=follow, on_skip=lambda s, w, seen=skipped: seen.append((s, w))):
            assert list(iter_sources([fold])) == []
        assert sorted((Path(s).name, w) for s, w in skipped) == [
            ("gone-inside.md", DANGLING),
            ("gone.md", DANGLING),
        ]
    assert DANGLING == "symlink to nothing (its target does not exist)"


def test_a_link_to_a_file_in_the_same_folder_is_one_source(
    tmp_path: Path, open_store: OpenStore
) -> None:
    fold = tmp_path / "fold"
    fold.mkdir()
    (fold / "in.md").write_text("# In\n\nThe kestrel nests.\n", encoding="utf-8")
    (fold / "in_link.md").symlink_to(fold / "in.md")
    assert list(iter_sources([fold])) == [str(fold.resolve() / "in.md")]
    with open_store() as kb:
        report = kb.ingest(fold)
        assert [(Path(f.source).name, f.status) for f in report.files] == [("in.md", "filed")]


def test_ingest_files_nothing_from_outside_and_reports_each_file(
    tmp_path: Path, open_store: OpenStore
) -> None:
    fold, _ = _hostile(tmp_path)
    with open_store() as kb:
        report = kb.ingest(fold)
        # notes and sub/real (as alias.md, a link inside, which it is), each once
        assert (report.documents, report.unchanged) == (2, 0)
        assert len({f.source for f in report.files}) == len(report.files)
        assert sorted(Path(s).name for s, _ in report.skipped) == [
            "linked",
            "passwd.txt",
            "shadow.md",
        ]
        assert {why for _, why in report.skipped} == {LEAVES_FOLDER}
        assert report.to_json()["skipped"][0]["reason"] == LEAVES_FOLDER
        assert kb.search(CANARY, mode="lexical") == []
        followed = kb.ingest(fold, follow_symlinks=True)
        assert followed.skipped == []
        assert followed.documents == 3  # passwd.txt, sub/shadow.md, linked/leak.md
        assert len(kb.search(CANARY, mode="lexical")) == 3


def test_notion_export_skips_pages_linked_from_outside(tmp_path: Path) -> None:
    export = tmp_path / "export"
    shutil.copytree(NOTION, export)
    secret = tmp_path / "secret.md"
    secret.write_text(f"# Secret\n\n{CANARY}\n", encoding="utf-8")
    page = export / "Leak 0123456789abcdef0123456789abcdef.md"
    page.symlink_to(secret)
    skipped: list[tuple[str, str]] = []
    with symlink_policy(on_skip=lambda s, w: skipped.append((s, w))):
        docs = NotionLoader().load(str(export))
    assert not any(CANARY in s.text for d in docs for s in d.sections)
    assert skipped == [(str(page), LEAVES_FOLDER)]
    with symlink_policy(follow=True):
        followed = NotionLoader().load(str(export))
    assert any(CANARY in s.text for d in followed for s in d.sections)


@pytest.mark.parametrize("inside", [True, False])
def test_notion_export_folder_linked_into_a_walked_folder(tmp_path: Path, inside: bool) -> None:
    fold = tmp_path / "fold"
    fold.mkdir()
    target = fold / "real-export" if inside else tmp_path / "export"
    shutil.copytree(NOTION, target)
    (fold / "export-link").symlink_to(target, target_is_directory=True)
    skipped: list[tuple[str, str]] = []
    with symlink_policy(on_skip=lambda s, w: skipped.append((s, w))):
        found = list(iter_sources([fold]))
    if inside:
        assert found == [str(fold / "export-link")]  # the link and its target: one source
        assert skipped == []
    else:
        assert found == []
        assert skipped == [(str(fold / "export-link"), LEAVES_FOLDER)]
