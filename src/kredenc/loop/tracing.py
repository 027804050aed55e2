"""OpenTelemetry spans for the answer loop: the ask, each tool, each provider call and
each search leg, exported over OTLP/HTTP (Langfuse, Jaeger, Tempo... accept it).

Off by default and free when off: a disabled :class:`Tracer`'s :meth:`~Tracer.span`
hands back one shared no-op context manager (no OpenTelemetry import, no allocation
beyond the call's keyword dict; ``benchmarks/bench_ask.py`` measures it). Turned on
(``trace = true``) it needs the ``tracing`` extra, imported only then; without it
the error names the extra.

The tracer has its own ``TracerProvider``: kredenc never installs a global one, so a
host application's tracing is left as it was. Spans go to ``otlp_endpoint`` (a base
URL such as ``http://localhost:4318``; ``/v1/traces`` is added) or, when that is
empty, wherever ``OTEL_EXPORTER_OTLP_ENDPOINT`` points; headers (a Langfuse key)
come from ``OTEL_EXPORTER_OTLP_HEADERS`` as the exporter reads them. Tests pass
their own exporter (``in_memory_span_exporter``).

Span names: ``ask``, ``tool.<name>``, ``llm.complete``, ``judge``, ``search`` and its
legs ``search.lexical``, ``search.dense``, ``search.graph``, ``search.rerank``.
Attributes are prefixed ``kredenc.`` (values other than str, bool, int and float are
written as their ``str``).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from kredenc.errors import InvalidInput, MissingExtra

PREFIX = "kredenc."
TRACES_PATH = "/v1/traces"


class _NoSpan:
    """The disabled span: a context manager that yields None and does nothing."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = _NoSpan()


class SpanHandle:
    """The open span a ``with tracer.span(...) as s`` hands out: ``s.set(k=v)``."""

    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span

    def set(self, **attrs: Any) -> None:
        for key, value in attrs.items():
            self._span.set_attribute(PREFIX + key, _attr(value))


class Tracer:
    """``span(name, **attrs)`` around each step. ``Tracer()`` is off; use
    :func:`tracer_for` (settings) or pass an exporter (tests)."""

    def __init__(self, *, exporter: Any = None, endpoint: str | None = None) -> None:
        """Off unless ``exporter`` (an OpenTelemetry ``SpanExporter``, e.g. the in-memory
        one; spans go to it as each ends) or ``endpoint`` (OTLP/HTTP, batched) is given:
        ``endpoint=""`` means ``OTEL_EXPORTER_OTLP_ENDPOINT``."""
        self.enabled = exporter is not None or endpoint is not None
        self._provider: Any = None
        self._tracer: Any = None
        if self.enabled:
            self._start(exporter, endpoint)

    def _start(self, exporter: Any, endpoint: str | None) -> None:
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        except ImportError:
            raise MissingExtra("tracing (trace = true)", "tracing") from None
        provider = TracerProvider(resource=Resource.create({"service.name": "kredenc"}))
        if exporter is not None:
            provider.add_span_processor(SimpleSpanProcessor(exporter))
        if endpoint is not None:
            provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(endpoint)))
        self._provider = provider
        self._tracer = provider.get_tracer("kredenc")
        # Spans still queued are sent when the tracer goes (or the process exits).
        weakref.finalize(self, provider.shutdown)

    def span(self, name: str, **attrs: Any) -> AbstractContextManager[SpanHandle | None]:
        """A span named ``name`` with ``attrs`` (``kredenc.<key>``) around the block; it
        records an exception that leaves the block. Off: a shared no-op."""
        if self._tracer is None:
            return _NO_SPAN
        return self._span(name, attrs)

    @contextmanager
    def _span(self, name: str, attrs: dict[str, Any]) -> Iterator[SpanHandle]:
        with self._tracer.start_as_current_span(
            name, attributes={PREFIX + k: _attr(v) for k, v in attrs.items()}
        ) as span:
            yield SpanHandle(span)

    def flush(self, timeout_ms: int = 5000) -> bool:
        """Send the spans still queued; whether it finished in time."""
        if self._provider is None:
            return True
        return bool(self._provider.force_flush(timeout_ms))

    def close(self) -> None:
        """Flush and stop the exporters."""
        if self._provider is not None:
            self._provider.shutdown()
            self._provider = None
            self._tracer = None


OFF = Tracer()


def span(tracer: Tracer | None, name: str, **attrs: Any) -> AbstractContextManager[Any]:
    """``tracer.span(name, **attrs)``, or the no-op when ``tracer`` is None (what
    ``Services.tracer`` may be)."""
    if tracer is None:
        return _NO_SPAN
    return tracer.span(name, **attrs)


_TRACERS: dict[str, Tracer] = {}
_TRACERS_LOCK = threading.Lock()


def tracer_for(settings: Any) -> Tracer:
    """The tracer the settings ask for: :data:`OFF` unless ``trace``; then OTLP/HTTP to
    ``otlp_endpoint`` (or ``OTEL_EXPORTER_OTLP_ENDPOINT``), one per endpoint for the
    life of the process (its exporter thread batches the spans)."""
    if not settings.trace:
        return OFF
    endpoint = str(settings.otlp_endpoint or "")
    if not endpoint and not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        raise InvalidInput(
            "trace = true but no OTLP endpoint is set",
            "set otlp_endpoint (KREDENC_OTLP_ENDPOINT, e.g. http://localhost:4318) "
            "or OTEL_EXPORTER_OTLP_ENDPOINT",
        )
    if endpoint:
        traces_url(endpoint)  # a bad URL fails here, with its hint
    with _TRACERS_LOCK:
        found = _TRACERS.get(endpoint)
        if found is None:
            found = _TRACERS[endpoint] = Tracer(endpoint=endpoint)
        return found


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL for a collector's base URL (kept when it names the path)."""
    url = endpoint.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise InvalidInput(
            f"otlp_endpoint {endpoint!r} is not an http(s) URL",
            "give the collector's base URL, e.g. http://localhost:4318",
        )
    return url if url.endswith(TRACES_PATH) else url + TRACES_PATH


def _otlp_exporter(endpoint: str) -> Any:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise MissingExtra("tracing over OTLP (trace = true)", "tracing") from None
    if endpoint:
        return OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=10)
    return OTLPSpanExporter(timeout=10)


def _attr(value: Any) -> str | bool | int | float:
    if isinstance(value, str | bool | int | float):
        return value
    return str(value)
