"""The last phase of a run: check every output path up front, then stage the model directory and the files,
check them, and put them all in place together, or none.

It takes the paths as `OutputPaths` (not the pipeline's options) and the pick as `Pick` (not the run's record), and
the pipeline describes the profile from what was staged (`Emitted`), so `outputs` needs nothing above it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.fileio import StagedFiles, check_writable
from autotune.outputs.compose import check_container_path
from autotune.outputs.envfile import MergeResult, check_value, merge_env, read_text_exact, user_values
from autotune.outputs.model_dir import StagedModel, TokenizerCheck, check_tokenizer, stage_model_dir
from autotune.outputs.ownership import check_compose_out, check_model_out, check_profile_out, refuse_collisions
from autotune.outputs.profile import (
    DEFAULT_TEI_URL,
    profile_name,
    profile_path,
    render_profile,
    tei_batch_size,
)
from autotune.signals import deferred_interrupts

if TYPE_CHECKING:
    from autotune.host import HostInfo
    from autotune.runtime.engine import EngineConfig, ScoringPool
    from autotune.runtime.model import ModelBundle
    from autotune.runtime.targets import Target
    from autotune.workload.queries import Workload


@dataclass(frozen=True)
class OutputPaths:
    """Where a run writes, and the two values that end up in `.env` lines besides the target's own."""

    env_file: Path = Path(".env")
    profile_dir: Path = Path("profiles")
    compose_file: Path | None = Path("compose.autotune.yaml")
    model_out: Path | None = None  # default: models/<profile name>, beside the profile directory
    model_path_in_container: str | None = None
    tei_url: str = DEFAULT_TEI_URL
    name: str | None = None

    def profile_name(self, host: HostInfo) -> str:
        return self.name or profile_name(host.brand, host.cores.usable, host.fingerprint)

    def model_dir(self, name: str) -> Path:
        return self.model_out if self.model_out is not None else Path(self.profile_dir).parent / "models" / name

    def compose(self, target: Target) -> Path | None:
        """The override is written for a sidecar, or for an in-process target that names its container path."""
        if self.compose_file is None or not target.compose_wanted(self.model_path_in_container):
            return None
        return self.compose_file


@dataclass(frozen=True)
class Pick:
    """What the files say of a run's pick: its configuration, and the keys its phases found besides the target's."""

    config: EngineConfig
    scope_keys: dict[str, str]  # what Hindsight hands any provider: the pool, the token cut
    client_keys: dict[str, str]  # a sidecar's client keys, sized under load
    served_max_length: int | None = None  # the longest pair the memory budget was measured for


@dataclass(frozen=True)
class Emitted:
    """What the commit staged, for the profile that describes it."""

    name: str
    env_keys: dict[str, str]
    model_dir: str | None
    model_path_in_container: str | None
    tokenizer_check: dict[str, Any] | None
    emitted_sha256: str | None
    model_files: dict[str, str] | None


@dataclass(frozen=True)
class Written:
    """What the commit put in place."""

    profile_path: Path
    profile: dict[str, Any]
    env: MergeResult
    compose_path: Path | None
    model_dir: Path | None
    tokenizer_check: TokenizerCheck | None


def check_outputs(paths: OutputPaths, target: Target, name: str, *, inputs: dict[str, Path | None]) -> None:
    """Every output must be writable, autotune's own or new, and no input of this run, and the `.env` block
    intact, before anything is measured."""
    if paths.model_path_in_container is not None:
        check_value("--model-path-in-container", paths.model_path_in_container)  # a line break: named as one
        check_container_path(paths.model_path_in_container)
    check_value("--tei-url", paths.tei_url)  # an .env value: one line, no credential, checked now
    profile = profile_path(paths.profile_dir, name)
    compose = paths.compose(target)
    model_out = target.model_dir(lambda: paths.model_dir(name))
    refuse_collisions(inputs, {"--env-file": paths.env_file, "the profile": profile, "--compose-file": compose,
                               "--model-out": model_out}, model_out=model_out)
    check_writable(paths.env_file)
    merge_env(read_text_exact(paths.env_file), {})  # a damaged block fails now, not after the search
    check_writable(profile)
    check_profile_out(profile)
    if compose is not None:
        check_writable(compose)
        check_compose_out(compose)
    if model_out is not None:
        check_value("--model-out", str(model_out.resolve()))  # the .env names it: one plain line, checked now
        check_model_out(model_out)
        check_writable(model_out.parent / "x")


