"""`autotune serve`'s process: check the address and the model, then run uvicorn until SIGTERM.

Hindsight's `tei` reranker provider is how a tuned ONNX configuration reaches an unmodified Hindsight.
The pieces: `settings` (what it runs with), `service` (the bounded queue and the inference workers),
`routes` (TEI's HTTP API), `metrics` and `errors`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from autotune.errors import OptionsError
from autotune.runtime.model import resolve_model
from autotune.serve.routes import create_app
from autotune.serve.service import RerankService
from autotune.serve.settings import ServeSettings


def bare_host(host: str) -> str:
    """`[::1]`, as a user writes an IPv6 address in a URL, is the address `::1` to bind."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def check_bindable(host: str, port: int) -> None:
    """A taken or impossible address is one line with exit 4, before uvicorn logs a traceback."""
    import socket

    host = bare_host(host)
    if not 1 <= port <= 65535:
        raise OptionsError(f"--port must be between 1 and 65535, got {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise OptionsError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


def listen_url(host: str, port: int) -> str:
    """The address as a URL a user can paste: an IPv6 host is bracketed (`http://[::]:8080`, not `http://:::8080`)."""
    host = bare_host(host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(settings: ServeSettings, host: str, port: int, *, graceful_timeout_s: float = 10.0,
          announce: Callable[[str], None] | None = None) -> None:
    """Run until SIGTERM/SIGINT; then finish what is running, within `graceful_timeout_s`, and return.

    No connection limit of uvicorn's: past it every route answers 503, so stalled clients could
    turn /health unhealthy. Overload is the bounded queue's job (429); idle connections time out.
    """
    import uvicorn

    host = bare_host(host)
    check_bindable(host, port)
    resolve_model(None if settings.model == "default" else Path(settings.model))  # a missing model: exit 3 now
    if announce is not None:
        announce(f"{settings.config.label()} on {listen_url(host, port)}")
    service = RerankService(settings)

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            service.stopping = True  # from the signal on, queued requests answer 503 instead of waiting
            super().handle_exit(sig, frame)

    config = uvicorn.Config(create_app(service), host=host, port=port, log_level="warning", timeout_keep_alive=5,
                            timeout_graceful_shutdown=graceful_timeout_s)  # type: ignore[arg-type]  # a float works; uvicorn annotates int
    try:
        _Server(config).run()
    except KeyboardInterrupt:
        # uvicorn re-raises the signal it stopped on once it has stopped. For a server SIGTERM (docker stop,
        # a pod's end) and Ctrl-C are the normal way out, not an interrupted job: exit 0, and say so.
        if not service.stopping:
            raise
    if announce is not None:
        announce("stopped: requests in flight finished, those still queued were answered 503")
