"""Load on `autotune serve` over loopback: bounded clients, bounded time, then the server's overhead.

Starts the server in process on 127.0.0.1, runs --clients concurrent clients for --seconds,
each replaying the example workload as Hindsight would (one /rerank per recall), and prints
p50/p95 latency, throughput, 429s and errors (which must be 0), and the server's p50 against
in-process scoring of the same requests. Usage: python benchmarks/serve_load.py
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import threading
import time

import httpx
import uvicorn
from _common import example_workload, setup

from autotune.runtime.engine import EngineConfig
from autotune.serve.routes import create_app
from autotune.serve.service import RerankService
from autotune.serve.settings import ServeSettings


async def client(url: str, queries: list, until: float, lat: list[float], codes: dict[int, int]) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        i = 0
        while time.monotonic() < until:
            q = queries[i % len(queries)]
            i += 1
            start = time.perf_counter()
            resp = await http.post(url + "/rerank", json={"query": q.query, "texts": q.documents,
                                                          "return_text": False})
            codes[resp.status_code] = codes.get(resp.status_code, 0) + 1
            if resp.status_code == 200:
                lat.append(time.perf_counter() - start)
            elif resp.status_code == 429:
                await asyncio.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    host, bundle, pool = setup()
    workload = example_workload()
    config = EngineConfig(4, host.cores.usable, True, "fp32")  # type: ignore[attr-defined]
    service = RerankService(ServeSettings(config=config, max_queue=args.clients), bundle=bundle,  # type: ignore[arg-type]
                            has_vnni=host.has_vnni)  # type: ignore[attr-defined]
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(create_app(service), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while httpx.get(url + "/health").status_code != 200:
        time.sleep(0.2)
    lat: list[float] = []
    codes: dict[int, int] = {}
    until = time.monotonic() + args.seconds

    async def run_all() -> None:
        await asyncio.gather(*(client(url, workload.queries, until, lat, codes) for _ in range(args.clients)))

    started = time.monotonic()
    asyncio.run(run_all())
    elapsed = time.monotonic() - started
    # Server overhead: one client at a time, against the same engine scoring in process.
    serial, local = [], []
    engine = pool.engine(config)
    for q in workload.queries:
        t0 = time.perf_counter()
        httpx.post(url + "/rerank", json={"query": q.query, "texts": q.documents}, timeout=60)
        serial.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        engine.score(q.query, q.documents)
        local.append(time.perf_counter() - t0)
    server.should_exit = True
    thread.join(timeout=10)
    errors = sum(n for c, n in codes.items() if c not in (200, 429))
    lat.sort()
    print(f"{args.clients} clients for {args.seconds:.0f} s: {len(lat)} ok, {codes.get(429, 0)} x 429, "
          f"{errors} errors")
    if lat:
        print(f"latency p50 {statistics.median(lat) * 1000:.1f} ms, p95 {lat[int(0.95 * (len(lat) - 1))] * 1000:.1f} ms"
              f", throughput {len(lat) / elapsed:.1f} recalls/s")
    print(f"server / in-process p50 (one request at a time): "
          f"{statistics.median(serial) / statistics.median(local):.3f}x")
    if errors:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
