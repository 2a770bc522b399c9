"""`onnx`: Hindsight 1.1's in-process ONNX Runtime provider (`OnnxCrossEncoder`), replayed exactly.

Hindsight sorts pairs by `len(query) + len(doc)` in characters, longest first, cuts them
into batches of `ONNX_BATCH_SIZE`, pads each to its longest pair with truncation at
`ONNX_MAX_TOKENS`, and runs one session with inter-op 1, spinning off, and the arena as
`ONNX_CPU_MEM_ARENA` says. `ONNX_THREADS=0` means its native cap. It returns raw logits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from autotune.runtime.engine import BASELINE, MAX_BATCH_SIZE, MAX_THREADS, EngineConfig, EngineTraits
from autotune.runtime.space import SearchSpace
from autotune.runtime.targets.base import (
    PREFIX,
    EnvContext,
    SpaceLimits,
    Target,
    flag,
    hindsight_native_threads,
)
from autotune.runtime.targets.key_spec import BOOL, CORES, MAX_POSITIONS, PATH, POSITIONS, KeySpec, choice, integer

HINDSIGHT_MAX_TOKENS = 512


def onnx_max_tokens(model_max_length: int) -> int:
    """Hindsight's default, or the model's limit where that is smaller."""
    return min(HINDSIGHT_MAX_TOKENS, model_max_length)


class OnnxTarget(Target):
    name = "onnx"
    provider = "onnx"
    summary = "Hindsight ≥ 1.1 runs the tuned ONNX model in-process: no extra service"
    min_hindsight = (1, 1)
    emits_model = True
    has_max_tokens = True
    concurrent = True
    defaults_label = "Hindsight's onnx provider at its defaults: batch 32, threads = its cap, arena off"
    defaults_reference = "hindsight-onnx"
    bench_against = ("hindsight-onnx", "hindsight-local")
    config_keys: ClassVar[tuple[str, ...]] = tuple(
        f"{PREFIX}ONNX_{k}" for k in ("BATCH_SIZE", "THREADS", "CPU_MEM_ARENA", "MAX_TOKENS"))
    env_spec: ClassVar[Mapping[str, KeySpec]] = {
        f"{PREFIX}PROVIDER": choice("onnx"),
        f"{PREFIX}ONNX_MODEL_PATH": PATH,
        f"{PREFIX}ONNX_TOKENIZER_NAME_OR_PATH": PATH,
        f"{PREFIX}ONNX_BATCH_SIZE": integer(1, MAX_BATCH_SIZE),
        f"{PREFIX}ONNX_THREADS": integer(0, MAX_THREADS, CORES),
        f"{PREFIX}ONNX_MAX_CONCURRENT": integer(1, MAX_THREADS),
        f"{PREFIX}ONNX_MAX_TOKENS": integer(1, MAX_POSITIONS, POSITIONS),
        f"{PREFIX}ONNX_CPU_MEM_ARENA": BOOL,
    }
    env_names: ClassVar[tuple[str, ...]] = tuple(env_spec)

    def traits(self, usable_cores: int, max_length: int, max_tokens: int | None = None) -> EngineTraits:
        """`max_tokens` (the user's `--max-tokens`, up to the model's positions) replaces Hindsight's 512."""
        if max_tokens is not None and not 1 <= max_tokens <= max_length:
            from autotune.errors import OptionsError

            raise OptionsError(f"--max-tokens must be between 1 and the model's {max_length} positions, "
                               f"got {max_tokens}")
        return EngineTraits(sort_key="chars_desc", spinning=False,
                            zero_threads=hindsight_native_threads(usable_cores),
                            max_tokens=max_tokens or onnx_max_tokens(max_length), shared_session=True)

    def space(self, limits: SpaceLimits) -> SearchSpace:
        """Hindsight always sorts and never spins; the arena is its `ONNX_CPU_MEM_ARENA` (off by default).

        Under concurrent recalls, `ONNX_MAX_CONCURRENT` (the workers over its one session) is a knob too,
        up to the recalls at once and the cores: workers x threads stay within the cores (the space's core
        budget), so no pick oversubscribes them. One recall at a time, more workers could only wait."""
        workers = tuple(range(1, min(limits.concurrency, limits.usable_cores) + 1))
        return super().space(limits).narrowed(length_sort=(True,), mem_arena=(False, True), spinning=(False,),
                                              workers=workers, default_sort=True, default_arena=False,
                                              default_spinning=False)

    def defaults(self) -> EngineConfig:
        """Batch 32 and its native thread count, always sorted, the arena off."""
        return replace(BASELINE, length_sort=True, mem_arena=False, spinning=False)

    def container_keys(self, directory: str) -> dict[str, str]:
        directory = directory.rstrip("/")
        return {f"{PREFIX}ONNX_MODEL_PATH": f"{directory}/model.onnx",
                f"{PREFIX}ONNX_TOKENIZER_NAME_OR_PATH": directory}

    def loaded_from(self, env: Mapping[str, str]) -> tuple[Path, Path] | None:
        model, tokenizer = env.get(f"{PREFIX}ONNX_MODEL_PATH"), env.get(f"{PREFIX}ONNX_TOKENIZER_NAME_OR_PATH")
        return None if not model or not tokenizer else (Path(model), Path(tokenizer))

    def env_keys(self, config: EngineConfig, ctx: EnvContext) -> dict[str, str]:
        if ctx.model_dir is None:
            raise ValueError("the onnx target needs the emitted model directory")
        return {
            f"{PREFIX}PROVIDER": self.provider,
            **self.container_keys(ctx.model_dir),
            f"{PREFIX}ONNX_BATCH_SIZE": str(config.batch_size),
            f"{PREFIX}ONNX_THREADS": str(config.intra_op_threads),
            f"{PREFIX}ONNX_MAX_CONCURRENT": str(config.workers),
            f"{PREFIX}ONNX_MAX_TOKENS": str(ctx.max_tokens),
            f"{PREFIX}ONNX_CPU_MEM_ARENA": flag(config.mem_arena),
        }
