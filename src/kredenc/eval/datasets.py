"""What every evaluation dataset shares: the retriever protocol, the documents and
queries fed to it, and file reading (plain or gzipped JSON / JSON Lines / TSV).

A dataset is a sequence of *groups*. A group is one corpus and the queries asked
against it: BEIR and multihop have one group, LoCoMo one per conversation,
LongMemEval one per question. The runner calls ``reset()`` and ``index()`` once per
group, then ``search()`` once per query, and hands the ranked lists back to the
dataset's ``score()``, which needs nothing else (so a run file can be re-scored).
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

from kredenc.errors import InvalidInput

Metrics = dict[str, Any]
Ranked = Mapping[str, Sequence[str]]


@dataclass
class EvalDoc:
    """One unit of a corpus: the retriever returns ``id`` for it."""

    id: str
    text: str
    title: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvalQuery:
    qid: str
    text: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Group:
    """One corpus and the queries asked against it; ``k`` is how many ids to ask for."""

    docs: Sequence[EvalDoc]
    queries: Sequence[EvalQuery]
    k: int


@runtime_checkable
class Retriever(Protocol):
    def reset(self) -> None:
        """Start an empty corpus (a new store or namespace)."""

    def index(self, docs: Sequence[EvalDoc]) -> None:
        """Add documents to the current corpus."""

    def search(self, query: str, k: int, *, asked_at: float | None = None) -> list[str]:
        """Return up to ``k`` document ids, best first. ``asked_at``: when the query is
        asked, where the dataset dates its queries (``EvalQuery.meta["asked_at"]``, Unix
        seconds); a retriever may ignore it."""


class EvalDataset(Protocol):
    name: str

    def groups(self) -> Iterable[Group]:
        """The corpora and their queries, in run order."""

    def score(self, ranked: Ranked) -> Metrics:
        """Quality metrics from ranked ids per qid; deterministic, no timing."""


# -- file helpers --------------------------------------------------------------------


def resolve(path: str | Path) -> Path:
    """``path`` itself, or ``path`` + ``.gz`` when only the gzipped file exists."""
    p = Path(path)
    if p.exists():
        return p
    gz = p.with_name(p.name + ".gz")
    if gz.exists():
        return gz
    raise InvalidInput(f"{p}: no such file", "give a path to the dataset file (plain or .gz)")


def not_utf8(path: Path) -> InvalidInput:
    """The error for a dataset file that is not UTF-8, naming the first bad byte (of the
    decompressed text, for a ``.gz``)."""
    try:
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        data.decode("utf-8")
        where = ""
    except UnicodeDecodeError as e:
        where = f" (at byte {e.start})"
    except (OSError, EOFError, zlib.error):
        where = ""
    return InvalidInput(f"{path}: not UTF-8{where}", "save the file as UTF-8")


@contextmanager
def open_text(path: str | Path) -> Iterator[IO[str]]:
    """The dataset file (plain or gzipped) as UTF-8 text. A file that is missing, not
    readable, not gzip (``.gz``) or not UTF-8 is :class:`InvalidInput` naming it, also
    when that shows only while the ``with`` body reads it."""
    p = resolve(path)
    try:
        with (
            gzip.open(p, "rt", encoding="utf-8") if p.suffix == ".gz" else p.open(encoding="utf-8")
        ) as f:
            yield f
    except UnicodeDecodeError:
        raise not_utf8(p) from None
    except (gzip.BadGzipFile, EOFError, zlib.error):
        raise InvalidInput(
            f"{p}: not a gzip file, or a damaged one", "give the plain file, or gzip it again"
        ) from None
    except OSError as e:
        raise InvalidInput(f"{p}: cannot read ({e.strerror or e})", "check the path") from None


def read_text(path: str | Path) -> str:
    """The whole dataset file as text (errors as for :func:`open_text`)."""
    with open_text(path) as f:
        return f.read()


def no_records(path: str | Path, what: str) -> InvalidInput:
    """The error for a dataset file that holds nothing to evaluate: ``FILE holds no WHAT``."""
    return InvalidInput(f"{path} holds no {what}", "give a file that holds some")


def read_json(path: str | Path) -> Any:
    with open_text(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise InvalidInput(f"{path}: not valid JSON ({e})") from e


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise InvalidInput(f"{path}:{n}: not valid JSON ({e})") from e
            if not isinstance(obj, dict):
                raise InvalidInput(f"{path}:{n}: expected a JSON object")
            yield obj


def expect_list(obj: Any, what: str) -> list[Any]:
    if not isinstance(obj, list):
        raise InvalidInput(f"{what}: expected a JSON list, got {type(obj).__name__}")
    return obj


def mean(values: Iterable[float]) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else 0.0


def average(rows: Sequence[Mapping[str, float]], keys: Sequence[str]) -> dict[str, float]:
    """Per-key mean over ``rows`` (0.0 for an empty list)."""
    return {key: mean(r[key] for r in rows) for key in keys}
