"""`local`: Hindsight's default provider, sentence-transformers `CrossEncoder` on PyTorch.

Scoring replays `LocalSTCrossEncoder._predict_sync`: with bucket batching, pairs are sorted by
`len(query) + len(doc)` in characters, shortest first; then `predict` runs per slice of
`LOCAL_BATCH_SIZE`. Threads come from `OMP_NUM_THREADS`. torch is needed here and nowhere
else on the ONNX path.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import numpy as np

from autotune.runtime.engine import (
    MAX_BATCH_SIZE,
    MAX_THREADS,
    EngineConfig,
    EngineTraits,
    Pairs,
    ScoreResult,
    logit,
    sigmoid,
)
from autotune.runtime.model import ModelBundle
from autotune.runtime.quantize import Int8Variant
from autotune.runtime.space import SearchSpace
from autotune.runtime.targets.base import (
    PREFIX,
    EnvContext,
    SpaceLimits,
    Target,
    flag,
    hindsight_native_threads,
    no_max_tokens,
)
from autotune.runtime.targets.key_spec import BOOL, CORES, PATH, KeySpec, choice, integer

MAX_CONCURRENT = 1  # threads were tuned for one pass at a time; more passes share the same cores


class LocalScorer:
    """One configuration of Hindsight's local provider, timed like the ONNX engine."""

    def __init__(self, model: object, *, batch_size: int, bucket_batching: bool, threads: int) -> None:
        self.model = model
        self.batch_size = batch_size
        self.bucket_batching = bucket_batching
        self.threads = threads

    def score(self, query: str, documents: list[str]) -> ScoreResult:
        import torch

        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        start = time.perf_counter()
        pairs = [(query, d) for d in documents]
        order = list(range(len(pairs)))
        if self.bucket_batching and len(pairs) > 1:
            order.sort(key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        out = np.empty(len(pairs), dtype=np.float64)
        for lo in range(0, len(order), self.batch_size):
            window = order[lo:lo + self.batch_size]
            batch = self.model.predict([pairs[i] for i in window], batch_size=self.batch_size,  # type: ignore[attr-defined]  # a CrossEncoder, typed loosely
                                       show_progress_bar=False)
            out[window] = np.asarray(batch, dtype=np.float64).reshape(-1)
        total = time.perf_counter() - start
        scores, raw = _calibrated(out, self.model)
        if not np.all(np.isfinite(raw)):
            from autotune.errors import ModelError

            raise ModelError("the PyTorch model produced non-finite scores (NaN or inf)")
        return ScoreResult(scores, raw, total, 0.0, total, 0, 0, [])


def _calibrated(out: np.ndarray, model: object) -> tuple[np.ndarray, np.ndarray]:
    """sentence-transformers applies a sigmoid to 1-label heads itself; undo it once for the logit."""
    if type(getattr(model, "activation_fn", None)).__name__ == "Sigmoid":
        return out, logit(out)
    return sigmoid(out), out


class LocalPool:
    """Loads the PyTorch checkpoint once; each configuration is a cheap scorer over it."""

    def __init__(self, checkpoint: Path, *, bundle: ModelBundle, traits: EngineTraits, usable_cores: int) -> None:
        from autotune.runtime.torch_reference import load_cross_encoder

        self.bundle, self.traits = bundle, traits
        self.checkpoint: Path | None = checkpoint
        self.model = load_cross_encoder(checkpoint)
        self.zero_threads = hindsight_native_threads(usable_cores)
        self.int8_variant = Int8Variant()  # never used: PyTorch runs fp32 only
        self.max_sessions = 1  # the checkpoint, loaded once

    def effective(self, config: EngineConfig) -> EngineConfig:
        """PyTorch reads only batch size, bucket batching and threads; the rest is ORT's."""
        return EngineConfig(batch_size=config.batch_size, intra_op_threads=config.intra_op_threads
                            or self.zero_threads, length_sort=config.length_sort, precision="fp32")

    def release(self) -> None:
        """The checkpoint is the one model; there are no per-configuration sessions to drop."""

    def keep_sessions(self, n: int) -> None:
        """The checkpoint is the one session, whatever `n`."""

    def model_path(self, config: EngineConfig) -> Path | None:
        """None: PyTorch runs the checkpoint, not an ONNX graph."""
        return None

    def pair_lengths(self, queries: Sequence[Pairs]) -> list[list[int]] | None:
        return None  # no ONNX session's memory to estimate

    def serving(self, config: EngineConfig) -> list[LocalScorer]:
        if config.workers != 1:
            from autotune.errors import OptionsError

            raise OptionsError(f"--target local serves one request at a time, not {config.workers}")
        return [self.engine(config)]

    def engine(self, config: EngineConfig) -> LocalScorer:
        return LocalScorer(self.model, batch_size=config.batch_size, bucket_batching=config.length_sort,
                           threads=config.intra_op_threads or self.zero_threads)


class LocalTarget(Target):
    name = "local"
    provider = "local"
    summary = "Hindsight's default provider (sentence-transformers on PyTorch), tuned in place"
    emits_model = True
    stock_default = True  # sentence-transformers' CrossEncoder cannot run the bi-encoder graph
    defaults_label = "sentence-transformers CrossEncoder.predict(batch_size=32) on PyTorch, no bucket sort"
    bench_against = ("hindsight-local",)
    config_keys: ClassVar[tuple[str, ...]] = (f"{PREFIX}LOCAL_BATCH_SIZE", f"{PREFIX}LOCAL_BUCKET_BATCHING",
                                              "OMP_NUM_THREADS")
    env_spec: ClassVar[Mapping[str, KeySpec]] = {
        f"{PREFIX}PROVIDER": choice("local"),
        f"{PREFIX}LOCAL_MODEL": PATH,
        f"{PREFIX}LOCAL_BATCH_SIZE": integer(1, MAX_BATCH_SIZE),
        f"{PREFIX}LOCAL_BUCKET_BATCHING": BOOL,
        f"{PREFIX}LOCAL_MAX_CONCURRENT": integer(1, MAX_THREADS),
        "OMP_NUM_THREADS": integer(1, MAX_THREADS, CORES),
    }
    env_names: ClassVar[tuple[str, ...]] = tuple(env_spec)

    def traits(self, usable_cores: int, max_length: int, max_tokens: int | None = None) -> EngineTraits:
        """The fp32 reference and parity run through ONNX Runtime with the same truncation."""
        no_max_tokens(self.name, max_tokens)
        return EngineTraits(sort_key="chars_asc", zero_threads=hindsight_native_threads(usable_cores))

    def space(self, limits: SpaceLimits) -> SearchSpace:
        base = super().space(replace(limits, precisions=limits.precisions or ("fp32",))).narrowed(graphs=("plain",))
        if base.precisions != ("fp32",):
            from autotune.errors import OptionsError

            raise OptionsError("--target local runs PyTorch in fp32 only; drop --precisions or use --target onnx")
        return base

    def pool(self, bundle: ModelBundle, *, has_vnni: bool, usable_cores: int,
             max_tokens: int | None = None) -> LocalPool:
        from autotune.runtime.torch_reference import checkpoint_for

        no_max_tokens(self.name, max_tokens)

        return LocalPool(checkpoint_for(bundle), bundle=bundle,
                         traits=self.traits(usable_cores, bundle.max_length), usable_cores=usable_cores)

    def container_keys(self, directory: str) -> dict[str, str]:
        return {f"{PREFIX}LOCAL_MODEL": directory.rstrip("/")}

    def loaded_from(self, env: Mapping[str, str]) -> tuple[Path, Path] | None:
        directory = env.get(f"{PREFIX}LOCAL_MODEL")
        return None if not directory else (Path(directory) / "model.onnx", Path(directory))

    def env_keys(self, config: EngineConfig, ctx: EnvContext) -> dict[str, str]:
        keys = {f"{PREFIX}PROVIDER": self.provider}
        if ctx.model_dir is not None:
            keys.update(self.container_keys(ctx.model_dir))
        keys.update({
            f"{PREFIX}LOCAL_BATCH_SIZE": str(config.batch_size),
            f"{PREFIX}LOCAL_BUCKET_BATCHING": flag(config.length_sort),
            f"{PREFIX}LOCAL_MAX_CONCURRENT": str(MAX_CONCURRENT),
            "OMP_NUM_THREADS": str(config.intra_op_threads or hindsight_native_threads(ctx.usable_cores)),
        })
        return keys
