"""The haystack: the append-only log that is the truth of a store.

Format (docs/storage.md; docs/architecture.md, "The log format")::

    file header : b"KRDH" | u16 format version | u16 flags | 16-byte log id
    record      : b"KRD1" | u32 LE payload length | u32 LE CRC32C(payload) | payload
    payload     : UTF-8 JSON object {"seq": n, "ts": ..., "op": ..., "ns": ..., ...}

A record is never rewritten, so its byte offset is an address valid for the life of
the log generation. This module knows bytes, records and recovery; it does not know
what the payloads mean (the index does) nor who may write (the housekeeper does).

This module is over 500 lines on purpose: the readers that survive damage
(:func:`scan_for_reading`, :func:`resync` for salvage) parse frames with the same
private parser as :func:`scan`, and keeping them beside it keeps one parser.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import struct
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import google_crc32c

from kredenc.errors import CorruptLog, FormatError, InvalidInput, StoreError

log = logging.getLogger(__name__)

FILE_MAGIC = b"KRDH"
RECORD_MAGIC = b"KRD1"
FORMAT_VERSION = 1
HEADER = struct.Struct("<4sHH16s")
RECORD_HEADER = struct.Struct("<4sII")
HEADER_SIZE = HEADER.size  # 24
RECORD_HEADER_SIZE = RECORD_HEADER.size  # 12
MAX_PAYLOAD = 16 * 1024 * 1024

Durability = Literal["append", "batch", "none"]
DURABILITIES: tuple[str, ...] = ("append", "batch", "none")


def crc32c(data: bytes) -> int:
    return int(google_crc32c.value(data))


def encode_payload(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def frame(payload: bytes) -> bytes:
    """One record's bytes: magic, length, checksum, payload."""
    return RECORD_HEADER.pack(RECORD_MAGIC, len(payload), crc32c(payload)) + payload


@dataclass(frozen=True)
class LogRecord:
    offset: int
    payload: dict[str, Any]
    end: int  # the offset just past this record

    @property
    def seq(self) -> int:
        return int(self.payload["seq"])

    @property
    def op(self) -> str:
        return str(self.payload.get("op", ""))


@dataclass
class Recovery:
    """What opening the log found and did."""

    records: int = 0
    last_seq: int = 0
    end: int = HEADER_SIZE
    truncated_bytes: int = 0
    discarded_uncommitted: int = 0
    problems: list[str] = field(default_factory=list)


class _Bad(Exception):
    """A record that does not parse at an offset (internal to scanning)."""

    def __init__(self, offset: int, reason: str, partial: bool) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason
        self.partial = partial  # the record runs past the end of the file


_PREFIX = re.compile(rb'\{"seq":(\d+)(?:,"txn":(\d+))?,"op":"(\w+)"')


