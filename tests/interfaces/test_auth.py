"""API keys (``kredenc.interfaces.auth``) and ``kredenc keys add | list | revoke``.

Pinned: a key is shown once and never stored (only its SHA-256 and its first
characters are); the key file is 0600 and replaced whole; each key names one
namespace; a revoked, altered or foreign key does not verify; a running reader sees
a revocation made by another process; the CLI never prints a key or a digest after
``add``; bad input is one line and exit 2.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from kredenc.errors import InvalidInput, StoreError
from kredenc.interfaces.auth import KEY_PREFIX, KEYS_FILE, KeyRing, bearer_token, digest
from kredenc.interfaces.cli import main


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    path.mkdir()
    return path


def test_a_key_is_random_prefixed_and_stored_only_as_a_digest(home: Path) -> None:
    ring = KeyRing(home)
    secret, key = ring.add("tenant-a", "laptop")
    other, _ = ring.add("tenant-a", "phone")
    assert secret.startswith(KEY_PREFIX) and len(secret) == len(KEY_PREFIX) + 43
    assert secret != other
    raw = (home / KEYS_FILE).read_text()
    assert secret not in raw and secret[SHOWN:] not in raw
    stored = json.loads(raw)["keys"][0]
    assert stored["sha256"] == digest(secret) == key.sha256
    assert stored["prefix"] == secret[:SHOWN] and stored["namespace"] == "tenant-a"
    assert stat.S_IMODE((home / KEYS_FILE).stat().st_mode) == 0o600
    assert [p.name for p in home.iterdir() if p.name.endswith(".tmp")] == []


SHOWN = 10


def test_verify_gives_the_keys_namespace(home: Path) -> None:
    ring = KeyRing(home)
    a, _ = ring.add("tenant-a")
    b, _ = ring.add("tenant-b")
    got_a, got_b = ring.verify(a), ring.verify(b)
    assert got_a is not None and got_a.namespace == "tenant-a"
    assert got_b is not None and got_b.namespace == "tenant-b"
    for wrong in (
        "",
        None,
        a[:-1],
        a + "x",
        a[:-1] + ("A" if a[-1] != "A" else "B"),
        "sk-" + a[3:],
    ):
        assert ring.verify(wrong) is None


def test_revoke_by_name_or_prefix_and_a_running_reader_sees_it(home: Path) -> None:
    writer, reader = KeyRing(home), KeyRing(home)  # two processes, in effect
    a, _ = writer.add("tenant-a", "first")
    b, kb_ = writer.add("tenant-a", "second")
    assert reader.verify(a) is not None and reader.verify(b) is not None
    assert writer.revoke("first").revoked is not None
    assert reader.verify(a) is None and reader.verify(b) is not None
    writer.revoke(kb_.prefix[:8])
    assert reader.verify(b) is None
    assert [k.name for k in reader.entries()] == ["first", "second"]  # kept, marked
    with pytest.raises(InvalidInput, match="already revoked"):
        writer.revoke("first")
    with pytest.raises(InvalidInput, match="no key"):
        writer.revoke("nobody")


def test_a_short_or_ambiguous_prefix_is_refused(home: Path) -> None:
    ring = KeyRing(home)
    for _ in range(2):
        ring.add("ns")
    with pytest.raises(InvalidInput, match="at least 4"):
        ring.revoke(KEY_PREFIX + "a")
    # Two keys whose shown characters begin alike (rare by chance; made here).
    data = json.loads((home / KEYS_FILE).read_text())
    for item in data["keys"]:
        item["prefix"] = KEY_PREFIX + "same" + item["prefix"][7:]
    (home / KEYS_FILE).write_text(json.dumps(data))
    with pytest.raises(InvalidInput, match="2 keys start with"):
        ring.revoke(KEY_PREFIX + "same")
    assert len(ring.active()) == 2


def test_names_are_unique_and_default_to_the_namespace(home: Path) -> None:
    ring = KeyRing(home)
    assert ring.add("ns")[1].name == "ns"
    assert ring.add("ns")[1].name == "ns-2"
    with pytest.raises(InvalidInput, match="exists"):
        ring.add("other", "ns")
    for bad_ns in ("", " ", "a\nb", "x" * 201, "\ud800"):
        with pytest.raises(InvalidInput):
            ring.add(bad_ns)
    with pytest.raises(InvalidInput):
        ring.add("ns", KEY_PREFIX + "looks-like-a-key")


def test_concurrent_adds_all_land(home: Path) -> None:
    rings = [KeyRing(home) for _ in range(8)]
    threads = [threading.Thread(target=r.add, args=("ns", f"k{i}")) for i, r in enumerate(rings)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(k.name for k in KeyRing(home).entries()) == sorted(f"k{i}" for i in range(8))


def test_a_damaged_key_file_is_a_store_error(home: Path) -> None:
    (home / KEYS_FILE).write_text("{not json")
    with pytest.raises(StoreError, match=r"keys\.json"):
        KeyRing(home).entries()


def test_no_store_no_keys(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"kredenc --store \S+ init"):
        KeyRing(tmp_path / "missing").add("ns")
    assert KeyRing(tmp_path / "missing").active() == []


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer kr_abc", "kr_abc"),
        ("bearer   kr_abc ", "kr_abc"),
        ("Basic a2V5", None),
        ("Bearer", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def run_cli(*args: str) -> tuple[int, str, str]:
    runner = CliRunner()
    with runner.isolation() as (out, err, *_):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue().decode(), err.getvalue().decode()


def test_cli_add_list_revoke(home: Path) -> None:
    code, out, err = run_cli("--store", str(home), "keys", "add", "--namespace", "tenant-a")
    assert code == 0, err
    secret = out.strip().splitlines()[0]
    assert secret.startswith(KEY_PREFIX) and len(secret) == 46
    assert "shown once" in err
    code, out, _ = run_cli(
        "--store", str(home), "--json", "keys", "add", "--namespace", "t-b", "--name", "b"
    )
    added = json.loads(out)
    assert code == 0 and added["name"] == "b" and added["namespace"] == "t-b"
    assert KeyRing(home).verify(added["key"]) is not None

    code, listing, _ = run_cli("--store", str(home), "keys", "list")
    assert code == 0 and "tenant-a" in listing and "t-b" in listing
    assert secret not in listing and secret[SHOWN:] not in listing
    for key in KeyRing(home).entries():
        assert key.sha256 not in listing and key.sha256[:16] not in listing
    code, listed, _ = run_cli("--store", str(home), "--json", "keys", "list")
    rows = json.loads(listed)
    assert [r["name"] for r in rows] == ["tenant-a", "b"]
    assert all(set(r) == {"name", "namespace", "prefix", "created", "revoked"} for r in rows)

    code, out, err = run_cli("--store", str(home), "keys", "revoke", secret[:8])
    assert code == 0, err
    assert KeyRing(home).verify(secret) is None
    code, _, err = run_cli("--store", str(home), "keys", "revoke", "nobody")
    assert code == 2 and err.count("\n") == 1 and "kredenc keys list" in err


def test_cli_keys_without_a_store(tmp_path: Path) -> None:
    code, _, err = run_cli("--store", str(tmp_path / "none"), "keys", "add", "--namespace", "x")
    assert code == 1 and err.startswith("error:") and "init'" in err and "--store" in err
    code, out, _ = run_cli("--store", str(tmp_path / "none"), "keys", "list")
    assert code == 0 and "no keys" in out
    assert not (tmp_path / "none").exists()


def test_key_file_mode_survives_a_umask(home: Path) -> None:
    old = os.umask(0)
    try:
        KeyRing(home).add("ns")
    finally:
        os.umask(old)
    assert stat.S_IMODE((home / KEYS_FILE).stat().st_mode) == 0o600
