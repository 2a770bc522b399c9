"""What `autotune run` is asked to do, and what it hands back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.gates.scope import ResultGate
from autotune.outputs.commit import OutputPaths
from autotune.outputs.profile import DEFAULT_TEI_URL
from autotune.runtime.targets import DEFAULT_TARGET
from autotune.search.space import SearchSettings

if TYPE_CHECKING:
    from autotune.gates.selfcheck import SelfCheck
    from autotune.host import HostInfo
    from autotune.outputs.envfile import MergeResult
    from autotune.outputs.model_dir import TokenizerCheck
    from autotune.pipeline.record import SearchResult
    from autotune.runtime.model import ModelBundle
    from autotune.workload.queries import Workload


@dataclass(frozen=True)
class RunOptions:
    workload: Path
    model: Path | None = None
    env_file: Path = Path(".env")
    profile_dir: Path = Path("profiles")
    name: str | None = None
    storage: str | None = None
    fresh: bool = False
    settings: SearchSettings = field(default_factory=SearchSettings)
    batch_sizes: Sequence[int] | None = None
    precisions: Sequence[str] | None = None
    max_threads: int | None = None
    tei_url: str = DEFAULT_TEI_URL
    compose_file: Path | None = Path("compose.autotune.yaml")
    target: str = DEFAULT_TARGET
    model_out: Path | None = None  # default: models/<profile name>, beside the profile directory
    model_path_in_container: str | None = None
    accept_mismatch: bool = False  # tune on a recording that does not reproduce Hindsight's own scores
    wait_quiet_s: float = 0.0  # wait up to this long for the load to fall before measuring
    write_baseline: bool = False  # when nothing passes parity, write Hindsight's defaults instead of nothing
    max_tokens: int | None = None  # the onnx target's ONNX_MAX_TOKENS (default: 512 or the model's limit)
    concurrency: int | None = None  # tei: recalls at once to tune under (default: Hindsight's TEI_MAX_CONCURRENT)
    result_gate: ResultGate = field(default_factory=ResultGate)  # the floor on what Hindsight still returns
    tune_pool: bool = True  # choose MAX_CANDIDATES_<LEVEL> and MAX_TOKENS_PER_CANDIDATE too

    def outputs(self) -> OutputPaths:
        return OutputPaths(env_file=self.env_file, profile_dir=self.profile_dir, compose_file=self.compose_file,
                           model_out=self.model_out, model_path_in_container=self.model_path_in_container,
                           tei_url=self.tei_url, name=self.name)


@dataclass(frozen=True)
class RunOutcome:
    result: SearchResult
    host: HostInfo
    bundle: ModelBundle
    workload: Workload
    profile_path: Path
    profile: dict[str, Any]
    env: MergeResult
    compose_path: Path | None
    target: str = DEFAULT_TARGET
    model_dir: Path | None = None
    tokenizer_check: TokenizerCheck | None = None
    recording_check: SelfCheck | None = None
