"""Span descriptions -> OpenTelemetry: the SDK's spans, OTLP/JSON lines, OTLP/HTTP.

The one place that imports the OpenTelemetry SDK (the optional extra ``export``: pip
install 'acp-pipes[export]'). The spans of :mod:`acp_pipes.export.spans` become the
SDK's ``ReadableSpan`` with their own IDs and times (a recording is exported after the
fact: no tracer, no clock), encoded by the OTLP exporter's own encoder; so the protobuf
sent to a collector and the JSON written to a file are one encoding of the same spans.

OTLP/JSON is the format of the OpenTelemetry collector's file exporter and receiver:
one ``ExportTraceServiceRequest`` a line, in the protobuf JSON mapping except that
trace and span IDs are hex strings, not base64, and enums are numbers.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

import orjson

from acp_pipes import __version__
from acp_pipes.errors import UsageError
from acp_pipes.export.spans import Span
from acp_pipes.output import OutputError

__all__ = ["MISSING", "Encoder", "Sender", "require_sdk"]

MISSING = ("the OpenTelemetry SDK is not installed (acp-export otlp needs it): "
           "pip install 'acp-pipes[export]'")

SCOPE = "acp-pipes.acp-export"


def require_sdk() -> None:
    """A UsageError naming the extra to install when the SDK is missing."""
    try:
        import opentelemetry.exporter.otlp.proto.common.trace_encoder  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise UsageError(MISSING) from None


class Encoder:
    """Span descriptions -> the SDK's ReadableSpans -> OTLP protobuf or OTLP/JSON."""

    def __init__(self) -> None:
        require_sdk()
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode

        self._t = trace
        self._encode = encode_spans
        self._Resource, self._Event, self._Readable = Resource, Event, ReadableSpan
        self._Link, self._Context, self._Status = Link, SpanContext, Status
        self._kinds = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
        self._codes = {"unset": StatusCode.UNSET, "ok": StatusCode.OK,
                       "error": StatusCode.ERROR}
        self._flags = trace.TraceFlags(trace.TraceFlags.SAMPLED)
        self._scope = InstrumentationScope(SCOPE, __version__)
        self._resources: dict[tuple, Any] = {}

    def resource(self, attrs: dict[str, Any]) -> Any:
        key = tuple(sorted(attrs.items()))
        got = self._resources.get(key)
        if got is None:
            if len(self._resources) > 1024:
                self._resources.clear()
            got = self._resources[key] = self._Resource(attrs)
        return got

    def readable(self, spans: Iterable[Span], resource: dict[str, Any]) -> list[Any]:
        res = self.resource(resource)
        Ctx, flags = self._Context, self._flags
        out = []
        for s in spans:
            parent = (Ctx(s.trace_id, s.parent_id, is_remote=s.parent_remote,
                          trace_flags=flags) if s.parent_id is not None else None)
            status = (self._Status(self._codes[s.status], s.status_message)
                      if s.status == "error" else self._Status(self._codes[s.status]))
            out.append(self._Readable(
                name=s.name,
                context=Ctx(s.trace_id, s.span_id, is_remote=False, trace_flags=flags),
                parent=parent, resource=res, attributes=s.attributes,
                events=[self._Event(e.name, e.attributes, e.time) for e in s.events],
                links=[self._Link(Ctx(k.trace_id, k.span_id, is_remote=False,
                                      trace_flags=flags), k.attributes) for k in s.links],
                kind=self._kinds[s.kind], status=status, start_time=s.start,
                end_time=s.end, instrumentation_scope=self._scope))
        return out

    def protobuf(self, readable: list[Any]) -> Any:
        return self._encode(readable)

    def json_line(self, readable: list[Any]) -> bytes:
        """One OTLP/JSON line (LF-terminated) holding ``readable``."""
        from google.protobuf.json_format import MessageToDict

        doc = MessageToDict(self._encode(readable), use_integers_for_enums=True)
        for rs in doc.get("resourceSpans", ()):
            for ss in rs.get("scopeSpans", ()):
                for span in ss.get("spans", ()):
                    _hex_ids(span)
                    for link in span.get("links", ()):
                        _hex_ids(link)
        return orjson.dumps(doc, option=orjson.OPT_APPEND_NEWLINE)


def _hex_ids(obj: dict) -> None:
    for key in ("traceId", "spanId", "parentSpanId"):
        v = obj.get(key)
        if v:
            obj[key] = base64.b64decode(v).hex()


class Sender:
    """OTLP/HTTP (protobuf) to a collector's traces endpoint, through the SDK's own
    exporter (its retries, its timeout); a batch it cannot deliver is an OutputError
    naming the endpoint."""

    def __init__(self, endpoint: str, timeout: float = 10.0,
                 headers: dict[str, str] | None = None):
        require_sdk()
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,
            )
        except ImportError:
            raise UsageError(MISSING) from None
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.endpoint = endpoint
        self._ok = SpanExportResult.SUCCESS
        self._exporter = OTLPSpanExporter(endpoint=endpoint, timeout=timeout,
                                          headers=headers)
        self.sent = 0

    def send(self, readable: list[Any]) -> None:
        import logging

        # the exporter logs its failures itself (with a traceback): say it once, here
        logging.getLogger("opentelemetry.exporter.otlp.proto.http").setLevel(logging.CRITICAL)
        logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter").setLevel(
            logging.CRITICAL)
        if self._exporter.export(readable) != self._ok:
            raise OutputError(f"{self.endpoint}: the collector did not take the spans "
                              f"({self.sent} sent before)")
        self.sent += len(readable)

    def close(self) -> None:
        self._exporter.shutdown()
