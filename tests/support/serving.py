"""A `serve` service on a model directory, and the in-process scores it must match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
