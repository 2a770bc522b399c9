"""A target is what Hindsight will run: how it scores, what may be tuned, and the keys it reads.

It is not a second tuner. The tuner, `bench`, `check`, `apply`, `compose` and `helm` take any target
and ask it, never its name: its engine traits (or its own pool), its search space, Hindsight's
defaults (and which of `bench`'s references they are), the `.env` keys for a configuration with each
key's type, the model it loads, whether it emits a model directory, whether Hindsight reaches it over
HTTP (a sidecar), and whether it has a truncation key.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from autotune.runtime.engine import BASELINE, GRAPHS, EngineConfig, EngineTraits, ScoringPool
from autotune.runtime.model import ModelBundle
from autotune.runtime.space import SearchSpace
from autotune.runtime.targets.key_spec import KeySpec

HINDSIGHT_THREAD_CAP = 16
PREFIX = "HINDSIGHT_API_RERANKER_"


def hindsight_native_threads(usable_cores: int, environ: dict[str, str] | None = None) -> int:
    """What Hindsight sizes a native pool to: `OMP_NUM_THREADS` when set, else min(16, usable CPUs)."""
    env = os.environ if environ is None else environ
    try:
        return max(1, int(env["OMP_NUM_THREADS"]))
    except (KeyError, ValueError):
        return max(1, min(HINDSIGHT_THREAD_CAP, usable_cores))


def no_max_tokens(target: str, max_tokens: int | None) -> None:
    if max_tokens is not None:
        from autotune.errors import OptionsError

        raise OptionsError(f"--max-tokens is Hindsight's ONNX_MAX_TOKENS: it applies to --target onnx, not {target}")


def flag(value: bool) -> str:
    """Hindsight reads booleans as true only for `true`/`1`; write the one spelling it documents."""
    return "true" if value else "false"


@dataclass(frozen=True)
class EnvContext:
    """What the keys need besides the configuration."""

    model_ref: str  # "default" or the --model directory (for `autotune serve`)
    model_dir: str | None  # where Hindsight finds the emitted model directory (onnx, local)
    tei_url: str
    tei_batch_size: int
    max_tokens: int
    usable_cores: int
    client_keys: Mapping[str, str] = field(default_factory=dict)  # the sidecar's TEI_MAX_CONCURRENT and time-out
    served_max_length: int | None = None  # the sidecar's input cut, where the model's own would pass the budget


@dataclass(frozen=True)
class SpaceLimits:
    """The user's narrowing of a target's space (`--batch-sizes`, `--precisions`, `--max-threads`)."""

    usable_cores: int
    max_candidates: int
    batch_sizes: Sequence[int] | None = None
    precisions: Sequence[str] | None = None
    max_threads: int | None = None
    concurrency: int = 1  # recalls at once the candidates are timed under


class Target(ABC):
    """One way Hindsight can run the reranker. Subclasses are stateless and cheap to build."""

    name: ClassVar[str]
    provider: ClassVar[str]  # the HINDSIGHT_API_RERANKER_PROVIDER value
    summary: ClassVar[str]
    min_hindsight: ClassVar[tuple[int, int]] = (0, 0)  # the oldest Hindsight that has this provider
    emits_model: ClassVar[bool] = False  # writes a model directory that Hindsight loads as it is
    # loads only a stock cross-encoder checkpoint: the embedded default is then its stand-in-head form
    stock_default: ClassVar[bool] = False
    # Hindsight calls it over HTTP: it is timed under concurrent recalls, sizes Hindsight's TEI client keys,
    # and ships as a compose service (and a Helm block) of its own
    sidecar: ClassVar[bool] = False
    # the module whose process serves it, when autotune serves it (the sidecar): its memory is measured so
    server_module: ClassVar[str | None] = None
    # Hindsight may run several reranks on it at once: it is timed under `--concurrency` recalls, and its
    # concurrency key is searched then (a sidecar is always timed so, at Hindsight's client concurrency)
    concurrent: ClassVar[bool] = False
    has_max_tokens: ClassVar[bool] = False  # reads a pair truncation key (`--max-tokens`)
    defaults_label: ClassVar[str]  # Hindsight's defaults for it, in words
    # `bench`: the reference that is this target's own defaults (if any), and what a profile of it races by default
    defaults_reference: ClassVar[str | None] = None
    bench_against: ClassVar[tuple[str, ...]] = ()
    env_spec: ClassVar[Mapping[str, KeySpec]]  # every key `env_keys` may write, with its type: a profile may
    # carry no other, and no value of another type
    env_names: ClassVar[tuple[str, ...]]  # the names of `env_spec`
    config_keys: ClassVar[tuple[str, ...]]  # the keys a drift check compares with the profile

    @abstractmethod
    def traits(self, usable_cores: int, max_length: int, max_tokens: int | None = None) -> EngineTraits:
        """How the engine must score to behave as this target does; `max_tokens` is the user's truncation
        where the target has such a key (`onnx`), else it must be None."""

    def space(self, limits: SpaceLimits) -> SearchSpace:
        """The knobs this target reads, within the user's limits; targets narrow the generic space.

        Both graphs are in it: a pre-check drops `fused` for a model whose attention does not fuse.
        """
        return SearchSpace.for_host(usable_cores=limits.usable_cores, max_candidates=limits.max_candidates,
                                    batch_sizes=limits.batch_sizes, precisions=limits.precisions,
                                    max_threads=limits.max_threads).narrowed(graphs=GRAPHS)

    @abstractmethod
    def env_keys(self, config: EngineConfig, ctx: EnvContext) -> dict[str, str]:
        """The `.env` block for a configuration; no value is ever empty."""

    def load_model(self, ref: str | os.PathLike[str] | None) -> ModelBundle:
        """The model this target runs: `ref` a directory, or None / "default" for the embedded default (in the
        stand-in-head form where the target loads only a stock cross-encoder)."""
        from autotune.runtime.model import resolve_model

        default = ref is None or str(ref) == "default"
        return resolve_model(None if default or ref is None else Path(ref), stock=self.stock_default)

    def pool(self, bundle: ModelBundle, *, has_vnni: bool, usable_cores: int,
             max_tokens: int | None = None) -> ScoringPool:
        from autotune.runtime.sessions import EnginePool

        return EnginePool(bundle, has_vnni=has_vnni, traits=self.traits(usable_cores, bundle.max_length, max_tokens))

    def baseline(self, space: SearchSpace) -> EngineConfig:
        """Hindsight's defaults for this target, as they behave on this workload."""
        return space.baseline()

    def load_concurrency(self, requested: int | None, user_env: Mapping[str, str]) -> int:
        """The recalls at once each candidate is timed under: what the user declares (default 1) on a target
        Hindsight may run several reranks on at once (`concurrent`); one that cannot refuses more."""
        from autotune.errors import OptionsError

        if requested not in (None, 1) and not self.concurrent:
            raise OptionsError(f"--concurrency does not apply to --target {self.name}: autotune tunes it for one "
                               "rerank at a time")
        return requested or 1

    def model_dir(self, where: Callable[[], Path]) -> Path | None:
        """Where this target's emitted model directory lives (`where()`), or None for a target that emits none:
        the one question `run`, `apply`, `check` and the rebuild ask of it."""
        return where() if self.emits_model else None

    def served_by(self) -> str | None:
        """The module whose process serves this target when autotune serves it (the sidecar: it is timed under
        Hindsight's concurrent recalls, sizes the TEI client's keys, and its process's memory is measured);
        None where Hindsight runs the reranker in its own process."""
        return self.server_module if self.sidecar else None

    def missing_in(self, version: tuple[int, ...]) -> str | None:
        """Why a Hindsight of `version` cannot run this target (its provider is newer), or None when it can."""
        if tuple(version) >= self.min_hindsight:
            return None
        return f"which has no `{self.name}` reranker (new in {'.'.join(map(str, self.min_hindsight))})"

    def tuned_max_tokens(self, model: Mapping[str, object]) -> int | None:
        """The pair truncation a profile's `model` section was tuned with, where this target reads one."""
        value = model.get("max_tokens")
        return value if self.has_max_tokens and isinstance(value, int) and not isinstance(value, bool) else None

    def defaults_for(self, reference: str) -> tuple[str, EngineConfig] | None:
        """`bench`: this target's defaults, in words and as a configuration, when `reference` names them."""
        return (self.defaults_label, self.defaults()) if reference == self.defaults_reference else None

    def bench_references(self) -> tuple[str, ...]:
        """`bench`: what a profile of this target races when the user names nothing."""
        return self.bench_against

    def compose_wanted(self, model_path_in_container: str | None) -> bool:
        """Whether `run` writes a compose override: in Hindsight's own container the emitted model must be
        mounted, which needs the path it is mounted at (a sidecar's service needs nothing more)."""
        return self.sidecar or model_path_in_container is not None

    def no_compose_note(self) -> str | None:
        """What `run` says when it wrote no override (None: nothing to say)."""
        if self.sidecar:
            return None
        return ("no compose override: Hindsight reads the paths above on this host; for a container, rerun with "
                "--model-path-in-container /models/reranker")

    def helm_refusal(self) -> str | None:
        """Why `autotune helm` cannot deploy this target's profile (None: it can, as the chart's sidecar)."""
        if self.sidecar:
            return None
        return (f"`autotune helm` needs a profile tuned for --target tei (the sidecar); this one is `{self.name}`: "
                "for Hindsight's in-process providers use `autotune apply` and put its keys in api.env")

    def container_keys(self, directory: str) -> dict[str, str]:
        """The keys that name the emitted model directory, pointing at `directory` (where a container mounts
        it); empty for a target that emits none."""
        return {}

    def loaded_from(self, env: Mapping[str, str]) -> tuple[Path, Path] | None:
        """Where Hindsight, reading these keys, loads the emitted model from: the model file and the directory
        of the rest (tokenizer, config); None for a target that emits none or keys that name none."""
        return None

    def defaults(self) -> EngineConfig:
        """Hindsight's defaults for this target, whatever the workload (what `bench` races)."""
        return BASELINE

    def env_problems(self, keys: Mapping[str, str], config: EngineConfig, *, positions: int | None,
                     cores: int) -> list[str]:
        """One line per key whose value this host or model cannot run, or that says other than the profile's own
        configuration (`ONNX_BATCH_SIZE=4096` where the configuration says 2): Hindsight's parser accepts both."""
        from autotune.runtime.targets.key_spec import POSITIONS, limit_problems

        # the keys the configuration alone decides: the same under two contexts that differ in everything else
        one = self.env_keys(config, EnvContext(model_ref="default", model_dir="/models/a", tei_url="http://a:8080",
                                               tei_batch_size=1, max_tokens=1, usable_cores=1))
        two = self.env_keys(config, EnvContext(model_ref="/m/b", model_dir="/models/b", tei_url="http://b:9090",
                                               tei_batch_size=300, max_tokens=2, usable_cores=64))
        decided = {k: v for k, v in one.items() if two.get(k) == v and k in self.config_keys
                   and self.env_spec[k].limit != POSITIONS}
        out = limit_problems(keys, self.env_spec, positions=positions, cores=cores)  # cannot run: said first
        return out + [f"{key} is {keys[key]}, but the profile's configuration ({config.label()}) says {want}"
                      for key, want in decided.items() if key in keys and str(keys[key]) != want]
