"""Webhooks on 127.0.0.1 for the notification tests and bench_notify: a receiver that records each
JSON body posted, and an endpoint that accepts connections and never answers."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """The bodies posted so far (``bodies``) and the URL to post them to (``url``)."""

    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/secret-token-XYZ"

    def kinds(self) -> list[str]:
        return [b["kind"] for b in self.bodies]

    def wait_for(self, kind: str, timeout_s: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = [b for b in self.bodies if b["kind"] == kind]
            if found:
                return found[0]
            time.sleep(0.02)
        raise AssertionError(f"no {kind} notice; got {self.kinds()}")


@contextmanager
def receiver() -> Iterator[Receiver]:
    """A server that answers every POST with 200 and keeps its JSON body."""
    bodies: list[dict[str, Any]] = []
    paths: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            bodies.append(json.loads(self.rfile.read(length)))
            paths.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    r = Receiver(server)
    r.bodies, r.paths = bodies, paths
    try:
        yield r
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_endpoint() -> Iterator[str]:
    """A URL whose server accepts connections (the kernel's backlog) and never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/never"
    finally:
        sock.close()