def _parse_at(
    buf: memoryview, offset: int, size: int, *, full: bool = False
) -> tuple[int, int | None, str, int]:
    """Check the record at ``offset``; return (seq, txn, op, next offset) or raise _Bad.

    The checksum covers the payload, so the fast path reads only the fixed prefix
    every payload starts with (seq, txn, op); ``full`` also parses the JSON.
    """
    if size - offset < RECORD_HEADER_SIZE:
        raise _Bad(offset, "incomplete record header", partial=True)
    magic, length, checksum = RECORD_HEADER.unpack_from(buf, offset)
    if magic != RECORD_MAGIC:
        raise _Bad(offset, "bad record magic", partial=False)
    if length > MAX_PAYLOAD:
        raise _Bad(offset, f"record length {length} exceeds the {MAX_PAYLOAD} bound", False)
    start = offset + RECORD_HEADER_SIZE
    end = start + length
    if end > size:
        raise _Bad(offset, "record runs past the end of the file", partial=True)
    body = buf[start:end]
    if crc32c(bytes(body)) != checksum:
        raise _Bad(offset, "checksum mismatch", partial=False)
    match = _PREFIX.match(bytes(body[:64]))
    if match is None:
        raise _Bad(offset, "payload does not start with seq and op", partial=False)
    if full:
        try:
            json.loads(bytes(body).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _Bad(offset, f"payload is not JSON ({exc})", partial=False) from exc
    txn = int(match.group(2)) if match.group(2) else None
    return int(match.group(1)), txn, match.group(3).decode(), end


def _valid_record_after(buf: memoryview, start: int, size: int) -> int | None:
    """The offset of the first well-formed record after ``start``, if any.

    Used to tell a torn tail (nothing valid follows) from corruption in the middle.
    """
    pos = start
    raw = buf.obj if isinstance(buf.obj, bytes | bytearray) else bytes(buf)
    while True:
        pos = raw.find(RECORD_MAGIC, pos + 1)
        if pos < 0:
            return None
        try:
            _parse_at(buf, pos, size)
        except _Bad:
            continue
        return pos


def read_header(data: bytes, path: Path) -> bytes:
    """Validate the file header; return the 16-byte log id."""
    if len(data) < HEADER_SIZE:
        raise CorruptLog(f"{path}: file header is incomplete ({len(data)} bytes)", offset=0)
    magic, version, flags, log_id = HEADER.unpack_from(data, 0)
    if magic != FILE_MAGIC:
        raise CorruptLog(f"{path}: not a kredenc haystack (bad file magic)", offset=0)
    if version > FORMAT_VERSION:
        raise FormatError(
            f"{path}: log format version {version} is newer than this kredenc supports "
            f"({FORMAT_VERSION})",
            "upgrade kredenc to open this store",
        )
    if version < 1:
        raise CorruptLog(f"{path}: invalid log format version {version}", offset=4)
    if flags != 0:
        # Version 1 defines no flags: any set bit is damage, not a feature.
        raise CorruptLog(f"{path}: unknown header flags {flags:#06x}", offset=6)
    return bytes(log_id)


def scan(data: bytes, path: Path) -> Recovery:
    """Verify every record and decide what a recovery must cut.

    Raises ``CorruptLog`` when a bad record is followed by valid ones: that is
    damage, never a torn write, and nothing is cut from the middle of a log.
    """
    read_header(data, path)
    buf = memoryview(data)
    size = len(data)
    rec = Recovery()
    pos = HEADER_SIZE
    expected = 1
    count = 0
    last_committed = 0
    open_txn_offset: int | None = None
    open_txn: int | None = None
    open_txn_count = 0
    while pos < size:
        try:
            seq, txn, op, nxt = _parse_at(buf, pos, size)
        except _Bad as bad:
            following = _valid_record_after(buf, pos, size)
            if following is not None:
                raise CorruptLog(
                    f"{path}: damaged record at byte offset {pos} ({bad.reason}); "
                    f"valid records follow at offset {following}",
                    offset=pos,
                    hint=salvage_hint(path.parent),
                ) from None
            rec.truncated_bytes = size - pos
            what = "torn write" if bad.partial else bad.reason
            rec.problems.append(f"tail at byte offset {pos}: {what}; {size - pos} bytes cut")
            break
        if seq != expected:
            raise CorruptLog(
                f"{path}: record at byte offset {pos} has seq {seq}, expected {expected}",
                offset=pos,
                hint=salvage_hint(path.parent),
            )
        expected += 1
        count += 1
        if op == "commit":
            open_txn_offset = None
            open_txn = None
            open_txn_count = 0
        elif open_txn_offset is not None and txn != open_txn:
            # A batch is one write ending in its commit record, so only a torn tail
            # may lack the commit; a batch that valid records follow is damage.
            raise CorruptLog(
                f"{path}: batch at byte offset {open_txn_offset} has no commit record, "
                f"but the record at byte offset {pos} follows it",
                offset=open_txn_offset,
                hint=salvage_hint(path.parent),
            )
        elif txn is not None:
            if open_txn_offset is None:
                open_txn_offset = pos
                open_txn = txn
            open_txn_count += 1
        if open_txn_offset is None:
            last_committed = seq
        pos = nxt
    end = pos
    if open_txn_offset is not None:
        rec.discarded_uncommitted = open_txn_count
        rec.problems.append(
            f"uncommitted batch of {open_txn_count} records at byte offset "
            f"{open_txn_offset} discarded"
        )
        count -= open_txn_count
        end = open_txn_offset
        rec.truncated_bytes = size - end
    rec.records = count
    rec.last_seq = last_committed
    rec.end = end
    return rec


def salvage_hint(home: Path) -> str:
    """The hint for a damaged log: a command that copies what is readable."""
    dest = shlex.quote(f"{home}.salvaged")
    return (
        f"run 'kredenc --store {shlex.quote(str(home))} salvage {dest}' to copy every "
        "readable record into a new store"
    )


def missing_log_hint(path: Path) -> str:
    home = shlex.quote(str(path.parent))
    return (
        f"restore {path.name} from a backup, or run 'kredenc --store {home} init --new-log' "
        "to start an empty log in this store (its records are lost); if its log is in "
        "PostgreSQL, set KREDENC_BACKEND=postgres and KREDENC_POSTGRES_DSN instead"
    )


def aside_path(path: Path, tag: str) -> Path:
    """A free name beside ``path`` for a copy set aside: ``<name>.<tag>-<UTC time>``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    candidate = path.with_name(f"{path.name}.{tag}-{stamp}")
    n = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.{tag}-{stamp}-{n}")
        n += 1
    return candidate


def keep_cut_tail(path: Path, data: bytes, end: int) -> Path:
    """Copy the bytes past ``end`` beside the log (durably), then cut the log there."""
    kept = aside_path(path, "cut")
    fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data[end:])
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_dir(path.parent)
    with open(path, "r+b") as fh:
        fh.truncate(end)
        fh.flush()
        os.fsync(fh.fileno())
    return kept


@dataclass(frozen=True)
class Frame:
    """A verified record found by :func:`resync` (checksum good, JSON parses)."""

    offset: int
    end: int
    seq: int
    txn: int | None
    op: str


def resync(data: bytes) -> tuple[list[Frame], list[tuple[int, int, str]]]:
    """Every verifiable record of a log, damaged or not, and the damaged byte ranges.

    After a bad record the scan resumes at the next record magic whose frame verifies
    (checksum and JSON), so records after any damage are found too. Returns
    (frames in file order, [(start, end, reason)]). Never raises on bad bytes.
    """
    buf = memoryview(data)
    size = len(data)
    frames: list[Frame] = []
    damage: list[tuple[int, int, str]] = []
    pos = HEADER_SIZE
    while pos < size:
        try:
            seq, txn, op, nxt = _parse_at(buf, pos, size, full=True)
        except _Bad as bad:
            nxt_pos = pos
            while True:
                nxt_pos = data.find(RECORD_MAGIC, nxt_pos + 1)
                if nxt_pos < 0:
                    nxt_pos = size
                    break
                try:
                    _parse_at(buf, nxt_pos, size, full=True)
                except _Bad:
                    continue
                break
            damage.append((pos, nxt_pos, "torn write" if bad.partial else bad.reason))
            pos = nxt_pos
            continue
        frames.append(Frame(pos, nxt, seq, txn, op))
        pos = nxt
    return frames, damage


def scan_for_reading(data: bytes, path: Path) -> Recovery:
    """What a reader may read: like :func:`scan`, but damage in the middle is reported
    (once, as a warning naming the salvage command) instead of refused, and nothing is
    ever cut. A torn tail is simply not read."""
    try:
        return scan(data, path)
    except CorruptLog as exc:
        frames, _damage = resync(data)
        rec = Recovery(problems=[exc.message])
        if frames:
            rec.records = len(frames)
            rec.last_seq = frames[-1].seq
            rec.end = frames[-1].end
        log.warning("%s; reading around it (%s)", exc.message, exc.hint)
        return rec


class Haystack:
    """An open haystack file: the file :class:`~kredenc.storage.base.Log`. Appends are
    serialised by the caller (the housekeeper).

    Reads (``read``) are safe from any thread: they use ``os.pread`` on their own
    descriptor and only ever read bytes below the durable end.

    A read-only haystack follows the file as another process appends to it: asked for
    an offset past the end it knows, it first takes in the records written since
    (:meth:`follow`), up to the last complete record outside an unfinished batch.
    """

    def __init__(
        self, path: Path, *, durability: Durability = "append", writable: bool = True
    ) -> None:
        if durability not in DURABILITIES:
            raise InvalidInput(
                f"unknown durability {durability!r}", f"use one of {', '.join(DURABILITIES)}"
            )
        self.path = path
        self.durability: Durability = durability
        self.writable = writable
        self._append_lock = threading.Lock()
        self._fd = -1
        self._rfd = -1
        self.recovery = Recovery()
        self._open()

    # -- opening and recovery -------------------------------------------------
    @staticmethod
    def create(path: Path) -> bytes:
        """Write a new empty log (header only); return its id."""
        log_id = uuid.uuid4().bytes
        header = HEADER.pack(FILE_MAGIC, FORMAT_VERSION, 0, log_id)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, header)
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_dir(path.parent)
        return log_id

    def _open(self) -> None:
        if not self.path.exists():
            raise StoreError(f"{self.path}: haystack file is missing", missing_log_hint(self.path))
        data = self.path.read_bytes()
        self.log_id = read_header(data, self.path)
        if self.writable:
            recovery = scan(data, self.path)
            if recovery.end < len(data):
                kept = keep_cut_tail(self.path, data, recovery.end)
                for problem in recovery.problems:
                    log.warning(
                        "haystack recovery: %s (the cut bytes are kept in %s)", problem, kept
                    )
        else:
            # A reader never changes the file: it reads up to the last good record.
            recovery = scan_for_reading(data, self.path)
        self.recovery = recovery
        self.end = recovery.end
        self.last_seq = recovery.last_seq
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND) if self.writable else -1
        self._rfd = os.open(self.path, os.O_RDONLY)

    # -- appending ------------------------------------------------------------
    def append(
        self, payloads: Sequence[dict[str, Any]], *, batch: bool = False, sync: bool = True
    ) -> list[tuple[int, int]]:
        """Append payloads as one write; assign ``seq``; return (seq, offset) for each.

        With ``batch`` (and more than one payload), the records carry a ``txn`` id and
        a commit record is appended after them, so recovery keeps all or none.
        ``sync`` fsyncs according to the durability policy.
        """
        if not self.writable:
            raise StoreError("the haystack is open read-only", "open the store for writing")
        with self._append_lock:
            seq = self.last_seq
            chunks: list[bytes] = []
            out: list[tuple[int, int]] = []
            offset = self.end
            txn = seq + 1 if batch and len(payloads) > 1 else None
            for payload in payloads:
                seq += 1
                body = encode_payload(_ordered(payload, seq, txn))
                if len(body) > MAX_PAYLOAD:
                    raise InvalidInput(
                        f"record of {len(body)} bytes exceeds the {MAX_PAYLOAD}-byte bound",
                        "split the text into smaller pieces",
                    )
                framed = frame(body)
                out.append((seq, offset))
                chunks.append(framed)
                offset += len(framed)
            if txn is not None:
                seq += 1
                body = encode_payload({"seq": seq, "op": "commit", "txn": txn})
                chunks.append(frame(body))
                offset += RECORD_HEADER_SIZE + len(body)
            data = b"".join(chunks)
            self._write_all(data)
            if sync and self.durability != "none":
                os.fsync(self._fd)
            self.end = offset
            self.last_seq = seq
            return out

    def sync(self) -> None:
        if self.durability != "none":
            os.fsync(self._fd)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        written = 0
        try:
            while written < len(view):
                written += os.write(self._fd, view[written:])
        except OSError:
            # A partial write leaves a torn tail; cut it now so later appends do not
            # land after garbage (which would read as corruption in the middle).
            os.ftruncate(self._fd, self.end)
            raise

    #: The writer holds the store's file lock alone (``Log.shared``).
    shared = False

    def exclusive(self) -> AbstractContextManager[None]:
        """Nothing to take: the store's file lock keeps every other writer out."""
        return nullcontext()

    # -- following a writer (read-only) -----------------------------------------
    def follow(self) -> bool:
        """Take in the records another process appended since this reader last looked:
        every verified record in order, up to the last one that is not part of an
        unfinished batch (a batch counts once its commit record is there). A torn or
        damaged record ends the walk without an error (a writer may be mid-append).
        Returns whether the end moved. A writer's haystack knows its end already."""
        if self.writable or self._rfd < 0:
            return False
        with self._append_lock:
            start = self.end
            size = os.fstat(self._rfd).st_size
            if size <= start:
                return False
            data = os.pread(self._rfd, size - start, start)
            buf = memoryview(data)
            pos = 0
            seq = last_seq = self.last_seq
            end = 0
            while pos < len(data):
                try:
                    got, txn, op, nxt = _parse_at(buf, pos, len(data))
                except _Bad:
                    break
                if got != seq + 1:
                    break
                seq = got
                pos = nxt
                if op == "commit" or txn is None:
                    end, last_seq = pos, seq
            if end == 0:
                return False
            self.last_seq = last_seq
            self.end = start + end
            return True

    # -- reading --------------------------------------------------------------
    def read(self, offset: int) -> dict[str, Any]:
        """The payload of the record at ``offset`` (verified). A read-only haystack
        asked for an offset past its end first follows the file (:meth:`follow`)."""
        if offset >= self.end and not self.writable:
            self.follow()
        if offset < HEADER_SIZE or offset >= self.end:
            home = shlex.quote(str(self.path.parent))
            raise StoreError(
                f"{self.path}: no record at offset {offset} (the log ends at {self.end})",
                f"run 'kredenc --store {home} check' to find the file at fault",
            )
        head = os.pread(self._rfd, RECORD_HEADER_SIZE, offset)
        magic, length, checksum = RECORD_HEADER.unpack(head)
        if magic != RECORD_MAGIC or length > MAX_PAYLOAD:
            raise CorruptLog(
                f"{self.path}: no valid record at offset {offset}",
                offset,
                salvage_hint(self.path.parent),
            )
        body = os.pread(self._rfd, length, offset + RECORD_HEADER_SIZE)
        if len(body) != length or crc32c(body) != checksum:
            raise CorruptLog(
                f"{self.path}: damaged record at offset {offset}",
                offset,
                salvage_hint(self.path.parent),
            )
        payload: dict[str, Any] = json.loads(body)
        return payload

    def iter_from(self, offset: int = HEADER_SIZE) -> Iterator[LogRecord]:
        """Iterate records from ``offset`` up to the current end (a stable snapshot)."""
        end = self.end
        pos = offset
        while pos < end:
            head = os.pread(self._rfd, RECORD_HEADER_SIZE, pos)
            _magic, length, _crc = RECORD_HEADER.unpack(head)
            payload = self.read(pos)
            nxt = pos + RECORD_HEADER_SIZE + length
            yield LogRecord(pos, payload, nxt)
            pos = nxt

    def check(self) -> tuple[bool, list[str]]:
        """Verify the whole file without changing it (see :func:`check_file`)."""
        return check_file(self.path)

    def close(self) -> None:
        for fd in (self._fd, self._rfd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._rfd = -1


def _ordered(payload: dict[str, Any], seq: int, txn: int | None) -> dict[str, Any]:
    """The payload with seq, txn and op first: the prefix recovery reads."""
    head: dict[str, Any] = {"seq": seq}
    if txn is not None:
        head["txn"] = txn
    head["op"] = payload["op"]
    for key, value in payload.items():
        if key not in ("seq", "txn", "op"):
            head[key] = value
    payload.clear()
    payload.update(head)
    return payload


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_file(path: Path) -> tuple[bool, list[str]]:
    """Verify a haystack without changing it: (sound, findings)."""
    findings: list[str] = []
    try:
        data = path.read_bytes()
    except OSError as exc:
        return False, [f"cannot read {path}: {exc.strerror}"]
    try:
        rec = scan(data, path)
    except (CorruptLog, FormatError) as exc:
        return False, [exc.message]
    findings.append(f"{rec.records} committed records, last seq {rec.last_seq}, {rec.end} bytes")
    findings.extend(rec.problems)
    sound = not rec.problems
    if rec.problems:
        findings.append("these would be cut when the store is next opened for writing")
    return sound, findings
