"""Speech to text: the seam, and a client for any OpenAI-compatible
``/audio/transcriptions`` endpoint (OpenAI, faster-whisper servers such as speaches,
whisper.cpp's server, LocalAI, vLLM). The wire (auth, time limits, retries, error
mapping) is :mod:`kredenc.providers.openai_compat`'s; this module keeps the request
shape and the parsing of the reply.

The request is OpenAI's: ``POST {base_url}/audio/transcriptions`` as
``multipart/form-data`` with ``file``, ``model`` and ``response_format=verbose_json``,
which answers with the text and its *segments*, each with start and end times, so
a chunk of a transcript can cite the moment it was said. A server that answers
without segments (plain ``json`` or ``text``) still gives the text, as one segment
starting at 0.
"""

from __future__ import annotations

import json
import logging
import mimetypes
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
from pydantic import SecretStr

from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.openai_compat import FORMAT_HINT, OpenAICompatClient

log = logging.getLogger(__name__)

PATH = "/audio/transcriptions"
_HINTS = {
    400: "check the model name and that the file is audio the server can decode",
    413: "the file is too large for the server: cut or compress the audio",
    415: "the server does not read this audio format: convert it (e.g. to mp3 or wav)",
}


@dataclass(frozen=True)
class Segment:
    """A stretch of speech: seconds from the start of the audio, and what was said."""

    start_s: float
    end_s: float
    text: str


@dataclass(frozen=True)
class Transcription:
    """What was said in one audio file; ``language`` as the server names it."""

    text: str
    segments: tuple[Segment, ...]
    language: str | None = None
    duration_s: float | None = None


class Transcriber(ABC):
    """Turns a local audio file into timed text."""

    #: Stable id of the model behind the transcriber, stored with what it produced.
    model_id: str

    @abstractmethod
    def transcribe(self, audio: str | Path) -> Transcription:
        """Transcribe ``audio``; raises :class:`~kredenc.errors.ProviderError` on failure."""


class OpenAITranscriber(Transcriber):
    """``POST {base_url}/audio/transcriptions`` with ``response_format=verbose_json``.

    ``language`` (an ISO-639-1 code) is passed on as a hint when given. Call
    :meth:`close` when done, or use the transcriber as a context manager.
    """

    def __init__(
        self,
        base_url: str,
        model: str = "whisper-1",
        *,
        api_key: str | SecretStr | None = None,
        language: str | None = None,
        timeout: float = 600.0,
        max_retries: int = 2,
    ) -> None:
        if not model:
            raise InvalidInput("model must be a non-empty model name", "e.g. whisper-1")
        if timeout <= 0:
            raise InvalidInput(f"timeout must be positive, got {timeout}")
        self._http = OpenAICompatClient(
            base_url,
            api_key=api_key,
            label="speech-to-text endpoint",
            timeout=timeout,
            hints=_HINTS,
            timeout_hint="raise the timeout for long audio",
            max_retries=max_retries,
        )
        self.url = self._http.url(PATH)
        self.model = model
        self.model_id = f"openai:{model}"
        self.language = language
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"OpenAITranscriber(url={self.url!r}, model={self.model!r})"

    def transcribe(self, audio: str | Path) -> Transcription:
        path = Path(audio)
        if not path.is_file():
            raise InvalidInput(f"{path}: no such audio file", "check the path to the audio")
        fields = {"model": self.model, "response_format": "verbose_json"}
        if self.language:
            fields["language"] = self.language
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        log.info("transcribing %s with %s at %s", path, self.model, self.url)
        try:
            with path.open("rb") as handle:
                # A transcription is safe to repeat; the client re-reads the file on a retry.
                response = self._http.post(
                    PATH,
                    data=fields,
                    files={"file": (path.name, handle, mime)},
                    safe_to_repeat=True,
                )
        except OSError as exc:
            raise InvalidInput(f"{path}: cannot read audio file: {exc.strerror or exc}") from exc
        return self._parse(response)

    def _parse(self, response: httpx.Response) -> Transcription:
        try:
            body: Any = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            text = response.text.strip()  # response_format ignored: plain text
            if not text:
                raise self._fail("empty response", FORMAT_HINT) from None
            return Transcription(text=text, segments=(Segment(0.0, 0.0, text),))
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            raise self._fail("response has no 'text'", FORMAT_HINT)
        text = body["text"].strip()
        duration = _number(body.get("duration"))
        segments = tuple(_segments(body.get("segments")))
        if not segments and text:
            log.warning("%s answered without segments; the transcript has no timestamps", self.url)
            segments = (Segment(0.0, duration or 0.0, text),)
        language = body.get("language")
        return Transcription(
            text=text,
            segments=segments,
            language=language if isinstance(language, str) and language else None,
            duration_s=duration,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> OpenAITranscriber:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _fail(self, what: str, hint: str) -> ProviderError:
        return self._http.fail(PATH, what, hint)


def _segments(raw: Any) -> list[Segment]:
    if not isinstance(raw, list):
        return []
    segments: list[Segment] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        start, end, text = _number(item.get("start")), _number(item.get("end")), item.get("text")
        if start is None or not isinstance(text, str) or not text.strip():
            continue
        segments.append(Segment(start, end if end is not None else start, " ".join(text.split())))
    return segments


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


__all__ = ["OpenAITranscriber", "Segment", "Transcriber", "Transcription"]
