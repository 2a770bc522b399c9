"""A `serve` service on a model directory, and the in-process scores it must match."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from autotune.runtime.engine import EngineConfig
from autotune.runtime.model import load_model_dir
from autotune.runtime.sessions import EnginePool
from autotune.serve.service import RerankService
from autotune.serve.settings import ServeSettings

CONFIG = EngineConfig(batch_size=4, intra_op_threads=1, length_sort=True, precision="fp32")
JSON = {"content-type": "application/json"}


def make_service(model_dir: Path | str, **kw: Any) -> RerankService:
    return RerankService(ServeSettings(config=CONFIG, model=str(model_dir), **kw), has_vnni=False)


def in_process(model_dir: Path | None, query: str, texts: list[str]) -> Any:
    """The scores the engine gives in this process (the embedded default when `model_dir` is None)."""
    from autotune.runtime.model import build_default_model

    pool = EnginePool(build_default_model() if model_dir is None else load_model_dir(model_dir), has_vnni=False)
    return pool.engine(CONFIG).score(query, texts)


class SlowService(RerankService):
    """Each request takes `delay` seconds in a worker; counts what ran and how many ran at once."""

    delay = 0.4

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.ran = 0
        self.running = 0
        self.peak = 0
        self.most_held = 0  # the most requests the server held at once (queued or running), seen as each starts
        self._count = threading.Lock()

    def _score(self, engine, job):  # type: ignore[no-untyped-def]
        with self._count:
            self.ran += 1
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.most_held = max(self.most_held, len(self._in_system))
        try:
            time.sleep(self.delay)
            return super()._score(engine, job)
        finally:
            with self._count:
                self.running -= 1


def slow(model_dir, *, workers: int = 1, **kw) -> SlowService:  # type: ignore[no-untyped-def]
    config = EngineConfig(**{**CONFIG.to_dict(), "workers": workers})  # type: ignore[arg-type]
    return SlowService(ServeSettings(config=config, model=str(model_dir), **kw), has_vnni=False)


def metric(url: str, name: str, labels: str = "") -> float:
    text = httpx.get(url + "/metrics").text
    match = re.search(rf"^{name}(?:_total)?{re.escape(labels)} ([0-9.e+-]+)$", text, re.M)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))
