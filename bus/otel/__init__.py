"""Traces for Jaeger, Langfuse, Phoenix and other OpenTelemetry tools: a run as spans (run,
rounds, turns, LLM calls with the GenAI attributes, cost and budget), sent over OTLP/HTTP.
The SDK is the optional extra ``sopbus[otel]``; building the spans needs nothing extra."""

from ._export import check_available as check_available
from ._export import export_trace as export_trace
from ._export import wanted as wanted
from ._spans import Span as Span
from ._spans import run_trace as run_trace

__all__ = [
    "Span",
    "check_available",
    "export_trace",
    "run_trace",
    "wanted",
]
