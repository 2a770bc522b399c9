"""Builds engines for configurations, reusing ORT sessions across trials.

A session is keyed by (precision, threads, arena): batch size and length sort are engine-side
knobs and need no new session. The target's traits (sort key, spinning, what 0 threads
means, max tokens) apply to every engine the pool makes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotune.runtime.backends import Backend, OrtBackend
from autotune.runtime.engine import EngineConfig, EngineTraits, RerankEngine
from autotune.runtime.model import ModelBundle, int8_model_path
from autotune.runtime.tokenize import PairTokenizer

if TYPE_CHECKING:
    from pathlib import Path


class EnginePool:
    def __init__(self, bundle: ModelBundle, *, has_vnni: bool, traits: EngineTraits | None = None,
                 max_sessions: int = 2) -> None:
        self.bundle = bundle
        self.has_vnni = has_vnni
        self.traits = traits or EngineTraits()
        self.max_length = min(self.traits.max_tokens or bundle.max_length, bundle.max_length)
        self.tokenizer = PairTokenizer(bundle.tokenizer_path, self.max_length)
        self._backends: dict[tuple[str, int, bool], Backend] = {}
        self._max_sessions = max_sessions

    def model_path(self, precision: str) -> Path:
        return self.bundle.onnx_path if precision == "fp32" else int8_model_path(self.bundle, self.has_vnni)

    def backend(self, config: EngineConfig) -> Backend:
        threads = self.traits.threads(config)
        key = (config.precision, threads, config.mem_arena)
        if key not in self._backends:
            if len(self._backends) >= self._max_sessions:  # bound memory: each session holds its own peak
                self._backends.pop(next(iter(self._backends)))
            dtype = "float32" if config.precision == "fp32" else "int8"
            self._backends[key] = OrtBackend(self.model_path(config.precision), threads=threads, dtype=dtype,
                                             spinning=self.traits.spinning, mem_arena=config.mem_arena)
        return self._backends[key]

    def engine(self, config: EngineConfig) -> RerankEngine:
        return RerankEngine(self.backend(config), self.tokenizer, batch_size=config.batch_size,
                            length_sort=config.length_sort, sort_key=self.traits.sort_key)