def write_outputs(paths: OutputPaths, *, target: Target, pick: Pick, host: HostInfo, bundle: ModelBundle,
                  pool: ScoringPool, workload: Workload, model_ref: str, max_tokens: int,
                  describe: Callable[[Emitted], dict[str, Any]]) -> Written:
    """Stage the model directory (checked token for token), then commit it with the files; `describe` makes the
    profile from what was staged."""
    name = paths.profile_name(host)  # --name was checked up front
    staged, check = None, None
    model_dir = target.model_dir(lambda: paths.model_dir(name))
    if model_dir is not None:
        staged, check = _stage_model(model_dir, bundle, pool, pick.config, workload, name, max_tokens)
    try:
        return _commit(paths, target=target, pick=pick, host=host, workload=workload, name=name,
                       model_ref=model_ref, max_tokens=max_tokens, staged=staged, check=check, model_dir=model_dir,
                       describe=describe)
    finally:
        if staged is not None:
            staged.discard()  # a no-op once committed; otherwise nothing half-made is left beside it


def _stage_model(destination: Path, bundle: ModelBundle, pool: ScoringPool, winner: EngineConfig,
                 workload: Workload, name: str, max_tokens: int) -> tuple[StagedModel, TokenizerCheck]:
    """The directory Hindsight will load, checked token for token before it is put in place."""
    from autotune.runtime.backends import inspect_graph
    from autotune.runtime.tokenize import PairTokenizer

    input_names = inspect_graph(bundle.onnx_path)[0]
    staged = stage_model_dir(destination, onnx_file=pool.model_path(winner) or bundle.onnx_path,
                             source_dir=bundle.directory, input_names=input_names, max_tokens=max_tokens, owner=name,
                             torch_dir=pool.checkpoint)
    try:
        tokenizer = PairTokenizer(bundle.tokenizer_path, max_tokens)
        expected = [[{"input_ids": e.ids, "token_type_ids": e.type_ids, "attention_mask": [1] * len(e.ids)}
                     for e in tokenizer.encode(q.query, q.documents)] for q in workload.queries]
        pairs = [tokenizer.pairs(q.query, q.documents) for q in workload.queries]  # a 50 MB text, cut: 7.6 GB
        check = check_tokenizer(staged.staging, pairs, expected, max_tokens, input_names)
    except BaseException:
        staged.discard()
        raise
    return staged, check


def _commit(paths: OutputPaths, *, target: Target, pick: Pick, host: HostInfo, workload: Workload, name: str,
            model_ref: str, max_tokens: int, staged: StagedModel | None, check: TokenizerCheck | None,
            model_dir: Path | None, describe: Callable[[Emitted], dict[str, Any]]) -> Written:
    """Build the keys and the profile, stage every file, then put the model directory and the files in place."""
    from autotune.outputs.compose import render_for_target
    from autotune.runtime.targets import EnvContext

    env_model_dir = paths.model_path_in_container or (str(model_dir.resolve()) if model_dir is not None else None)
    env_text = read_text_exact(paths.env_file)
    ctx = EnvContext(model_ref=model_ref, model_dir=env_model_dir, tei_url=paths.tei_url,
                     tei_batch_size=tei_batch_size(user_values(env_text), workload.max_candidates),
                     max_tokens=max_tokens, usable_cores=host.cores.usable, client_keys=pick.client_keys,
                     served_max_length=pick.served_max_length)
    keys = {**target.env_keys(pick.config, ctx), **pick.scope_keys}
    profile = describe(Emitted(name=name, env_keys=keys, model_dir=None if model_dir is None else str(model_dir),
                               model_path_in_container=paths.model_path_in_container,
                               tokenizer_check=None if check is None else check.to_dict(),
                               emitted_sha256=None if staged is None else staged.sha256,
                               model_files=None if staged is None else staged.files))
    merge = merge_env(env_text, keys)
    path = profile_path(paths.profile_dir, name)
    compose_path = paths.compose(target)
    compose_text = None if compose_path is None else render_for_target(
        target, profile_dir=paths.profile_dir, env_file=paths.env_file, model_dir=model_dir, cpus=host.cores.usable,
        profile_file=path.name, model_path_in_container=paths.model_path_in_container, base=compose_path.parent)
    with deferred_interrupts(), StagedFiles() as files:  # every file, or none: staged first, renamed together
        files.add(path, render_profile(profile))
        files.add(paths.env_file, merge.text.encode("utf-8", "surrogateescape"))
        if compose_path is not None and compose_text is not None:
            files.add(compose_path, compose_text)
        if staged is not None:
            staged.commit()
        files.commit()
    return Written(path, profile, merge, compose_path, model_dir, check)
