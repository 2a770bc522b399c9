"""Builds engines for configurations, reusing ORT sessions across trials.

A session is keyed by (precision, threads): batch size and length sort are engine-side
knobs and need no new session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotune.runtime.backends import Backend, OrtBackend
from autotune.runtime.engine import EngineConfig, RerankEngine
from autotune.runtime.model import ModelBundle, int8_model_path
from autotune.runtime.tokenize import PairTokenizer

if TYPE_CHECKING:
    from pathlib import Path


class EnginePool:
    def __init__(self, bundle: ModelBundle, *, has_vnni: bool, max_sessions: int = 6) -> None:
        self.bundle = bundle
        self.has_vnni = has_vnni
        self.tokenizer = PairTokenizer(bundle.tokenizer_path, bundle.max_length)
        self._backends: dict[tuple[str, int], Backend] = {}
        self._max_sessions = max_sessions

    def model_path(self, precision: str) -> Path:
        return self.bundle.onnx_path if precision == "fp32" else int8_model_path(self.bundle, self.has_vnni)

    def backend(self, precision: str, threads: int) -> Backend:
        key = (precision, threads)
        if key not in self._backends:
            if len(self._backends) >= self._max_sessions:
                self._backends.pop(next(iter(self._backends)))
            dtype = "float32" if precision == "fp32" else "int8"
            self._backends[key] = OrtBackend(self.model_path(precision), threads=threads, dtype=dtype)
        return self._backends[key]

    def engine(self, config: EngineConfig) -> RerankEngine:
        return RerankEngine(self.backend(config.precision, config.intra_op_threads), self.tokenizer,
                            batch_size=config.batch_size, length_sort=config.length_sort)
