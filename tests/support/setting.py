"""The search's, the gates' and the measuring's shared setting: the tiny model's pool, an eight-query workload
and its fp32 reference (the `setup` fixture, which tests/conftest.py offers every test), and a small space."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.runtime.engine import EngineTraits
from autotune.runtime.space import SearchSpace
from tests.support.models import write_workload

SPACE = SearchSpace(batch_sizes=(1, 4), threads=(0, 1), precisions=("fp32",))


@pytest.fixture()
def setup(tiny_model_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]  # a fixture: pytest types it
    from autotune.gates.parity import reference_scores
    from autotune.runtime.model import load_model_dir
    from autotune.runtime.sessions import EnginePool
    from autotune.workload.queries import load_workload

    workload = load_workload(write_workload(tmp_path / "q.jsonl", n_queries=8))
    pool = EnginePool(load_model_dir(tiny_model_dir), has_vnni=False, traits=EngineTraits(zero_threads=1))
    return pool, workload, reference_scores(pool, workload, "test")
