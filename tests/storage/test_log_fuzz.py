"""Fuzzing the log reader (issue 13): whatever bytes a log holds, reading it raises a
``KredencError`` (with a message and a hint) or works; never another exception.

Hypothesis damages a small real log: flips, overwrites, cuts, inserts garbage and
duplicates spans. Each damaged file then goes through every reader: the writer's
recovery scan, the reader's scan, salvage's resync, ``check_file``, and a read-only
``Haystack`` reading and iterating what it holds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kredenc.errors import KredencError
from kredenc.storage.haystack import (
    Haystack,
    check_file,
    resync,
    scan,
    scan_for_reading,
)


@pytest.fixture(scope="module")
def good_log(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("log") / "haystack.log"
    Haystack.create(path)
    hay = Haystack(path, durability="none")
    hay.append([{"op": "put", "ns": "a", "id": "m1", "text": "tea, not coffee"}])
    hay.append(
        [{"op": "put", "ns": "a", "id": f"c{i}", "text": f"chunk {i} " * 5} for i in range(4)],
        batch=True,
    )
    hay.append([{"op": "tombstone", "ns": "a", "id": "m1"}])
    hay.close()
    return path.read_bytes()


damage = st.lists(
    st.one_of(
        st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(1, 255)),
        st.tuples(st.just("cut"), st.integers(0, 10_000), st.just(0)),
        st.tuples(st.just("insert"), st.integers(0, 10_000), st.binary(min_size=1, max_size=40)),
        st.tuples(st.just("dup"), st.integers(0, 10_000), st.integers(1, 200)),
    ),
    min_size=1,
    max_size=4,
)


def _damaged(data: bytes, steps: list[tuple[str, int, object]]) -> bytes:
    buf = bytearray(data)
    for kind, at, arg in steps:
        if not buf:
            break
        pos = at % len(buf)
        if kind == "flip":
            assert isinstance(arg, int)
            buf[pos] ^= arg
        elif kind == "cut":
            del buf[pos:]
        elif kind == "insert":
            assert isinstance(arg, bytes)
            buf[pos:pos] = arg
        else:
            assert isinstance(arg, int)
            buf[pos:pos] = buf[pos : pos + arg]
    return bytes(buf)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=damage)
def test_no_damage_makes_a_reader_raise_anything_but_a_kredenc_error(
    good_log: bytes, tmp_path: Path, steps: list[tuple[str, int, object]]
) -> None:
    data = _damaged(good_log, steps)
    path = tmp_path / "haystack.log"
    path.write_bytes(data)
    for read in (
        lambda: scan(data, path),
        lambda: scan_for_reading(data, path),
        lambda: resync(data),
        lambda: check_file(path),
    ):
        try:
            read()
        except KredencError as exc:
            assert exc.message and exc.hint, exc
    try:
        hay = Haystack(path, durability="none", writable=False)
    except KredencError:
        return
    try:
        for rec in hay.iter_from():
            hay.read(rec.offset)
    except KredencError as exc:
        assert exc.message and exc.hint, exc
    finally:
        hay.close()
    assert path.read_bytes() == data  # a reader never changes the log
