"""A model the user keeps in a local folder: where its files are, what they say about
pooling and length, a content hash for its model id, and its onnxruntime session.

Two layouts are read: an ONNX export (``model.onnx`` + ``tokenizer.json``, what
``optimum`` writes) and a sentence-transformers folder, whose ``onnx/model.onnx`` is
used and whose ``1_Pooling/config.json`` and ``sentence_bert_config.json`` set the
pooling and the length. Asked for its int8 copy (``quantized``: the cross-encoder's
``rerank_quantized`` setting), a folder gives :data:`QUANTIZED` beside its
``model.onnx`` when it has one (the name optimum's quantizer writes), else
``model.onnx``. Nothing is downloaded; a folder that lacks a file is one
:class:`~kredenc.errors.InvalidInput` line that names the file and the fix.

The ONNX embedder (``embed/onnx.py``) and the ONNX cross-encoder (``rerank/onnx.py``)
are built on :class:`OnnxModel`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.onnx_runtime import POOLINGS, Floats, IdArray, open_session, pad

#: The sentence-transformers Pooling config's flags, in the order it applies them.
_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
    "pooling_mode_lasttoken": "lasttoken",
}
_EXPORT = (
    "export one with optimum (optimum-cli export onnx --model NAME DIR) or point at a "
    "sentence-transformers folder that has onnx/model.onnx"
)
#: Files that change what a folder's model computes: hashed into its model id.
_DEFINING = (
    "tokenizer.json",
    "1_Pooling/config.json",
    "sentence_bert_config.json",
    "modules.json",
    "config.json",
)
_HASH_BLOCK = 1 << 20
#: A folder's int8 copy of its graph, beside ``model.onnx`` (optimum's name).
QUANTIZED = "model_quantized.onnx"


@dataclass(frozen=True)
class ModelFolder:
    """The files of one local model folder (see the module doc)."""

    root: Path
    model: Path
    tokenizer: Path

    @classmethod
    def find(cls, path: Path | str | None, *, setting: str, quantized: bool = False) -> ModelFolder:
        """The folder at ``path`` (``setting``: the setting that named it, for messages);
        with ``quantized`` its :data:`QUANTIZED` graph where it has one."""
        if path is None or not str(path).strip():
            raise InvalidInput(
                f"no model folder is configured ({setting} is empty)",
                f"set {setting} to a local folder holding model.onnx and tokenizer.json",
            )
        root = Path(path).expanduser()
        if not root.is_dir():
            raise InvalidInput(
                f"model folder {root} does not exist or is not a folder",
                f"set {setting} to a local folder holding model.onnx and tokenizer.json",
            )
        root = root.resolve()
        model = next(
            (p for p in (root / "model.onnx", root / "onnx" / "model.onnx") if p.is_file()), None
        )
        if model is None:
            raise InvalidInput(f"{root} holds no model.onnx (nor onnx/model.onnx)", _EXPORT)
        if quantized and (model.parent / QUANTIZED).is_file():
            model = model.parent / QUANTIZED
        tokenizer = next(
            (
                d / "tokenizer.json"
                for d in (model.parent, root)
                if (d / "tokenizer.json").is_file()
            ),
            None,
        )
        if tokenizer is None:
            raise InvalidInput(
                f"{root} holds no tokenizer.json beside its model.onnx",
                "save the model's fast tokenizer there (tokenizer.save_pretrained(DIR))",
            )
        return cls(root, model, tokenizer)

    def read_json(self, name: str) -> dict[str, Any] | None:
        """A JSON file of the folder (``1_Pooling/config.json``, ...), or None."""
        path = self.root / name
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInput(
                f"{path} is not readable JSON: {exc}", "repair or remove it"
            ) from None
        if not isinstance(data, dict):
            raise InvalidInput(f"{path} is not a JSON object", "repair or remove it")
        return data

    def pooling(self) -> str:
        """The pooling mode from ``1_Pooling/config.json`` (``mean`` without one)."""
        config = self.read_json("1_Pooling/config.json")
        if config is None:
            return "mean"
        modes = [mode for key, mode in _POOLING_KEYS.items() if config.get(key)]
        unknown = [
            k
            for k, v in config.items()
            if k.startswith("pooling_mode_") and v and k not in _POOLING_KEYS
        ]
        if unknown or len(modes) > 1:
            raise InvalidInput(
                f"{self.root}/1_Pooling/config.json asks for pooling {', '.join(unknown or modes)}",
                f"kredenc pools by one of {', '.join(POOLINGS)}; use the sentence-transformers "
                "embedder for this model (embed_provider = 'sentence-transformers')",
            )
        return modes[0] if modes else "mean"

    def refuse_extra_modules(self) -> None:
        """Refuse a sentence-transformers folder whose pipeline has layers after pooling
        that the ONNX graph does not hold (Dense, ...): its vectors would be wrong."""
        modules = self.read_json_list("modules.json")
        extra = [
            str(m.get("type", "")).rsplit(".", 1)[-1]
            for m in modules
            if str(m.get("type", "")).rsplit(".", 1)[-1]
            not in ("Transformer", "Pooling", "Normalize")
        ]
        if extra:
            raise InvalidInput(
                f"{self.root} has sentence-transformers modules the ONNX graph lacks: "
                f"{', '.join(extra)}",
                "use embed_provider = 'sentence-transformers' for this folder",
            )

    def read_json_list(self, name: str) -> list[dict[str, Any]]:
        path = self.root / name
        if not path.is_file():
            return []
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInput(
                f"{path} is not readable JSON: {exc}", "repair or remove it"
            ) from None
        return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []

    def max_tokens(self, default: int = 512) -> int:
        """Word pieces per input: ``sentence_bert_config.json``'s ``max_seq_length``,
        else the tokenizer's truncation, else ``default``."""
        sbert = self.read_json("sentence_bert_config.json") or {}
        if isinstance(sbert.get("max_seq_length"), int) and sbert["max_seq_length"] > 1:
            return int(sbert["max_seq_length"])
        try:
            tok = json.loads(self.tokenizer.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return default
        trunc = tok.get("truncation") if isinstance(tok, dict) else None
        length = trunc.get("max_length") if isinstance(trunc, dict) else None
        return int(length) if isinstance(length, int) and length > 1 else default

    def dim_hint(self) -> int | None:
        """The vector size the folder's configs state, if any."""
        pooling = self.read_json("1_Pooling/config.json") or {}
        config = self.read_json("config.json") or {}
        for value in (pooling.get("word_embedding_dimension"), config.get("hidden_size")):
            if isinstance(value, int) and value > 0:
                return value
        return None

    def files(self) -> list[Path]:
        """The files that define what the model computes (hashed for its id)."""
        found = [self.model, self.tokenizer]
        data = self.model.with_name(self.model.name + "_data")
        if data.is_file():
            found.append(data)
        found += [self.root / n for n in _DEFINING if (self.root / n).is_file()]
        return list(dict.fromkeys(found))

    def content_hash(self) -> str:
        """SHA-256 over the defining files' names (relative) and bytes, hex."""
        return content_hash(self.root, tuple(self.files()))

    def model_id(self, kind: str) -> str:
        """``kind:<folder name>@<16 hex of the content hash>``: a new export of the
        model (other weights, tokenizer or pooling) is another model to a store."""
        return f"{kind}:{self.root.name}@{self.content_hash()[:16]}"


def content_hash(root: Path, files: Iterable[Path]) -> str:
    """SHA-256 over ``files`` (names relative to ``root``, then bytes), remembered per
    process by path, size and mtime (a store opens with it; a large model reads once)."""
    stamped = tuple((p, *_stamp(p)) for p in sorted(files))
    return _hash(root, stamped)


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


@cache
def _hash(root: Path, stamped: tuple[tuple[Path, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for path, size, _ in stamped:
        digest.update(f"{path.relative_to(root).as_posix()}\0{size}\0".encode())
        with path.open("rb") as fh:
            while block := fh.read(_HASH_BLOCK):
                digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Batch:
    """One padded batch: ids, attention mask and token types (zeros for one text)."""

    ids: IdArray
    mask: IdArray
    types: IdArray


class OnnxModel:
    """A folder's graph and tokenizer, loaded on first use; thread-safe.

    ``what`` names the model in messages ("the ONNX embedder", ...).
    """

    def __init__(self, folder: ModelFolder, *, threads: int, max_tokens: int, what: str) -> None:
        self.folder = folder
        self.threads = threads
        self.max_tokens = max_tokens
        self.what = what
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any, frozenset[str], tuple[type[BaseException], ...]] | None = None

    def _load(self) -> tuple[Any, Any, frozenset[str], tuple[type[BaseException], ...]]:
        loaded = self._loaded
        if loaded is not None:
            return loaded
        with self._lock:
            if self._loaded is None:
                hint = f"check the files in {self.folder.root} ({_EXPORT})"
                session, errors = open_session(
                    self.folder.model, self.threads, what=self.what, hint=hint
                )
                try:
                    from tokenizers import Tokenizer

                    tokenizer = Tokenizer.from_file(str(self.folder.tokenizer))
                except ImportError as exc:
                    raise ProviderError(f"{self.what} needs tokenizers: {exc}", hint) from exc
                except Exception as exc:  # noqa: BLE001 (tokenizers raises a bare Exception)
                    raise InvalidInput(
                        f"{self.folder.tokenizer} is not a tokenizers file: {exc}".splitlines()[0],
                        "save the model's fast tokenizer there (tokenizer.save_pretrained(DIR))",
                    ) from None
                tokenizer.no_padding()
                tokenizer.enable_truncation(max_length=self.max_tokens)
                inputs = frozenset(i.name for i in session.get_inputs())
                if not {"input_ids", "attention_mask"} <= inputs:
                    raise InvalidInput(
                        f"{self.folder.model} takes inputs {sorted(inputs)}, not input_ids and "
                        "attention_mask",
                        _EXPORT,
                    )
                self._loaded = (session, tokenizer, inputs, errors)
            return self._loaded

    @property
    def session(self) -> Any:
        return self._load()[0]

    def outputs(self) -> list[tuple[str, list[Any]]]:
        """The graph's outputs: (name, shape) with symbolic sizes as strings."""
        return [(str(o.name), list(o.shape)) for o in self.session.get_outputs()]

    def batches(
        self, items: Sequence[str | tuple[str, str]], batch_size: int
    ) -> Iterable[tuple[IdArray, Batch]]:
        """``items`` (texts, or pairs for a cross-encoder) tokenized, sorted by length and
        cut into padded batches: (rows of ``items`` in the batch, the batch)."""
        _, tokenizer, _, _ = self._load()
        encodings = tokenizer.encode_batch(list(items), add_special_tokens=True)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            width = max(1, int(lengths[rows].max()))
            ids, mask = pad([encodings[i].ids for i in rows], width)
            types, _ = pad([encodings[i].type_ids for i in rows], width)
            yield rows, Batch(ids, mask, types)

    def run(self, output: str, batch: Batch) -> Floats:
        """The graph's ``output`` for ``batch`` (float32)."""
        session, _, inputs, errors = self._load()
        feed = {"input_ids": batch.ids, "attention_mask": batch.mask}
        if "token_type_ids" in inputs:
            feed["token_type_ids"] = batch.types
        try:
            (value,) = session.run([output], feed)
        except errors as exc:
            raise ProviderError(
                f"{self.what} ({self.folder.root}) failed: {exc}".splitlines()[0],
                "check that the folder's tokenizer.json belongs to its model.onnx",
            ) from exc
        out: Floats = np.asarray(value, dtype=np.float32)
        return out
