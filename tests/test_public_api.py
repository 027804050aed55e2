"""The public API is ``kredenc.__all__``: pinned here, so changing it is a decision."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

import kredenc
from kredenc import errors, records

PUBLIC = [
    "Answer",
    "AsyncKredenc",
    "Budget",
    "CannotListen",
    "ChunkVerdict",
    "Citation",
    "Client",
    "ContextGraph",
    "CorruptLog",
    "DeadlineExceeded",
    "Evaluation",
    "FetchRefused",
    "FormatError",
    "GraphEdge",
    "GraphNode",
    "Hit",
    "Hits",
    "IndexOutdated",
    "IngestError",
    "IngestReport",
    "InvalidInput",
    "Kredenc",
    "KredencError",
    "LegScore",
    "Memory",
    "MissingExtra",
    "NotFound",
    "ProviderError",
    "ReadOnlyRecord",
    "RecallItem",
    "RecallResult",
    "SentenceSupport",
    "Step",
    "StoreClosed",
    "StoreError",
    "StoreLocked",
    "StoreReadOnly",
    "wrap",
]

# Where each name is defined: the public name is that object, not a copy.
HOMES = {
    "Kredenc": "kredenc.engine",
    "AsyncKredenc": "kredenc.aio",
    "Client": "kredenc.client",
    "wrap": "kredenc",
    "Answer": "kredenc.loop.answer",
    "ChunkVerdict": "kredenc.loop.answer",
    "Citation": "kredenc.loop.answer",
    "Step": "kredenc.loop.answer",
    "Evaluation": "kredenc.grounding.base",
    "SentenceSupport": "kredenc.grounding.base",
    "IngestReport": "kredenc.ingest.pipeline",
    "Budget": "kredenc.recall.budget",
    "RecallItem": "kredenc.recall.result",
    "RecallResult": "kredenc.recall.result",
}


def test_all_is_pinned() -> None:
    assert kredenc.__all__ == PUBLIC


def test_every_public_name_resolves_to_its_definition() -> None:
    for name in PUBLIC:
        value = getattr(kredenc, name)
        home = HOMES.get(name)
        if home is None:
            home = "kredenc.errors" if hasattr(errors, name) else "kredenc.records"
        assert value.__module__ == home, name
        assert value is getattr(sys.modules[home], name), name


def test_every_error_class_is_public() -> None:
    # A new exception in errors.py is part of the API users catch: export it.
    defined = [
        name
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, errors.KredencError)
    ]
    assert sorted(set(defined) - set(PUBLIC)) == []


def test_every_result_record_is_public() -> None:
    # What the facade hands back (memories, hits, the context graph) is public;
    # Appended (where a write landed) belongs to the Store, below the facade.
    for name in ("Memory", "Hit", "LegScore", "ContextGraph", "GraphNode", "GraphEdge"):
        assert getattr(kredenc, name) is getattr(records, name)


def test_dir_lists_the_public_names() -> None:
    listed = dir(kredenc)
    assert set(PUBLIC) <= set(listed)
    assert listed == sorted(listed)


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        getattr(kredenc, "NoSuchThing")  # noqa: B009


def _modules_after(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    loaded: list[str] = json.loads(out.stdout)
    return loaded


def test_import_kredenc_stays_light() -> None:
    loaded = _modules_after("import kredenc")
    heavy = [
        m
        for m in loaded
        if m.split(".")[0] in {"onnxruntime", "numpy", "usearch", "httpx", "tokenizers"}
        or m in {"kredenc.engine", "kredenc.storage", "kredenc.recall", "kredenc.ingest"}
        or m.startswith("kredenc.loop")
    ]
    assert heavy == []


def test_a_lazy_name_loads_its_module_on_first_use() -> None:
    # The probe above could pass by never loading anything: show that the lazy path
    # really imports the facade when it is asked for.
    loaded = _modules_after("import kredenc\nkredenc.Kredenc")
    assert "kredenc.engine" in loaded


def test_the_client_loads_without_the_store() -> None:
    # kredenc.Client talks HTTP: a program that only uses a server never loads the
    # engine, the index or a model.
    loaded = _modules_after("import kredenc\nkredenc.Client")
    assert "kredenc.client" in loaded
    assert "httpx" in loaded
    assert [m for m in loaded if m in {"kredenc.engine", "kredenc.storage.store"}] == []
    assert [m for m in loaded if m.split(".")[0] in {"onnxruntime", "usearch"}] == []
