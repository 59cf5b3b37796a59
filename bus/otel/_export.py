"""Sending a run's spans over OTLP/HTTP: the one module that talks to OpenTelemetry.

The OpenTelemetry SDK and its OTLP/HTTP exporter are an optional extra (``pip install
'sopbus[otel]'``). The endpoint comes from the standard variables
(``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_ENDPOINT``, headers, timeout),
read by the exporter itself, or from an explicit ``endpoint``. Trace and span ids are drawn
from the run id, so sending the same run twice gives the same trace, not a second one.
"""

from __future__ import annotations

import hashlib
import random
import socket
from collections.abc import Mapping, Sequence
from typing import Any, cast
from urllib.parse import urlsplit

from .._errors import ConfigError
from .._util import redact_url
from ._spans import Span

EXTRA_HINT = "install the OpenTelemetry extra: pip install 'sopbus[otel]'"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def wanted(flag: bool, environ: Mapping[str, str]) -> bool:
    """Whether a run exports its trace: ``--otel``, or a standard endpoint variable set."""
    return flag or any(environ.get(name) for name in ENDPOINT_VARIABLES)


def export_trace(root: Span, *, run_id: str, endpoint: str | None = None) -> tuple[int, str]:
    """Sends the span tree; returns (spans sent, where). Raises :class:`ConfigError` when the
    extra is missing and ``RuntimeError`` when the collector did not take the spans."""
    sdk = _sdk()
    exporter = _Recording(sdk.otlp(endpoint=_traces_url(endpoint)) if endpoint else sdk.otlp())
    # The exporter retries a refused connection with backoff for over a minute, per span;
    # one connect first says in seconds that no collector is there.
    why = nothing_listens(exporter.where)
    if why is not None:
        raise RuntimeError(
            f"nothing listens at the OTLP endpoint {redact_url(exporter.where)}: {why}; start "
            f"the collector, or name it with --endpoint URL (or "
            f"OTEL_EXPORTER_OTLP_ENDPOINT), such as http://127.0.0.1:4318"
        )
    provider = sdk.TracerProvider(
        resource=sdk.Resource.create({"service.name": "sopbus", "sopbus.run_id": run_id}),
        id_generator=_run_ids(run_id, sdk.IdGenerator),
    )
    # Duck-typed: _Recording is an exporter by its methods (the SDK's base class stays lazy).
    provider.add_span_processor(sdk.SimpleSpanProcessor(cast(Any, exporter)))
    tracer = provider.get_tracer("sopbus")
    _emit(tracer, sdk.trace, root, None)
    provider.shutdown()
    if exporter.failed:
        raise RuntimeError(
            f"the OTLP endpoint {exporter.where} did not accept "
            f"{exporter.failed} of {exporter.sent + exporter.failed} spans"
        )
    return exporter.sent, exporter.where


CONNECT_WAIT_S = 3.0
"""How long the connect to a collector may take: one on this machine or the next answers
in milliseconds, and ``export-otel`` must say within 5 s that none is there."""


def nothing_listens(url: str) -> str | None:
    """``None`` when a TCP connection to ``url``'s host and port opens (within
    :data:`CONNECT_WAIT_S`), else what was tried and what happened."""
    parts = urlsplit(url)
    if not parts.hostname:
        return None  # not a URL a connect can test; the exporter's own error says more
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=CONNECT_WAIT_S):
            return None
    except OSError as exc:
        said = exc.strerror or str(exc) or type(exc).__name__
        return f"a TCP connect to {parts.hostname}:{port} failed ({said})"


def _emit(tracer: Any, trace: Any, span: Span, parent: Any) -> None:
    context = trace.set_span_in_context(parent) if parent is not None else None
    live = tracer.start_span(
        span.name,
        context=context,
        start_time=_ns(span.start),
        attributes=_attributes(span.attributes),
    )
    if span.error is not None:
        live.set_status(trace.Status(trace.StatusCode.ERROR, span.error))
    for child in span.children:
        _emit(tracer, trace, child, live)
    live.end(end_time=_ns(span.end))


def _attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    # OTLP attributes are str, bool, int, float or homogeneous lists of those.
    return {
        k: (list(map(str, v)) if isinstance(v, (list, tuple)) else v)
        for k, v in values.items()
        if v is not None
    }


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def _traces_url(endpoint: str) -> str:
    """``--endpoint http://host:4318`` names the collector; OTLP/HTTP traces go to /v1/traces."""
    return (
        endpoint
        if endpoint.rstrip("/").endswith("/v1/traces")
        else endpoint.rstrip("/") + "/v1/traces"
    )


class _Sdk:
    """The OpenTelemetry names this module uses, imported once the extra is known to exist."""

    def __init__(self) -> None:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.id_generator import IdGenerator

        self.trace, self.otlp, self.Resource = trace, OTLPSpanExporter, Resource
        self.TracerProvider, self.SimpleSpanProcessor = TracerProvider, SimpleSpanProcessor
        self.IdGenerator = IdGenerator


def check_available() -> None:
    """Raises :class:`ConfigError` now (before a run starts) when the extra is missing."""
    _sdk()


def _sdk() -> _Sdk:
    try:
        return _Sdk()
    except ImportError as exc:
        raise ConfigError(
            f"exporting traces needs the OpenTelemetry SDK ({exc.name} is missing): {EXTRA_HINT}"
        ) from None


def _run_ids(run_id: str, base: type) -> Any:
    """Ids from the run id (see the module docstring); spans are made in a fixed order."""
    trace_id = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:16], "big") or 1
    draws = random.Random(run_id)

    class RunIds(base):
        def generate_trace_id(self) -> int:
            return trace_id

        def generate_span_id(self) -> int:
            return draws.getrandbits(64) or 1

        def is_trace_id_random(self) -> bool:
            return False  # derived from the run id, not drawn

    return RunIds()


class _Recording:
    """The OTLP exporter, counting what it sent and what the collector refused."""

    def __init__(self, inner: Any):
        self._inner = inner
        self.where = str(getattr(inner, "_endpoint", "the OTLP endpoint"))
        self.sent = self.failed = 0

    def export(self, spans: Sequence[Any]) -> Any:
        result = self._inner.export(spans)
        if getattr(result, "name", "") == "SUCCESS":
            self.sent += len(spans)
        else:
            self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self._inner.force_flush(timeout_millis))
