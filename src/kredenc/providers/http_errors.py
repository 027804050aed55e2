"""One reading of an OpenAI-compatible server's error reply, for every HTTP provider."""

from __future__ import annotations

import json

import httpx


def server_message(response: httpx.Response) -> str:
    """The server's own error message: OpenAI's ``error.message`` or a text snippet."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return snippet(response.text) or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            return snippet(error if isinstance(error, str) else json.dumps(error))
    return snippet(response.text)


def one_line(text: str) -> str:
    return " ".join(text.split())


def snippet(text: str, limit: int = 200) -> str:
    line = one_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"
