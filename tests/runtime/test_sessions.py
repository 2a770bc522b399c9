"""The engine pool: sessions shared by configuration, bounded in number, and built per worker as each target
serves (one shared session in Hindsight's process, one each in the sidecar's)."""

from __future__ import annotations

import pytest

from autotune.runtime.engine import EngineConfig, EngineTraits
from autotune.runtime.model import load_model_dir
from autotune.runtime.sessions import WARM_UP_ROUNDS, EnginePool, warm_up

CONFIG = EngineConfig(batch_size=4, intra_op_threads=1, length_sort=True, precision="fp32", workers=3)


@pytest.fixture(scope="module")
def bundle(tiny_model_dir):
    return load_model_dir(tiny_model_dir)


def test_workers_share_one_session_only_where_the_target_does(bundle):
    shared = EnginePool(bundle, has_vnni=False, traits=EngineTraits(shared_session=True)).serving(CONFIG)
    own = EnginePool(bundle, has_vnni=False).serving(CONFIG)
    assert len(shared) == len(own) == 3
    assert len({id(e.backend) for e in shared}) == 1
    assert len({id(e.backend) for e in own}) == 3


def test_batch_size_and_sort_reuse_a_session_and_at_most_max_sessions_stay(bundle):
    pool = EnginePool(bundle, has_vnni=False, max_sessions=1)
    first = pool.engine(CONFIG).backend
    assert pool.engine(EngineConfig(16, 1, False, "fp32")).backend is first  # engine-side knobs only
    other = pool.engine(EngineConfig(4, 2, True, "fp32")).backend
    assert other is not first and len(pool._backends) == 1


def test_the_target_truncation_applies_to_every_engine(bundle):
    pool = EnginePool(bundle, has_vnni=False, traits=EngineTraits(max_tokens=16))
    assert pool.max_length == 16 and pool.tokenizer.max_length == 16
    assert EnginePool(bundle, has_vnni=False, traits=EngineTraits(max_tokens=10**6)).max_length == bundle.max_length


def test_warm_up_scores_small_batches_on_every_engine():
    class Recorder:
        def __init__(self) -> None:
            self.calls: list[int] = []

        def score(self, query: str, documents: list[str]) -> None:
            self.calls.append(len(documents))

    engines = [Recorder(), Recorder()]
    warm_up(engines, 5)  # type: ignore[arg-type]
    assert [e.calls for e in engines] == [[5] * WARM_UP_ROUNDS] * 2


def test_releasing_the_sessions_gives_the_heap_back(tiny_model_dir, monkeypatch):
    """Issue 52: glibc kept a dropped 2.2 GB session's heap, and the RSS the budget watches never fell."""
    from autotune.runtime import sessions

    given: list[bool] = []
    monkeypatch.setattr(sessions, "give_back", lambda: given.append(True))
    pool = sessions.EnginePool(load_model_dir(tiny_model_dir), has_vnni=False)
    pool.release()
    assert given == [True]
