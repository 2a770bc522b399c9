"""Builds engines for configurations, reusing ORT sessions across trials.

A session is keyed by (precision, graph, threads, arena, spinning): batch size and length
sort are engine-side knobs and need no new session. The target's traits (sort key, fixed
spinning, what 0 threads means, max tokens) apply to every engine the pool makes. At most
`max_sessions` stay alive, so the search's memory is one or two sessions' worth.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from autotune.runtime.backends import Backend, OrtBackend
from autotune.runtime.engine import EngineConfig, EngineTraits, Pairs, RerankEngine
from autotune.runtime.heap import give_back
from autotune.runtime.model import ModelBundle
from autotune.runtime.quantize import Int8Variant, int8_model_path
from autotune.runtime.tokenize import PairTokenizer

SessionKey = tuple[str, str, int, bool, bool]


class EnginePool:
    def __init__(self, bundle: ModelBundle, *, has_vnni: bool, traits: EngineTraits | None = None,
                 max_sessions: int = 2) -> None:
        self.bundle = bundle
        self.has_vnni = has_vnni
        self.traits = traits or EngineTraits()
        self.max_length = min(self.traits.max_tokens or bundle.max_length, bundle.max_length)
        self.tokenizer = PairTokenizer(bundle.tokenizer_path, self.max_length)
        self._backends: dict[SessionKey, Backend] = {}
        self.max_sessions = max_sessions
        self.checkpoint: Path | None = None  # ONNX Runtime needs no PyTorch weights
        self.int8_variant = Int8Variant()  # which int8 graph `precision="int8"` runs (`use_int8` changes it)

    def keep_sessions(self, n: int) -> None:
        """Keep at most `n` sessions alive from now on (one, where two of a large model pass the memory budget)."""
        self.max_sessions = max(1, n)
        self._keep_newest(self.max_sessions)

    def use_int8(self, variant: Int8Variant) -> None:
        """Run `variant` for every int8 configuration from now on; int8 sessions of another are dropped."""
        if variant != self.int8_variant:
            self.int8_variant = variant
            self._drop([k for k in self._backends if k[0] == "int8"])

    def pair_lengths(self, queries: Sequence[Pairs]) -> list[list[int]]:
        """Each pair's token count after truncation, for the memory estimate."""
        return [[len(e.ids) for e in self.tokenizer.encode(q.query, q.documents)] for q in queries]

    def model_path(self, config: EngineConfig) -> Path:
        """The graph file a configuration runs (and the one Hindsight is handed for it)."""
        source = self.bundle.onnx_path
        if config.graph == "fused":
            from autotune.runtime.fusion import fused_model_path

            source = fused_model_path(self.bundle)
        if config.precision == "fp32":
            return source
        return int8_model_path(self.bundle, self.has_vnni, source=source, graph=config.graph,
                               variant=self.int8_variant)

    def effective(self, config: EngineConfig) -> EngineConfig:
        """The configuration as it runs: 0 threads resolved, spinning as the target fixes it.

        Two configurations with the same effective form are the same measurement.
        """
        return replace(config, intra_op_threads=self.traits.threads(config), spinning=self.traits.spins(config))

    def serving(self, config: EngineConfig) -> list[RerankEngine]:
        """One engine per worker. With `shared_session` all on the pooled session, as Hindsight runs them
        (`InferenceSession.run` may be called from several threads at once); otherwise the first on the
        pooled session and the others on sessions of their own (freed with the engines)."""
        if self.traits.shared_session:
            backend = self.backend(config)
            return [self._engine(backend, config) for _ in range(config.workers)]
        engines = [self.engine(config)]
        for _ in range(config.workers - 1):
            engines.append(self._engine(self._new_backend(config), config))
        return engines

    def _new_backend(self, config: EngineConfig) -> Backend:
        run = self.effective(config)
        dtype = "float32" if config.precision == "fp32" else "int8"
        return OrtBackend(self.model_path(config), threads=run.intra_op_threads, dtype=dtype,
                          spinning=run.spinning, mem_arena=config.mem_arena)

    def backend(self, config: EngineConfig) -> Backend:
        run = self.effective(config)
        key = (run.precision, run.graph, run.intra_op_threads, run.mem_arena, run.spinning)
        if key not in self._backends:
            self._keep_newest(self.max_sessions - 1)  # room for the new one first: each holds its own peak
            self._backends[key] = self._new_backend(config)
        return self._backends[key]

    def release(self) -> None:
        """Drop every session (and its arena), so the next measurement starts from a bare process: one that a
        reference cycle still holds is collected."""
        give_back([weakref.ref(self._backends.pop(key)) for key in list(self._backends)])

    def _keep_newest(self, n: int) -> None:
        """Drop the oldest sessions until at most `n` are left."""
        self._drop(list(self._backends)[:max(0, len(self._backends) - n)])

    def _drop(self, keys: Iterable[SessionKey]) -> None:
        """Drop these sessions and give their heap back. A session an engine still uses lives on (the search
        holds a step's engines at once), and a full collection would free nothing of it: none runs here."""
        for key in list(keys):
            del self._backends[key]
        give_back()

    def engine(self, config: EngineConfig) -> RerankEngine:
        return self._engine(self.backend(config), config)

    def engine_on(self, path: Path, config: EngineConfig) -> RerankEngine:
        """An engine on a graph file of the caller's (an int8 variant being judged), outside the pooled sessions."""
        run = self.effective(config)
        backend = OrtBackend(path, threads=run.intra_op_threads, dtype="float32" if config.precision == "fp32"
                             else "int8", spinning=run.spinning, mem_arena=config.mem_arena)
        return self._engine(backend, config)

    def _engine(self, backend: Backend, config: EngineConfig) -> RerankEngine:
        return RerankEngine(backend, self.tokenizer, batch_size=config.batch_size,
                            length_sort=config.length_sort, sort_key=self.traits.sort_key,
                            max_batch_tokens=self.traits.max_batch_tokens)


WARM_UP_ROUNDS = 2


def warm_up(engines: Sequence[RerankEngine], rows: int) -> None:
    """Small batches on each engine before any real one, as `serve` starts: thread pools up, and ORT's arena
    first grown small. It matters to the memory a server reaches: on a ModernBERT export at 2,540 tokens, two
    workers whose arenas were first grown by a long batch peaked at 2.56 GB; warmed first, at 1.52 GB."""
    for engine in engines:
        for _ in range(WARM_UP_ROUNDS):
            engine.score("warm up", ["autotune warm-up document"] * rows)
