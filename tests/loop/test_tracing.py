"""Tracing: spans with their attributes reach an in-memory exporter and, over OTLP/HTTP,
a loopback collector; off, nothing is imported or recorded."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from kredenc.config import load_settings
from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, MissingExtra
from kredenc.loop.cache import cache_for, cached_search
from kredenc.loop.tool import Services
from kredenc.loop.tracing import OFF, Tracer, span, tracer_for, traces_url

pytest.importorskip("opentelemetry.sdk", reason="the 'tracing' extra is not installed")
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

OpenStore = Callable[..., Kredenc]


def _seed(kb: Kredenc) -> None:
    for text in ("attention heads: h = 8", "BLEU 28.4 on WMT 2014", "Adam with beta2 = 0.98"):
        kb.remember(text)


def test_spans_of_a_search_and_its_legs_carry_their_attributes(open_store: OpenStore) -> None:
    exporter = InMemorySpanExporter()
    tracer = Tracer(exporter=exporter)
    with open_store() as kb:
        _seed(kb)
        services = Services(
            store=kb.store, ns=kb.namespace, settings=kb.settings,
            cache=cache_for(kb.store), tracer=tracer,
        )  # fmt: skip
        with tracer.span("ask", session="s1") as ask:
            assert ask is not None
            cached_search(services, "attention heads", k=2, hops=1)
            cached_search(services, "attention heads", k=2, hops=1)
            ask.set(iterations=1)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("search") == 2
    assert {"search.lexical", "search.dense", "search.graph", "ask"} <= set(spans)
    searches = [s for s in exporter.get_finished_spans() if s.name == "search"]
    assert [s.attributes["kredenc.cache_hit"] for s in searches] == [False, True]
    assert searches[0].attributes["kredenc.hits"] == 2
    assert spans["search.dense"].attributes["kredenc.embed_ms"] >= 0
    ask_span = spans["ask"]
    assert ask_span.attributes["kredenc.session"] == "s1"
    assert ask_span.attributes["kredenc.iterations"] == 1
    # The legs are children of the first search, which is a child of the ask.
    assert searches[0].parent is not None
    assert searches[0].parent.span_id == ask_span.context.span_id
    assert spans["search.lexical"].parent.span_id == searches[0].context.span_id
    assert spans["search.lexical"].resource.attributes["service.name"] == "kredenc"


def test_an_exception_is_recorded_on_its_span() -> None:
    exporter = InMemorySpanExporter()
    tracer = Tracer(exporter=exporter)
    with pytest.raises(ValueError), tracer.span("tool.grade"):
        raise ValueError("bad chunk")
    (done,) = exporter.get_finished_spans()
    assert not done.status.is_ok
    assert done.events[0].name == "exception"


class _Collector(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    _Collector.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Collector.received
    finally:
        server.shutdown()
        server.server_close()


def test_spans_go_to_an_otlp_collector_as_protobuf(
    collector: tuple[str, list[tuple[str, str, bytes]]], tmp_path: Any
) -> None:
    url, received = collector
    settings = load_settings(tmp_path / "s", trace=True, otlp_endpoint=url)
    tracer = tracer_for(settings)
    assert tracer is tracer_for(settings)  # one provider per endpoint
    with tracer.span("ask", question_chars=12), tracer.span("tool.retrieve", k=12):
        pass
    assert tracer.flush()
    assert received, "the collector got nothing"
    path, content_type, body = received[0]
    assert path == "/v1/traces" and content_type == "application/x-protobuf"
    request = ExportTraceServiceRequest.FromString(body)
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert {s.name for s in spans} == {"ask", "tool.retrieve"}
    retrieve = next(s for s in spans if s.name == "tool.retrieve")
    attrs = {a.key: a.value.int_value for a in retrieve.attributes}
    assert attrs == {"kredenc.k": 12}


def test_off_is_the_default_and_records_nothing(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(tmp_path / "s")
    assert tracer_for(settings) is OFF and not OFF.enabled
    with OFF.span("ask", x=1) as handle, span(None, "tool.x") as other:
        assert handle is None and other is None
    from kredenc.testing.embedders import HashEmbedder

    opened: list[str] = []
    real = Tracer.span

    def counted(self: Tracer, name: str, **attrs: Any) -> Any:
        opened.append(name)
        return real(self, name, **attrs)

    monkeypatch.setattr(Tracer, "span", counted)
    with Kredenc.open(tmp_path / "store", embedder=HashEmbedder(), durability="none") as kb:
        kb.remember("the heron nests by the mill pond")
        got = kb.ask("where does the heron nest?", file=False)
    assert got.trace and opened == []  # off: the ask's tools open no span object at all


def test_trace_without_an_endpoint_or_the_extra_says_what_to_do(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    with pytest.raises(InvalidInput, match="no OTLP endpoint"):
        tracer_for(load_settings(tmp_path / "s", trace=True))
    with pytest.raises(InvalidInput, match="not an http"):
        traces_url("localhost:4318")
    assert traces_url("http://h:4318/") == "http://h:4318/v1/traces"
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if not installed
    with pytest.raises(MissingExtra) as err:
        Tracer(exporter=object())
    assert "kredenc[tracing]" in (err.value.hint or "")


def test_an_ask_traces_every_tool_and_the_search_legs_under_one_root(
    open_store: OpenStore,
) -> None:
    from kredenc.loop.ask import ask

    exporter = InMemorySpanExporter()
    tracer = Tracer(exporter=exporter)
    with open_store() as kb:
        _seed(kb)
        ask(
            kb.store,
            kb.namespace,
            "How many attention heads?",
            cache=cache_for(kb.store),
            tracer=tracer,
        )
    spans = exporter.get_finished_spans()
    by_name = {s.name: s for s in spans}
    roots = [s for s in spans if s.parent is None]
    assert [r.name for r in roots] == ["ask"]
    tools = {s.name for s in spans if s.name.startswith("tool.")}
    assert {"tool.decide", "tool.retrieve", "tool.grade", "tool.generate", "tool.judge"} <= tools
    ids = {s.context.span_id: s.name for s in spans}
    searches = [s for s in spans if s.name == "search"]
    assert ids[searches[0].parent.span_id] == "tool.retrieve"  # verify searches too
    legs = [s for s in spans if s.name.startswith("search.")]
    assert legs and all(ids[leg.parent.span_id] == "search" for leg in legs)
    assert by_name["tool.retrieve"].attributes["kredenc.status"] == "ok"
