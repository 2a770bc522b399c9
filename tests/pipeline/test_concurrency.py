"""Issue 33: the in-process `onnx` target tuned for the load Hindsight sees: ONNX_MAX_CONCURRENT workers over
one shared session, each candidate timed under `--concurrency` recalls with the queueing counted."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import yaml

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.outputs.envfile import managed_values
from autotune.runtime.engine import BASELINE
from autotune.runtime.model import load_model_dir
from autotune.runtime.targets import EnvContext, SpaceLimits, get_target

KEY = "HINDSIGHT_API_RERANKER_ONNX_MAX_CONCURRENT"
DOCS = ["Paris is the capital of France.", "Bananas are yellow.", "The Seine flows through Paris."]


def test_workers_share_one_session_as_hindsights_executor_does(tiny_model_dir):
    target = get_target("onnx")
    pool = target.pool(load_model_dir(tiny_model_dir), has_vnni=False, usable_cores=2)
    config = replace(target.defaults(), workers=3, intra_op_threads=1)
    engines = pool.serving(config)
    assert len(engines) == 3 and len({id(e.backend) for e in engines}) == 1
    alone = pool.engine(config).score("capital of France?", DOCS).scores
    for e in engines:
        np.testing.assert_allclose(e.score("capital of France?", DOCS).scores, alone, atol=1e-6)


def test_the_sidecars_workers_keep_a_session_each(tiny_model_dir):
    target = get_target("tei")
    pool = target.pool(load_model_dir(tiny_model_dir), has_vnni=False, usable_cores=2)
    engines = pool.serving(replace(BASELINE, workers=2, intra_op_threads=1))
    assert len({id(e.backend) for e in engines}) == 2


def test_max_concurrent_is_searched_only_under_load_and_within_the_cores():
    target = get_target("onnx")
    alone = target.space(SpaceLimits(usable_cores=2, max_candidates=50))
    loaded = target.space(SpaceLimits(usable_cores=2, max_candidates=50, concurrency=8))
    assert alone.workers == (1,) and loaded.workers == (1, 2)
    assert loaded.baseline().workers == 1  # Hindsight's default ONNX_MAX_CONCURRENT
    assert not loaded.fits(replace(loaded.baseline(), workers=2, intra_op_threads=0))  # 2 x all cores
    assert loaded.fits(replace(loaded.baseline(), workers=2, intra_op_threads=1))


def test_the_key_is_the_picks_workers():
    ctx = EnvContext(model_ref="default", model_dir="/m", tei_url="http://r:8080", tei_batch_size=300,
                     max_tokens=512, usable_cores=2)
    keys = get_target("onnx").env_keys(replace(BASELINE, workers=2, intra_op_threads=1), ctx)
    assert keys[KEY] == "2"


def test_the_estimate_counts_the_shared_weights_once(tiny_model_dir, workload_file):
    from autotune.measure.memory import ModelMemory
    from autotune.runtime.space import SearchSpace
    from autotune.search.objective import Objective
    from autotune.search.space import SearchSettings
    from autotune.workload.queries import load_workload

    bundle = load_model_dir(tiny_model_dir)
    workload = load_workload(workload_file)
    memory = ModelMemory.from_config(bundle.config, bundle.onnx_path.stat().st_size)
    space = SearchSpace(batch_sizes=(4,), threads=(1,), workers=(1, 2))

    def estimate(name: str, workers: int) -> float:
        pool = get_target(name).pool(bundle, has_vnni=False, usable_cores=2)
        objective = Objective(pool, workload, [], space, SearchSettings(), memory_budget_mb=2048,
                              memory_model=memory, lengths=pool.pair_lengths(workload.queries))
        return objective.estimate_mb(replace(BASELINE, batch_size=4, intra_op_threads=1, workers=workers))

    one, shared, separate = estimate("onnx", 1), estimate("onnx", 2), estimate("tei", 2)
    assert one < shared < separate
    assert abs(separate - 2 * estimate("tei", 1)) < 1e-6


def test_run_under_concurrent_recalls_writes_the_measured_max_concurrent(tmp_path, tiny_model_dir, workload_file):
    out, err = io.StringIO(), io.StringIO()
    status = main(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--concurrency", "4",
                   "--env-file", str(tmp_path / ".env"), "--profile-dir", str(tmp_path / "profiles"), "--name", "n",
                   "--trials", "4", "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0"],
                  stdout=out, stderr=err)
    assert status == ExitStatus.OK, err.getvalue()
    assert "each under 4 concurrent recalls" in out.getvalue()
    profile = yaml.safe_load((tmp_path / "profiles" / "n.yaml").read_text())
    assert profile["search"]["concurrency"] == 4
    assert managed_values(tmp_path / ".env")[KEY] == str(profile["config"]["workers"])


def test_local_still_refuses_concurrency(tmp_path, workload_file):
    err = io.StringIO()
    status = main(["run", "--workload", str(workload_file), "--target", "local", "--concurrency", "2",
                   "--env-file", str(tmp_path / ".env")], stdout=io.StringIO(), stderr=err)
    assert status == ExitStatus.BAD_OPTIONS and "--concurrency" in err.getvalue()
