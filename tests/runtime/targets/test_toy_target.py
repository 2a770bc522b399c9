"""A new target is a module and a registry line (issue 34's bar): this toy one, defined here and registered
for the test alone, is tuned end to end by `tune()`, and its keys land in `.env` with nothing outside the
targets package knowing its name."""

from __future__ import annotations

from typing import ClassVar

from autotune.outputs.envfile import managed_values
from autotune.runtime import targets
from autotune.runtime.engine import EngineConfig, EngineTraits
from autotune.runtime.targets.base import PREFIX, EnvContext, Target, no_max_tokens


class ToyTarget(Target):
    """An in-process provider that reads two keys and sorts nothing."""

    name = "toy"
    provider = "toy"
    summary = "a toy in-process provider"
    defaults_label = "toy defaults"
    config_keys: ClassVar[tuple[str, ...]] = (f"{PREFIX}TOY_BATCH",)
    env_names: ClassVar[tuple[str, ...]] = (f"{PREFIX}PROVIDER", f"{PREFIX}TOY_BATCH", f"{PREFIX}TOY_THREADS")

    def traits(self, usable_cores: int, max_length: int, max_tokens: int | None = None) -> EngineTraits:
        no_max_tokens(self.name, max_tokens)
        return EngineTraits(sort_key="chars_desc", zero_threads=usable_cores)

    def env_keys(self, config: EngineConfig, ctx: EnvContext) -> dict[str, str]:
        return {f"{PREFIX}PROVIDER": self.provider, f"{PREFIX}TOY_BATCH": str(config.batch_size),
                f"{PREFIX}TOY_THREADS": str(config.intra_op_threads or ctx.usable_cores)}


def test_a_toy_target_is_tuned_and_written_through_the_registry_alone(tmp_path, tiny_model_dir, workload_file,
                                                                       monkeypatch):
    from autotune.pipeline.options import RunOptions
    from autotune.pipeline.tune import tune
    from autotune.search.space import SearchSettings

    monkeypatch.setitem(targets._REGISTRY, "toy", (__name__, "ToyTarget"))
    outcome = tune(RunOptions(workload=workload_file, model=tiny_model_dir, env_file=tmp_path / ".env",
                              profile_dir=tmp_path / "profiles", compose_file=None, target="toy",
                              settings=SearchSettings(trials=2, repeats=1, final_rounds=1, refine_rounds=0)))
    keys = managed_values(tmp_path / ".env")
    assert keys[f"{PREFIX}PROVIDER"] == "toy"
    assert keys[f"{PREFIX}TOY_BATCH"] == str(outcome.result.winner.config.batch_size)
    assert outcome.profile["target"] == "toy"
