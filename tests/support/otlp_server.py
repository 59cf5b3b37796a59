"""A real OTLP/HTTP trace collector for the tests: a threaded HTTP server on 127.0.0.1 that
decodes the protobuf payloads (``opentelemetry-proto``) the way a collector does."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Collected:
    """Every span received, as plain dicts, and the paths posted to."""

    spans: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _attributes(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


def _decode(body: bytes, into: Collected) -> None:
    request = ExportTraceServiceRequest.FromString(body)
    for resource_spans in request.resource_spans:
        into.resources.append(_attributes(resource_spans.resource.attributes))
        for scope in resource_spans.scope_spans:
            for span in scope.spans:
                into.spans.append(
                    {
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent": span.parent_span_id.hex(),
                        "name": span.name,
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                        "status": span.status.code,
                        "attributes": _attributes(span.attributes),
                    }
                )


@contextmanager
def otlp_collector() -> Iterator[tuple[str, Collected]]:
    """``(endpoint, collected)``: the base URL to give as OTEL_EXPORTER_OTLP_ENDPOINT."""
    collected = Collected()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            with lock:
                collected.paths.append(self.path)
                _decode(body, collected)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", collected
    finally:
        server.shutdown()
        server.server_close()
