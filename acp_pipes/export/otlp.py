"""Span descriptions -> OpenTelemetry: the SDK's spans, OTLP/JSON lines, OTLP/HTTP.

The one place that imports the OpenTelemetry SDK (the optional extra ``export``; when it
is missing, :func:`missing` says how to add it to this installation). The spans of
:mod:`acp_pipes.export.spans` become the SDK's ``ReadableSpan`` with their own IDs and
times (a recording is exported after the fact: no tracer, no clock), encoded by the
OTLP exporter's own encoder; so the protobuf sent to a collector and the JSON written
to a file are one encoding of the same spans.

OTLP/JSON is the format of the OpenTelemetry collector's file exporter and receiver:
one ``ExportTraceServiceRequest`` a line, in the protobuf JSON mapping except that
trace and span IDs are hex strings, not base64, and enums are numbers.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from acp_pipes import __version__
from acp_pipes.errors import Note, UsageError
from acp_pipes.export.spans import Span
from acp_pipes.io.output import OutputError

__all__ = ["Encoder", "Sender", "missing", "require_sdk"]

def missing() -> str:
    """What to say when the SDK is not installed: the extra, and how to add it here."""
    from acp_pipes.extras import install_hint

    return ("the OpenTelemetry SDK is not installed (acp-export otlp needs it, acp-pipes' "
            f"extra 'export'): {install_hint('export')}")

SCOPE = "acp-pipes.acp-export"


def require_sdk() -> None:
    """A UsageError naming the extra to install when the SDK is missing."""
    try:
        import opentelemetry.exporter.otlp.proto.common.trace_encoder  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise UsageError(missing()) from None


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


#: HTTP statuses a collector may answer differently later (OTLP/HTTP: "retryable"): a
#: request timed out, too many, or a gateway or the collector itself not ready.
RETRYABLE = frozenset({408, 429, 502, 503, 504})
#: How long to wait before each retry, seconds (doubling), and at most (Retry-After).
BACKOFF, MAX_WAIT = 1.0, 30.0


class Sender:
    """OTLP/HTTP (protobuf) to a collector's traces endpoint: each request encoded by the
    SDK's own encoder and sent here (``urllib``), so that what went wrong is said at
    once as it is (connection refused, the HTTP status and the start of the body), and
    only what a collector may take later is retried (no connection, a timeout, HTTP 408,
    429, 502, 503, 504: OTLP/HTTP's retryable answers), each retry said on a line.
    A batch it cannot deliver is an OutputError naming the endpoint."""

    def __init__(self, endpoint: str, timeout: float = 10.0,
                 headers: dict[str, str] | None = None, retries: int = 4,
                 note: Note | None = None,
                 sleep: Callable[[float], None] | None = None):
        require_sdk()
        import time

        self.endpoint = endpoint
        self.timeout = timeout
        self.headers = {"Content-Type": "application/x-protobuf",
                        "User-Agent": f"acp-export (acp-pipes) {__version__}",
                        **(headers or {})}
        self.retries = retries
        self.note = note or (lambda message: None)
        self.sleep = sleep or time.sleep
        self.sent = 0

    def send(self, readable: list[Any]) -> None:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        body = encode_spans(readable).SerializeToString()
        wait = BACKOFF
        for attempt in range(1, self.retries + 2):
            why, retry, after = self._post(body)
            if why is None:
                self.sent += len(readable)
                return
            if not retry or attempt > self.retries:
                tries = f"; {attempt} tries" if attempt > 1 else ""
                raise OutputError(f"{self.endpoint}: {why}{tries} ({self.sent} spans sent "
                                  "before)")
            pause = min(MAX_WAIT, after if after is not None else wait)
            self.note(f"{self.endpoint}: {why}; retrying in {pause:g} s (try "
                      f"{attempt + 1} of {self.retries + 1})")
            self.sleep(pause)
            wait *= 2

    def _post(self, body: bytes) -> tuple[str | None, bool, float | None]:
        """One request: (what went wrong or None, whether to retry, Retry-After)."""
        import http.client
        import socket
        import urllib.error
        import urllib.request

        request = urllib.request.Request(self.endpoint, data=body, headers=self.headers,
                                         method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                answer.read()
            return None, False, None
        except urllib.error.HTTPError as e:
            text = _printable_body(e.read(2048) if e.fp is not None else b"")
            why = f"HTTP {e.code} {e.reason}" + (f": {text}" if text else "")
            return why, e.code in RETRYABLE, _retry_after(e.headers.get("Retry-After"))
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, ConnectionRefusedError):
                return "connection refused (is a collector listening there?)", True, None
            if isinstance(reason, TimeoutError):
                return f"no answer within {self.timeout:g} s (--timeout)", True, None
            if isinstance(reason, socket.gaierror):
                return f"cannot resolve the host: {reason.strerror or reason}", False, None
            text = getattr(reason, "strerror", None) or str(reason)
            return f"cannot connect: {text}", isinstance(reason, ConnectionError), None
        except TimeoutError:
            return f"no answer within {self.timeout:g} s (--timeout)", True, None
        except (ConnectionError, http.client.HTTPException) as e:
            return f"the connection broke: {e or type(e).__name__}", True, None

    def close(self) -> None:
        pass


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (its date form is not worth a collector's while)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _printable_body(data: bytes) -> str:
    """The start of a collector's answer, on one line, safe at a terminal."""
    from acp_pipes.io.terminal import printable

    text = printable(data.decode("utf-8", "replace").strip())
    return text if len(text) <= 300 else text[:300] + "..."
