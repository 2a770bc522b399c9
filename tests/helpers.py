"""Small builders shared by tests."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.host import Cores, HostInfo
from autotune.outputs.profile import SCHEMA
from autotune.runtime.engine import EngineConfig
from autotune.runtime.model import load_model_dir

if TYPE_CHECKING:
    from autotune.serve.service import RerankService

# Two unlike hosts, for drift and fingerprint tests.
VNNI_HOST = HostInfo(brand="Intel Xeon", isa={"avx2": True, "avx512f": True, "avx512_vnni": True,
                                              "avx_vnni": False, "amx_int8": False},
                     cores=Cores(8, 16, 8), l2_cache_bytes=None, l3_cache_bytes=None, memory_bytes=1,
                     clock_hz=None, onnxruntime="1.32.0")
AVX2_HOST = replace(VNNI_HOST, brand="AMD Ryzen", isa={**VNNI_HOST.isa, "avx512f": False, "avx512_vnni": False},
                    cores=Cores(2, 2, 2))


def profile_for(host: HostInfo, config: EngineConfig, model_dir: Path, target: str = "tei") -> dict[str, Any]:
    bundle = load_model_dir(model_dir)
    return {"schema": SCHEMA, "name": "test", "target": target, "host": host.to_dict(), "config": config.to_dict(),
            "model": {"name": bundle.name, "ref": str(model_dir), "sha256": bundle.sha256}}


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
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


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
