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
    monkeypatch.setattr(sessions, "give_back", lambda dropped=(): given.append(True))
    pool = sessions.EnginePool(load_model_dir(tiny_model_dir), has_vnni=False)
    pool.release()
    assert given == [True]


def _counted_collections(monkeypatch) -> list[int]:  # type: ignore[no-untyped-def]
    import gc

    from autotune.runtime import heap

    collections: list[int] = []
    real = gc.collect
    monkeypatch.setattr(heap.gc, "collect", lambda *a: collections.append(1) or real(*a))
    return collections


def test_sessions_are_freed_by_their_reference_counts_without_a_full_collection(bundle, monkeypatch):
    """A full collection cost 0.2 s in a large process, on every eviction and release (84 s of 208 in part of
    the test suite). Nothing holds a session in a cycle, so dropping it frees it at once, and none runs."""
    import gc
    import weakref

    collections = _counted_collections(monkeypatch)
    pool = EnginePool(bundle, has_vnni=False, max_sessions=1)
    gc.disable()
    try:
        first = weakref.ref(pool.engine(CONFIG).backend)
        assert first() is not None
        second = pool.engine(EngineConfig(4, 2, True, "fp32"))
        second.score("q", ["a b", "c"])
        assert first() is None  # evicted, and freed
        later = weakref.ref(second.backend)
        del second
        pool.release()
        assert later() is None
    finally:
        gc.enable()
    assert collections == []


def test_a_session_held_in_a_cycle_is_collected_on_release(bundle, monkeypatch):
    import weakref

    collections = _counted_collections(monkeypatch)
    pool = EnginePool(bundle, has_vnni=False)
    cycle: list[object] = [pool.engine(CONFIG).backend]
    cycle.append(cycle)
    held = weakref.ref(cycle[0])
    del cycle
    pool.release()
    assert held() is None and collections == [1]
