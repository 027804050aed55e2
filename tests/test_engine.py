"""The Kredenc facade: filing and reading back, and every kind of bad input refused
with a clear error and nothing written."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import FormatError, InvalidInput, NotFound, StoreError, StoreLocked
from kredenc.records import MEMORY_KINDS
from kredenc.storage.haystack import scan
from kredenc.testing.embedders import HashEmbedder

LOG = "haystack.log"


def open_store(home: Path, **kwargs: Any) -> Kredenc:
    kwargs.setdefault("embedder", HashEmbedder())
    kwargs.setdefault("durability", "none")
    return Kredenc.open(home, **kwargs)


def log_state(home: Path) -> tuple[int, int]:
    """(log size in bytes, committed records)."""
    data = (home / LOG).read_bytes()
    return len(data), scan(data, home / LOG).records


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def kb(home: Path) -> Iterator[Kredenc]:
    store = open_store(home)
    store.remember("the kestrel nests on the water tower", kind="fact", tags=["birds"])
    store.remember("quarterly budget review on friday", kind="event")
    yield store
    store.close()


# -- filing and reading back -------------------------------------------------------


def test_remember_then_get(kb: Kredenc, home: Path) -> None:
    mem = kb.remember(
        "Ada prefers tea", kind="preference", drawer="people", tags=["ada"], meta={"src": "chat"}
    )
    assert mem.id.startswith("m") and mem.seq == 3 and mem.offset > 24
    got = kb.get(mem.id)
    assert (got.id, got.text, got.kind, got.drawer, got.tags, got.meta) == (
        mem.id, "Ada prefers tea", "preference", "people", ("ada",), {"src": "chat"},
    )  # fmt: skip
    assert (got.seq, got.offset, got.namespace) == (mem.seq, mem.offset, "default")
    assert log_state(home) == (kb.stats()["log_bytes"], 3)
    assert kb.search("tea", k=1, mode="lexical")[0].id == mem.id


def test_every_kind_is_accepted(kb: Kredenc) -> None:
    for kind in MEMORY_KINDS:
        assert kb.get(kb.remember(f"a {kind}", kind=kind).id).kind == kind


def test_remember_many_is_one_batch(kb: Kredenc, home: Path) -> None:
    mems = kb.remember_many([{"text": "one"}, {"text": "two", "kind": "task", "drawer": "todo"}])
    assert [m.text for m in mems] == ["one", "two"]
    assert [kb.get(m.id).drawer for m in mems] == ["memories", "todo"]
    assert log_state(home)[1] == 2 + 2 + 1  # two puts and their commit record
    assert kb.remember_many([]) == []


def test_records_survive_reopening(home: Path) -> None:
    with open_store(home) as kb:
        mem = kb.remember("still here after a restart")
    with open_store(home) as kb:
        assert kb.get(mem.id).text == "still here after a restart"
        assert [h.id for h in kb.search("restart", mode="lexical")] == [mem.id]
    with open_store(home, read_only=True) as ro:
        assert ro.get(mem.id).text == "still here after a restart"
        with pytest.raises(StoreError, match="read-only"):
            ro.remember("no")


def test_stats(kb: Kredenc) -> None:
    stats = kb.stats()
    assert stats["records"] == 2 and stats["log_records"] == 2
    assert stats["model"] == "test-hash-384" and stats["dim"] == 384
    assert stats["drawers"] == [{"drawer": "memories", "type": "memory", "records": 2}]


# -- not found, relations ----------------------------------------------------------


def test_get_and_forget_of_missing_ids(kb: Kredenc, home: Path) -> None:
    mem = kb.remember("short-lived")
    kb.forget(mem.id)
    before = log_state(home)
    for call in (kb.get, kb.forget):
        for rid in (mem.id, "m000000000000deadbeef", ""):
            with pytest.raises(NotFound, match="no record"):
                call(rid)
    assert log_state(home) == before


def test_relate_checks_its_arguments(kb: Kredenc, home: Path) -> None:
    a, b = (h.id for h in kb.search("kestrel budget", k=2, mode="lexical"))
    before = log_state(home)
    with pytest.raises(InvalidInput, match="unknown relation 'likes'") as info:
        kb.relate(a, b, "likes")
    assert "supports" in info.value.hint
    with pytest.raises(InvalidInput, match="itself"):
        kb.relate(a, a, "supports")
    with pytest.raises(InvalidInput, match="weight"):
        kb.relate(a, b, "supports", weight=2.0)
    with pytest.raises(NotFound):
        kb.relate(a, "m000000000000deadbeef", "supports")
    assert log_state(home) == before
    kb.relate(a, b, "supports")
    assert kb.stats()["edges"] == 1


def test_namespaces_do_not_see_each_other(home: Path) -> None:
    with open_store(home, namespace="a") as kb:
        mem = kb.remember("tenant a's secret plan")
    with open_store(home, namespace="b") as kb:
        with pytest.raises(NotFound, match="in namespace 'b'"):
            kb.get(mem.id)
        with pytest.raises(NotFound):
            kb.forget(mem.id)
        assert kb.search("secret plan") == []
        assert kb.stats()["records"] == 0


# -- bad input: a clear error, nothing written ---------------------------------------

BAD_REMEMBER: list[tuple[str, Callable[[Kredenc], object], str]] = [
    ("empty", lambda kb: kb.remember(""), "text is empty"),
    ("whitespace", lambda kb: kb.remember(" \n\t "), "text is empty"),
    ("not text", lambda kb: kb.remember(b"bytes"), "text must be a string"),  # type: ignore[arg-type]
    ("none", lambda kb: kb.remember(None), "text must be a string"),  # type: ignore[arg-type]
    ("50 MB", lambda kb: kb.remember("x" * (50 * 1024 * 1024)), "the limit for one memory is"),
    ("lone surrogate", lambda kb: kb.remember("caf\udce9"), "not valid UTF-8"),
    ("unknown kind", lambda kb: kb.remember("x", kind="mood"), "unknown kind 'mood'"),
    ("blank drawer", lambda kb: kb.remember("x", drawer=" "), "drawer must be"),
    ("tags as text", lambda kb: kb.remember("x", tags="a,b"), "tags"),
    ("meta not a dict", lambda kb: kb.remember("x", meta=[1]), "meta must be"),  # type: ignore[arg-type]
    (
        "one bad item in a batch",
        lambda kb: kb.remember_many([{"text": "fine"}, {"text": ""}]),
        "text is empty",
    ),
    ("bad mode", lambda kb: kb.search("x", mode="fuzzy"), "unknown search mode 'fuzzy'"),
    ("k = 0", lambda kb: kb.search("x", k=0), "k must be"),
    ("k = 1001", lambda kb: kb.search("x", k=1001), "k must be"),
]


@pytest.mark.parametrize(
    ("call", "message"), [c[1:] for c in BAD_REMEMBER], ids=[c[0] for c in BAD_REMEMBER]
)
def test_bad_input_is_refused_and_nothing_written(
    kb: Kredenc, home: Path, call: Callable[[Kredenc], object], message: str
) -> None:
    before, stats = log_state(home), kb.stats()
    with pytest.raises(InvalidInput, match=message):
        call(kb)
    assert log_state(home) == before
    assert kb.stats() == stats


def test_unknown_kind_lists_the_kinds(kb: Kredenc) -> None:
    with pytest.raises(InvalidInput) as info:
        kb.remember("x", kind="mood")
    assert all(kind in info.value.hint for kind in MEMORY_KINDS)


def test_store_directory_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "store"
    path.write_bytes(b"precious")
    with pytest.raises(StoreError, match="is a file, not a directory") as info:
        open_store(path)
    assert "directory" in info.value.hint
    assert path.read_bytes() == b"precious"


def test_newer_store_format_is_refused(kb: Kredenc, home: Path) -> None:
    kb.close()
    meta = json.loads((home / "store.json").read_text())
    (home / "store.json").write_text(json.dumps({**meta, "format": 99}))
    before = log_state(home)
    with pytest.raises(FormatError, match="store format version 99 is newer") as info:
        open_store(home)
    assert "upgrade kredenc" in info.value.hint
    assert log_state(home) == before


def test_newer_log_version_is_refused(kb: Kredenc, home: Path) -> None:
    kb.close()
    raw = bytearray((home / LOG).read_bytes())
    raw[4:6] = (99).to_bytes(2, "little")  # b"KRDH" | u16 version | u16 flags | log id
    (home / LOG).write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="log format version 99 is newer") as info:
        open_store(home)
    assert "upgrade kredenc" in info.value.hint
    assert (home / LOG).read_bytes() == bytes(raw)
    # The lock was released: a store that is fixed opens again.
    raw[4:6] = (1).to_bytes(2, "little")
    (home / LOG).write_bytes(bytes(raw))
    with open_store(home) as again:
        assert again.stats()["records"] == 2


@pytest.mark.parametrize(
    ("embedder", "found"),
    [
        (HashEmbedder(dim=64), "not test-hash-64 (64-d)"),
        (HashEmbedder(model_id="other"), "not other-384 (384-d)"),
    ],
    ids=["other dimension", "other model id"],
)
def test_another_embedding_model_is_refused(
    kb: Kredenc, home: Path, embedder: HashEmbedder, found: str
) -> None:
    kb.close()
    before = log_state(home)
    with pytest.raises(FormatError, match="built with embedding model test-hash-384") as info:
        open_store(home, embedder=embedder)
    assert found in info.value.message
    # The message says how to fix it: configure the store's model, or use a new store.
    assert "embed_provider" in info.value.hint and "new store" in info.value.hint
    assert log_state(home) == before
    with open_store(home) as same:  # the right model still opens it
        assert same.stats()["records"] == 2


def test_second_writer_is_refused(kb: Kredenc, home: Path) -> None:
    with pytest.raises(StoreLocked, match="store is locked by pid"):
        open_store(home)
    with open_store(home, read_only=True) as reader:
        assert reader.stats()["records"] == 2


def test_read_only_open_of_a_missing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no store at") as info:
        open_store(tmp_path / "nothing", read_only=True)
    assert "kredenc --store" in info.value.hint and "init" in info.value.hint
    assert not (tmp_path / "nothing").exists()


@pytest.mark.parametrize(
    "call",
    [
        lambda kb: kb.remember("x", drawer="d\udcff"),
        lambda kb: kb.remember("x", tags=["t\udcff"]),
        lambda kb: kb.get("m\udcff"),
        lambda kb: kb.search("x", drawer="d\udcff"),
    ],
    ids=["drawer", "tag", "get id", "search drawer"],
)
def test_lone_surrogates_in_names_are_invalid_input(
    kb: Kredenc, home: Path, call: Callable[[Kredenc], object]
) -> None:
    before = log_state(home)
    with pytest.raises(InvalidInput, match="UTF-8"):
        call(kb)
    assert log_state(home) == before


# -- scoped views: one open store, several namespaces ---------------------------------


def test_a_scoped_view_shares_the_store_and_keeps_its_namespace(kb: Kredenc) -> None:
    view = kb.scoped("tenant-b")
    assert view.store is kb.store and view.index is kb.index  # no second open
    assert view.namespace == "tenant-b" and kb.namespace == "default"
    mem = view.remember("tenant b's plan")
    assert view.get(mem.id).text == "tenant b's plan"
    with pytest.raises(NotFound, match="in namespace 'default'"):
        kb.get(mem.id)
    assert [h.id for h in view.search("plan")] == [mem.id]
    assert view.stats()["records"] == 1 and kb.stats()["records"] == 2
    with pytest.raises(InvalidInput, match="namespace must be"):
        kb.scoped(" ")


def test_closing_a_view_leaves_the_store_open_closing_the_owner_closes_it(
    kb: Kredenc, home: Path
) -> None:
    view = kb.scoped("b")
    view.close()
    with view:
        pass  # leaving a with block closes too: still nothing
    view.remember("written after the view was closed")
    kb.remember("and through the owner")
    kb.close()
    with pytest.raises(StoreError, match="store is closed"):
        view.remember("the owner closed the store")
    with open_store(home) as again:  # the lock was released
        assert again.scoped("b").stats()["records"] == 1


def _context(kb: Kredenc, record_id: str) -> str:
    return str(kb.haystack.read(kb.get(record_id).offset).get("context", ""))


def test_a_view_keeps_its_own_turn_context(kb: Kredenc) -> None:
    kb.file_turns("s1", [{"role": "user", "content": "I bought a red bicycle"}])
    view = kb.scoped("default")  # same namespace, fresh context
    (seen,) = kb.file_turns("s1", [{"role": "user", "content": "It has a basket"}])
    (fresh,) = view.file_turns("s1", [{"role": "user", "content": "It has a bell"}])
    assert "red bicycle" in _context(kb, seen)
    assert "red bicycle" not in _context(kb, fresh) and "session s1" in _context(kb, fresh)


def test_check_judges_the_open_store(open_store: Callable[..., Kredenc]) -> None:
    """The server's /check: the store is open and its index's writes sit in SQLite's
    write-ahead log, which the check reads (an immutable open would see no tables)."""
    with open_store() as kb:
        for i in range(3):
            kb.remember(f"checked memory {i}")
        report = kb.check()
        assert report["sound"] is True, report["findings"]
        assert any("index: 3 live records" in line for line in report["findings"])
        assert kb.check(full=True)["sound"] is True
