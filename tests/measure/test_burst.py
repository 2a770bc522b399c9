"""The served worst case's sizing: rows as the engine cuts them, and the longest input length whose burst fits."""

from __future__ import annotations

import pytest

from autotune.measure.burst import BurstShape
from autotune.measure.memory import ESTIMATE_MARGIN, RUNTIME_MB, ModelMemory
from autotune.runtime.engine import plan_batches

MODEL = ModelMemory(weights_mb=40.0, layers=2, heads=4, hidden=64, intermediate=256)


@pytest.mark.parametrize("length", [1, 7, 512, 2047, 2048, 8192, 20000])
def test_rows_are_the_engines_largest_batch_at_one_length(length):
    shape = BurstShape(workers=2, shared_session=False, batch_size=16, max_batch_tokens=16384)
    batches = plan_batches(list(range(40)), [length] * 40, 16, 16384)
    assert shape.rows_at(length) == max(len(b) for b in batches)
    assert BurstShape(2, False, 16, None).rows_at(length) == 16


def test_a_shared_session_counts_its_weights_once():
    own, shared = BurstShape(3, False, 8, None), BurstShape(3, True, 8, None)
    session = 2 * MODEL.weights_mb + RUNTIME_MB
    assert own.estimate_mb(MODEL, 100) - shared.estimate_mb(MODEL, 100) == pytest.approx(2 * session)
    assert shared.estimate_mb(MODEL, 100) == pytest.approx(session + 3 * MODEL.batch_mb(8, 100))


def test_the_longest_fitting_length_is_the_boundary():
    shape = BurstShape(2, False, 8, 16384)
    room = ESTIMATE_MARGIN * shape.estimate_mb(MODEL, 3000) + 1e-6
    found = shape.longest_within(MODEL, 8192, room)
    assert found == 3000 or (found is not None and ESTIMATE_MARGIN * shape.estimate_mb(MODEL, found) <= room
                             < ESTIMATE_MARGIN * shape.estimate_mb(MODEL, found + 1))
    assert shape.longest_within(MODEL, 8192, 10**9) == 8192  # everything fits: the model's own length
    assert shape.longest_within(MODEL, 8192, 1.0) is None  # not even the weights fit
