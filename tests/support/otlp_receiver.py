"""An OTLP receiver for tests: HTTP/protobuf and gRPC, decoding the opentelemetry-proto messages."""

from __future__ import annotations

import gzip
import socket
import threading
import zlib
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

_REQUESTS = {
    "/v1/traces": (trace_service_pb2.ExportTraceServiceRequest, trace_service_pb2.ExportTraceServiceResponse),
    "/v1/metrics": (
        metrics_service_pb2.ExportMetricsServiceRequest,
        metrics_service_pb2.ExportMetricsServiceResponse,
    ),
    "/v1/logs": (logs_service_pb2.ExportLogsServiceRequest, logs_service_pb2.ExportLogsServiceResponse),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Received:
    """Everything received, decoded: spans, metrics, log records, each with its resource attributes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[dict[str, Any]] = []
        self.metrics: list[dict[str, Any]] = []
        self.logs: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []

    def add(self, request: Any, headers: dict[str, str] | None = None) -> None:
        with self.lock:
            if headers:
                self.headers.append(headers)
            if isinstance(request, trace_service_pb2.ExportTraceServiceRequest):
                for rs in request.resource_spans:
                    res = attrs(rs.resource.attributes)
                    for ss in rs.scope_spans:
                        for sp in ss.spans:
                            self.spans.append(
                                {
                                    "name": sp.name,
                                    "trace_id": sp.trace_id.hex(),
                                    "span_id": sp.span_id.hex(),
                                    "parent": sp.parent_span_id.hex(),
                                    "attributes": attrs(sp.attributes),
                                    "resource": res,
                                    "events": [e.name for e in sp.events],
                                    "status": sp.status.code,
                                    "start": sp.start_time_unix_nano,
                                    "end": sp.end_time_unix_nano,
                                }
                            )
            elif isinstance(request, metrics_service_pb2.ExportMetricsServiceRequest):
                for rm in request.resource_metrics:
                    res = attrs(rm.resource.attributes)
                    for sm in rm.scope_metrics:
                        for m in sm.metrics:
                            kind = m.WhichOneof("data")
                            data = getattr(m, kind)
                            points = []
                            for p in data.data_points:
                                value = (
                                    getattr(p, p.WhichOneof("value")) if hasattr(p, "as_double") else p.sum
                                )
                                points.append({"attributes": attrs(p.attributes), "value": value})
                            temporality = getattr(data, "aggregation_temporality", None)
                            self.metrics.append(
                                {
                                    "name": m.name,
                                    "unit": m.unit,
                                    "kind": kind,
                                    "points": points,
                                    "temporality": temporality,
                                    "resource": res,
                                }
                            )
            elif isinstance(request, logs_service_pb2.ExportLogsServiceRequest):
                for rl in request.resource_logs:
                    res = attrs(rl.resource.attributes)
                    for sl in rl.scope_logs:
                        for lr in sl.log_records:
                            self.logs.append(
                                {
                                    "event_name": lr.event_name,
                                    "body": value_of(lr.body),
                                    "attributes": attrs(lr.attributes),
                                    "severity": lr.severity_text,
                                    "trace_id": lr.trace_id.hex(),
                                    "span_id": lr.span_id.hex(),
                                    "time": lr.time_unix_nano,
                                    "resource": res,
                                }
                            )

    def metric_names(self) -> set[str]:
        with self.lock:
            return {m["name"] for m in self.metrics}


def value_of(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in v.kvlist_value.values}
    if kind == "array_value":
        return [value_of(x) for x in v.array_value.values]
    return getattr(v, kind)


def attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in kvs}


def _http_handler(received: Received) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            req_cls, resp_cls = _REQUESTS.get(self.path, (None, None))
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            encoding = self.headers.get("Content-Encoding", "")
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            if req_cls is None:
                self.send_response(404)
                self.end_headers()
                return
            request = req_cls()
            request.ParseFromString(body)
            received.add(request, {k.lower(): v for k, v in self.headers.items()})
            payload = resp_cls().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            return

    return Handler


@contextmanager
def http_receiver() -> Iterator[tuple[str, Received]]:
    """Yields (endpoint base URL, received data) for OTLP/HTTP protobuf."""
    received = Received()
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _http_handler(received))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def grpc_receiver() -> Iterator[tuple[str, Received]]:
    """Yields (endpoint, received data) for OTLP/gRPC (insecure)."""
    import grpc

    received = Received()

    class Traces(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            received.add(request, dict(context.invocation_metadata()))
            return trace_service_pb2.ExportTraceServiceResponse()

    class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            received.add(request, dict(context.invocation_metadata()))
            return metrics_service_pb2.ExportMetricsServiceResponse()

    class Logs(logs_service_pb2_grpc.LogsServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            received.add(request, dict(context.invocation_metadata()))
            return logs_service_pb2.ExportLogsServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.stop(grace=None)
