"""`autotune serve` in its own process under a burst of the longest requests, and the peak RSS it reached.

Used by the memory-budget test and by benchmarks/memory_by_target.py. A watchdog kills the server past a
ceiling: unbounded, that burst took one server to 17.5 GB on a 24 GB host (inputs not cut, 8192 positions).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from tests.support.http import wait_healthy

ROOT = Path(__file__).resolve().parents[2]
LONG_TEXT = " ".join(["memory"] * 20000)  # past 8192 positions in any family's tokens


@dataclass(frozen=True)
class BurstResult:
    peak_mb: float  # the server's VmHWM after the burst
    statuses: list[int]
    info: dict[str, Any]


def _hwm_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 1024


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_burst(profile: Path, *, ceiling_mb: float, requests: int = 8, texts: int = 8) -> BurstResult:
    """Serve `profile`, send `requests` at once of `texts` texts each past the model's length, and read the
    server's high-water mark; past `ceiling_mb` the server is killed and the burst fails."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "autotune", "serve", "--profile", str(profile), "--port", str(port)],
                            cwd=profile.parent, env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE,
                            text=True)
    url = f"http://127.0.0.1:{port}"
    killed = threading.Event()
    done = threading.Event()

    def watch() -> None:
        process = psutil.Process(proc.pid)
        while not done.wait(0.02):
            try:
                if process.memory_info().rss / 2**20 > ceiling_mb:
                    killed.set()
                    proc.kill()
                    return
            except psutil.NoSuchProcess:
                return

    watchdog = threading.Thread(target=watch, daemon=True)
    watchdog.start()
    try:
        wait_healthy(url, proc)
        info = httpx.get(url + "/info").json()
        statuses: list[int] = []

        def request() -> None:
            try:
                statuses.append(httpx.post(url + "/rerank", json={"query": "what does the memory say",
                                                                  "texts": [LONG_TEXT] * texts},
                                           timeout=600).status_code)
            except httpx.TransportError:
                statuses.append(0)

        threads = [threading.Thread(target=request) for _ in range(requests)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if killed.is_set():
            raise AssertionError(f"the server passed {ceiling_mb:.0f} MB RSS under the burst and was killed")
        return BurstResult(_hwm_mb(proc.pid), statuses, info)
    finally:
        done.set()
        proc.terminate()
        proc.wait(timeout=30)
