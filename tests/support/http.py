"""Loopback HTTP for tests: fake servers answering JSON, and `autotune serve`'s app on a free port."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autotune.serve.service import RerankService


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet loopback HTTP handler that answers JSON: the base of the fake Hindsights."""

    def log_message(self, *args: object) -> None:
        pass

    def _json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on a free loopback port for the block; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # shutdown() waits out serve_forever's poll: half a second at its default, paid by every test that serves
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def wait_healthy(url: str, proc: Any = None, timeout_s: float = 120.0) -> None:
    """Poll `/health` until 200; fail with the server's stderr if its process died first."""
    import time

    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc is not None and proc.poll() is not None:
            raise AssertionError(proc.stderr.read() if proc.stderr else f"server exited with {proc.returncode}")
        time.sleep(0.2)
    raise AssertionError(f"{url} did not become healthy within {timeout_s:.0f} s")


class LiveServer:
    """`autotune serve`'s app for one service, on a free loopback port, in a thread."""

    def __init__(self, service: RerankService) -> None:
        import uvicorn

        from autotune.serve.routes import create_app

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(create_app(service), log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> LiveServer:
        import httpx

        self.thread.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError("server did not become healthy")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
