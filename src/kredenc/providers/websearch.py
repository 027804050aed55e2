"""Web search over a SearxNG-compatible JSON API: ``GET {url}/search?q=...&format=json``.

A provider like the embedders: an outside service behind one small class, on the
shared HTTP client (:mod:`kredenc.providers.openai_compat`: URL checks, time limits,
retries, every failure one ``ProviderError`` with a hint). The reply's
``results: [{url, title, content}, ...]`` become :class:`WebResult`\\ s. What a web
page says is untrusted data: callers put it in prompts only inside the data envelope.

Off unless the ``web_search_url`` setting is set (:meth:`WebSearch.from_settings`
returns None then). Nothing else in kredenc reaches the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.openai_compat import OpenAICompatClient

_HINTS = {
    403: "enable the json format on the search server (SearxNG: search.formats in settings.yml)",
    429: "the search server limits requests: wait, or raise its limiter",
}
_FORMAT = "is web_search_url a SearxNG-compatible server with the json format enabled?"
MAX_QUERY_CHARS = 400


@dataclass(frozen=True)
class WebResult:
    url: str
    title: str
    content: str


class WebSearch:
    """One search server. ``max_results``: results kept per query, best first."""

    def __init__(self, base_url: str, *, timeout: float = 10.0, max_results: int = 5) -> None:
        if max_results < 1:
            raise InvalidInput(f"max_results must be at least 1, got {max_results}")
        self.max_results = max_results
        self._client = OpenAICompatClient(
            base_url,
            label="web search",
            timeout=timeout,
            hints=_HINTS,
            timeout_hint="raise web_search_timeout_s, or check the search server",
            max_retries=1,
        )

    @classmethod
    def from_settings(cls, settings: Any) -> WebSearch | None:
        url = str(getattr(settings, "web_search_url", "") or "").strip()
        if not url:
            return None
        return cls(
            url,
            timeout=float(settings.web_search_timeout_s),
            max_results=int(settings.web_search_results),
        )

    def describe(self) -> str:
        return f"web search {self._client.shown_url}"

    def search(self, query: str) -> list[WebResult]:
        """The first results for ``query`` (cut to :data:`MAX_QUERY_CHARS`)."""
        query = " ".join(str(query).split())[:MAX_QUERY_CHARS]
        if not query:
            raise InvalidInput("web search query is empty", "search for some words")
        reply = self._client.get_json(
            "/search", {"q": query, "format": "json"}, format_hint=_FORMAT
        )
        results = reply.get("results") if isinstance(reply, dict) else None
        if not isinstance(results, list):
            raise ProviderError(
                f"web search {self._client.url('/search')}: the reply has no 'results' list",
                _FORMAT,
            )
        out: list[WebResult] = []
        for item in results:
            if not isinstance(item, dict) or not isinstance(item.get("url"), str):
                continue
            content = str(item.get("content") or "").strip()
            title = str(item.get("title") or "").strip()
            if content or title:
                out.append(WebResult(item["url"], title, content))
            if len(out) == self.max_results:
                break
        return out

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> WebSearch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
