"""A loopback OpenTelemetry collector: a real HTTP server that takes OTLP/HTTP trace exports
(`POST /v1/traces`, protobuf, gzip or not) and decodes them with the `opentelemetry-proto`
package, as a collector would. The `otlp_receiver` fixture starts one per test;
`hanging_collector` is one that never answers."""

from __future__ import annotations

import gzip
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    kind: int
    start_ns: int
    end_ns: int
    status_code: int
    attributes: dict[str, Any]
    resource: dict[str, Any]


def _value(value: AnyValue) -> Any:
    return getattr(value, value.WhichOneof("value") or "string_value")


def _attributes(items: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in items}


class OtlpReceiver:
    """Collects every span it is sent; `url` is the base an OTLP exporter is pointed at."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests: list[tuple[str, str]] = []  # (path, content type)
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.take(self.path, self.headers.get("content-type", ""), body)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    def take(self, path: str, content_type: str, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        spans = [
            ReceivedSpan(
                name=span.name,
                kind=span.kind,
                start_ns=span.start_time_unix_nano,
                end_ns=span.end_time_unix_nano,
                status_code=span.status.code,
                attributes=_attributes(span.attributes),
                resource=_attributes(resource_spans.resource.attributes),
            )
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        with self._lock:
            self.requests.append((path, content_type))
            self.spans.extend(spans)

    def by_record(self) -> dict[str, ReceivedSpan]:
        with self._lock:
            return {span.attributes["playground.record.id"]: span for span in self.spans}

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


SPAN_KIND_CLIENT = Span.SPAN_KIND_CLIENT


@pytest.fixture
def otlp_receiver(settings: Any) -> Iterator[OtlpReceiver]:
    """A running receiver, with the app's exporter pointed at it."""
    receiver = OtlpReceiver()
    receiver.start()
    settings.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url
    yield receiver
    receiver.stop()


@pytest.fixture
def hanging_collector(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A collector that takes connections and never answers; the exporter gives up after 3 s."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "3")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        settings.OTEL_EXPORTER_OTLP_ENDPOINT = f"http://127.0.0.1:{sock.getsockname()[1]}"
        yield sock
