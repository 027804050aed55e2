"""The SearxNG-compatible web search client against a recorded reply on loopback."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from kredenc.config import Settings
from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.websearch import WebSearch
from kredenc.testing.openai_server import LoopbackServer, Reply, Request

REPLY = json.loads(
    (Path(__file__).parents[1] / "fixtures/websearch/searxng_eiffel.json").read_text()
)


def _root(server: LoopbackServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def test_results_come_back_parsed_and_the_query_is_sent_as_asked() -> None:
    with LoopbackServer() as server:
        server.route("GET", "/search", lambda _r: Reply.json(REPLY))
        with WebSearch(_root(server), max_results=5) as web:
            results = web.search("  How tall is   the Eiffel Tower? ")
        (request,) = server.requests
    query = parse_qs(urlsplit(request.path).query)
    assert query == {"q": ["How tall is the Eiffel Tower?"], "format": ["json"]}
    assert [r.url for r in results] == [
        "https://en.wikipedia.org/wiki/Eiffel_Tower",
        "https://www.toureiffel.paris/en/the-monument/key-figures",
    ]  # no url, or neither title nor content: left out
    assert "330 metres" in results[0].content and results[0].title.startswith("Eiffel")


def test_max_results_cuts_the_list() -> None:
    with LoopbackServer() as server:
        server.route("GET", "/search", lambda _r: Reply.json(REPLY))
        with WebSearch(_root(server), max_results=1) as web:
            assert len(web.search("eiffel")) == 1


def test_off_unless_a_url_is_set() -> None:
    assert WebSearch.from_settings(Settings()) is None
    web = WebSearch.from_settings(
        Settings(web_search_url="http://127.0.0.1:9", web_search_results=3)
    )
    assert web is not None and web.max_results == 3
    web.close()


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply.raw("<html>forbidden</html>", 403, "text/html"), "json format"),
        (Reply.raw("<html>ok</html>", 200, "text/html"), "SearxNG-compatible"),
        (Reply.json({"query": "x"}), "no 'results' list"),
    ],
)
def test_a_bad_server_is_one_line_with_a_hint(reply: Reply, expected: str) -> None:
    def route(_r: Request) -> Reply:
        return reply

    with LoopbackServer() as server:
        server.route("GET", "/search", route)
        with WebSearch(_root(server)) as web, pytest.raises(ProviderError) as info:
            web.search("eiffel")
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_bad_input_is_refused() -> None:
    with pytest.raises(InvalidInput, match="http:// or https://"):
        WebSearch("searx.local")
    with WebSearch("http://127.0.0.1:9") as web, pytest.raises(InvalidInput, match="empty"):
        web.search("   ")
