"""The Notion loader on a hand-made export: nested pages, links, a CSV database."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kredenc.ingest.document import LoadedDocument
from kredenc.ingest.loaders.notion import NotionLoader, is_notion_export, split_notion_name
from kredenc.ingest.loaders.registry import loader_for

EXPORT = Path(__file__).parent.parent / "fixtures" / "ingest" / "notion_export"
WIKI = EXPORT / "Acme Wiki 2a9882a24cf284c414d40f36f5d53f8b"
PROJECTS_ALL = WIKI / "Projects 4554f7dce5eb13dff73a211b01f35a24_all.csv"


@pytest.fixture(scope="module")
def docs() -> dict[str, LoadedDocument]:
    loaded = NotionLoader().load(str(EXPORT))
    by_title = {d.title: d for d in loaded}
    assert len(by_title) == len(loaded), "titles are unique in this export"
    return by_title


def test_every_page_database_and_pageless_row_is_a_document(
    docs: dict[str, LoadedDocument],
) -> None:
    assert sorted(docs) == [
        "Acme Wiki",
        "Billing Migration",
        "Code Review (Guidelines)",
        "Deploy Checklist",
        "Engineering Handbook",
        "Laptop Setup",
        "Mobile App Beta",
        "Onboarding",
        "Projects",
        "Search Revamp",
    ]
    assert {d.loader for d in docs.values()} == {"notion"}
    kinds = {title: d.meta["kind"] for title, d in docs.items()}
    assert kinds["Projects"] == "database"
    assert kinds["Mobile App Beta"] == "row"
    assert kinds["Search Revamp"] == "page"


def test_titles_are_clean_and_sources_are_the_files(docs: dict[str, LoadedDocument]) -> None:
    review = docs["Code Review (Guidelines)"]
    assert review.source == str(
        (
            WIKI
            / "Engineering Handbook c474dd8bef1a15c61f0ea289fe385956"
            / "Code Review (Guidelines) e4db8e8de60d0d7b3fd489be37f4a81d.md"
        ).resolve()
    )
    assert review.meta["notion_id"] == "e4db8e8de60d0d7b3fd489be37f4a81d"
    assert not any(
        part for d in docs.values() for s in d.sections for part in s.heading_path if "2a98" in part
    )


def test_relative_links_resolve_to_the_target_pages(docs: dict[str, LoadedDocument]) -> None:
    def targets(title: str) -> list[str]:
        by_source = {d.source: t for t, d in docs.items()}
        return [by_source[link] for link in docs[title].links]

    assert targets("Acme Wiki") == ["Onboarding", "Engineering Handbook", "Projects"]
    assert targets("Onboarding") == ["Laptop Setup", "Engineering Handbook"]
    # URL-encoded names with parentheses, one folder down.
    assert targets("Engineering Handbook") == ["Code Review (Guidelines)", "Deploy Checklist"]
    # "../" across the tree; the in-page "#rollback" anchor is no edge.
    assert targets("Deploy Checklist") == ["Laptop Setup"]
    assert targets("Search Revamp") == ["Engineering Handbook"]


def test_link_urls_do_not_end_up_in_the_text(docs: dict[str, LoadedDocument]) -> None:
    onboarding = docs["Onboarding"].text
    assert "Start with Laptop Setup, then read the Engineering Handbook before" in onboarding
    assert "%20" not in onboarding and ".md" not in onboarding
    wiki = docs["Acme Wiki"].text
    assert "(https://acme.slack.com/archives/C012345)" in wiki


def test_sub_pages_know_their_parent(docs: dict[str, LoadedDocument]) -> None:
    assert docs["Laptop Setup"].meta["parent"] == docs["Onboarding"].source
    assert docs["Onboarding"].meta["parent"] == docs["Acme Wiki"].source
    assert "parent" not in docs["Acme Wiki"].meta


def test_database_reads_the_all_csv_and_links_one_document_per_row(
    docs: dict[str, LoadedDocument],
) -> None:
    projects = docs["Projects"]
    assert projects.source == str(PROJECTS_ALL.resolve())  # not the 2-row view
    assert projects.meta["columns"] == ["Name", "Status", "Owner", "Due", "Tags"]
    assert projects.links == [
        docs["Search Revamp"].source,
        docs["Billing Migration"].source,
        docs["Mobile App Beta"].source,
    ]
    assert "- Mobile App Beta" in projects.text


def test_a_row_with_a_page_is_that_page_with_the_row_columns(
    docs: dict[str, LoadedDocument],
) -> None:
    search = docs["Search Revamp"]
    assert search.source.endswith("Search Revamp eb1411380848979a69876cbacbd35c13.md")
    assert search.meta["database"] == "Projects"
    assert search.meta["properties"]["Owner"] == "Dana Kim"
    assert search.meta["properties"]["Tags"] == "search, backend"  # a quoted CSV cell


def test_a_row_without_a_page_becomes_its_own_document(docs: dict[str, LoadedDocument]) -> None:
    row = docs["Mobile App Beta"]
    assert row.source == f"{PROJECTS_ALL.resolve()}#row=3"
    assert "Status: Done" in row.text and "Owner: Lena Fischer" in row.text
    assert row.meta["properties"]["Due"] == "December 1, 2023"


def test_the_export_is_detected_and_routed_to_the_notion_loader() -> None:
    assert is_notion_export(EXPORT)
    assert is_notion_export(WIKI)
    assert not is_notion_export(EXPORT.parent / "markdown")
    assert loader_for(str(EXPORT)).name == "notion"
    assert split_notion_name("Page Title 1a2b3c4d5e6f708192a3b4c5d6e7f809") == (
        "Page Title",
        "1a2b3c4d5e6f708192a3b4c5d6e7f809",
    )
    assert split_notion_name("Notes 2024") == ("Notes 2024", None)


def test_an_unreadable_page_is_skipped_not_fatal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    copy = tmp_path / "export"
    shutil.copytree(EXPORT, copy)
    bad = copy / "Broken 0123456789abcdef0123456789abcdef.md"
    bad.write_bytes(b"\x00\xff\x00 binary")
    titles = {d.title for d in NotionLoader().load(str(copy))}
    assert "Acme Wiki" in titles and "Broken" not in titles
    assert "binary" in caplog.text
