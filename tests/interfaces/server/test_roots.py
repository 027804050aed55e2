"""Ingest by path stays inside the server's roots: ``inside_roots`` on a real folder tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from kredenc.errors import InvalidInput
from kredenc.interfaces.server.roots import inside_roots


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    docs, more, outside = tmp_path / "docs", tmp_path / "more", tmp_path / "outside"
    for folder in (docs / "notes", more, outside):
        folder.mkdir(parents=True)
    (docs / "notes" / "a.md").write_text("a", encoding="utf-8")
    (more / "b.txt").write_text("b", encoding="utf-8")
    (outside / "secret.txt").write_text("s", encoding="utf-8")
    (docs / "out").symlink_to(outside)  # a link inside leading out
    (docs / "in").symlink_to(docs / "notes")  # a link inside staying in
    (docs / "loop").symlink_to(docs / "loop")
    return {"docs": docs.resolve(), "more": more.resolve(), "outside": outside.resolve()}


def test_paths_inside_a_root_resolve(tree: dict[str, Path]) -> None:
    roots = [tree["docs"], tree["more"]]
    docs = tree["docs"]
    assert inside_roots(str(docs / "notes" / "a.md"), roots) == docs / "notes" / "a.md"
    assert inside_roots(str(docs), roots) == docs
    assert inside_roots("notes/a.md", roots) == docs / "notes" / "a.md"  # from the first root
    assert inside_roots(str(docs / "in" / "a.md"), roots) == docs / "notes" / "a.md"
    assert inside_roots(str(tree["more"] / "b.txt"), roots) == tree["more"] / "b.txt"
    assert inside_roots(str(docs / "missing.pdf"), roots) == docs / "missing.pdf"  # ingest says


@pytest.mark.parametrize(
    "path",
    ["../outside/secret.txt", "out/secret.txt", "/etc/passwd", "notes/../../outside"],
)
def test_paths_leaving_the_roots_are_refused(tree: dict[str, Path], path: str) -> None:
    with pytest.raises(InvalidInput, match="outside the server's roots"):
        inside_roots(path, [tree["docs"]])


def test_a_tilde_is_never_the_server_users_home(tree: dict[str, Path]) -> None:
    assert inside_roots("~/secret", [tree["docs"]]) == tree["docs"] / "~" / "secret"


def test_bad_paths_and_no_roots_are_refused_with_one_line(tree: dict[str, Path]) -> None:
    with pytest.raises(InvalidInput, match="no roots configured"):
        inside_roots(str(tree["docs"]), [])
    for path in ("", "   ", "a\x00b"):
        with pytest.raises(InvalidInput, match="non-empty text"):
            inside_roots(path, [tree["docs"]])
    with pytest.raises(InvalidInput) as raised:
        inside_roots(str(tree["docs"] / "loop" / "x"), [tree["docs"]])
    assert "\n" not in str(raised.value)
