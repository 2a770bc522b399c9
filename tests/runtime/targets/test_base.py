"""What every target shares: Hindsight's thread cap and its spelling of booleans."""

from __future__ import annotations

import pytest

from autotune.errors import OptionsError
from autotune.runtime.targets.base import flag, hindsight_native_threads, no_max_tokens


def test_hindsight_thread_cap(monkeypatch):
    assert hindsight_native_threads(64, {}) == 16
    assert hindsight_native_threads(2, {}) == 2
    assert hindsight_native_threads(64, {"OMP_NUM_THREADS": "3"}) == 3
    assert hindsight_native_threads(2, {"OMP_NUM_THREADS": "x"}) == 2


def test_thread_cap_matches_hindsights(monkeypatch):
    pytest.importorskip("hindsight_api", reason="Hindsight 1.1.0 is absent (pip install -e '.[hindsight]')")
    from hindsight_api._thread_limits import _available_cpu_count, onnx_intra_op_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert hindsight_native_threads(_available_cpu_count()) == onnx_intra_op_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert hindsight_native_threads(_available_cpu_count()) == onnx_intra_op_threads() == 3


def test_a_flag_is_one_of_the_two_spellings_hindsight_parses():
    assert (flag(True), flag(False)) == ("true", "false")


def test_max_tokens_is_refused_by_a_target_without_the_key():
    no_max_tokens("onnx", None)
    with pytest.raises(OptionsError, match="applies to --target onnx, not local"):
        no_max_tokens("local", 128)
