"""The `AUTOTUNE_*` keys: written by the `tei` target, read back by `serve`, every field both ways."""

from __future__ import annotations

import pytest

from autotune.errors import OptionsError
from autotune.runtime.engine import BASELINE, EngineConfig
from autotune.runtime.targets import EnvContext, get_target
from autotune.runtime.targets.sidecar_keys import INPUT_LENGTH_KEY, READ_KEYS, WRITTEN_KEYS, SidecarKeys

CTX = EnvContext(model_ref="default", model_dir=None, tei_url="http://reranker:8080", tei_batch_size=300,
                 max_tokens=512, usable_cores=2)


def test_the_sidecar_keys_round_trip():
    keys = SidecarKeys(EngineConfig(6, 1, True, "int8", mem_arena=True, graph="fused", spinning=False, workers=2),
                       model="/m", max_client_batch_size=2048, max_batch_tokens=9000, max_input_length=3000)
    assert SidecarKeys.from_env(keys.to_env()) == keys
    assert set(keys.to_env()) <= set(WRITTEN_KEYS) <= set(READ_KEYS)
    assert SidecarKeys.from_env(get_target("tei").env_keys(BASELINE, CTX)).config == BASELINE


def test_the_input_cut_is_written_only_where_the_run_made_one():
    """No key for the model's own length (never an empty value); the cut the burst measurement chose otherwise."""
    target = get_target("tei")
    assert INPUT_LENGTH_KEY not in target.env_keys(BASELINE, CTX)
    cut = target.env_keys(BASELINE, EnvContext(**{**CTX.__dict__, "served_max_length": 2541}))
    assert cut[INPUT_LENGTH_KEY] == "2541"
    assert SidecarKeys.from_env(cut).max_input_length == 2541


def test_a_malformed_key_is_one_line():
    env = SidecarKeys(BASELINE).to_env()
    with pytest.raises(OptionsError, match=INPUT_LENGTH_KEY):
        SidecarKeys.from_env({**env, INPUT_LENGTH_KEY: "many"})
