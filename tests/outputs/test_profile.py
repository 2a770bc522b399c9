from __future__ import annotations

import pytest

from autotune.errors import OptionsError
from autotune.outputs.profile import (
    SCHEMA,
    check_name,
    load_profile,
    profile_config,
    profile_name,
    tei_batch_size,
    write_profile,
)
from autotune.runtime.engine import EngineConfig

CONFIG = EngineConfig(batch_size=4, intra_op_threads=2, length_sort=True, precision="int8")


def test_tei_batch_size_follows_caps():
    assert tei_batch_size({}, 50) == 300
    assert tei_batch_size({"HINDSIGHT_API_RERANKER_MAX_CANDIDATES_MID": "450"}, 50) == 450
    assert tei_batch_size({"HINDSIGHT_API_RERANKER_MAX_CANDIDATES": ""}, 700) == 700


def test_round_trip_and_bad_profiles(tmp_path):
    path = write_profile(tmp_path, "p", {"schema": SCHEMA, "config": CONFIG.to_dict()})
    assert profile_config(load_profile(path)) == CONFIG
    (tmp_path / "old.yaml").write_text("schema: 0\nconfig: {}\n")
    with pytest.raises(OptionsError, match="not an autotune profile"):
        load_profile(tmp_path / "old.yaml")
    with pytest.raises(OptionsError, match="does not exist"):
        load_profile(tmp_path / "missing.yaml")
    with pytest.raises(OptionsError, match="incomplete"):
        profile_config({"config": {"batch_size": 4}})


def test_names():
    assert profile_name("Intel(R) Xeon(R) Gold 6338", 8, "abcdef123456") == "intel-r-xeon-r-gold-6338-8c-abcdef12"
    assert check_name("my-host.v2") == "my-host.v2"
    with pytest.raises(OptionsError):
        check_name("../etc")


def test_a_profile_names_a_known_target_or_shows_it_is_the_sidecars():
    """No silent guess: only a pre-target profile whose keys are the sidecar's reads as `tei` (issue 34)."""
    import pytest

    from autotune.errors import OptionsError
    from autotune.outputs.profile import profile_target

    assert profile_target({"target": "local"}) == "local"
    assert profile_target({"env": {"AUTOTUNE_BATCH_SIZE": "4"}}) == "tei"
    with pytest.raises(OptionsError, match="names no target"):
        profile_target({"env": {"HINDSIGHT_API_RERANKER_ONNX_BATCH_SIZE": "4"}})
    with pytest.raises(OptionsError, match="unknown"):
        profile_target({"target": "gpu"})


@pytest.mark.parametrize("value", [1e9, 2.5, True])
def test_a_profile_batch_size_must_be_a_whole_number_in_range(value):
    from autotune.errors import OptionsError
    from autotune.outputs.profile import profile_config

    config = {"batch_size": value, "intra_op_threads": 0, "length_sort": True, "precision": "fp32"}
    with pytest.raises(OptionsError, match=r"batch_size|batch size"):
        profile_config({"config": config})


def test_a_huge_profile_is_refused_unread(tmp_path):
    """Issue 46, item 13: a 200 MB profile took 55 s and 811 MB to parse."""
    from autotune.outputs.profile import MAX_PROFILE_BYTES, load_profile

    path = tmp_path / "huge.yaml"
    with open(path, "wb") as fh:
        fh.truncate(MAX_PROFILE_BYTES + 1)  # sparse: no disk, the size is what is refused
    with pytest.raises(OptionsError, match="refused unread"):
        load_profile(path)


def test_a_value_shared_by_two_places_is_written_twice_and_reads_back(tmp_path):
    """The int8 variant sits in `model` and in `parity`: a shared object once became a YAML alias, which
    `load_profile` refuses, and `check` could not read the profile the run had just written."""
    from autotune.outputs.profile import load_profile, render_profile

    shared = {"scales": "per-channel", "fp32_nodes": []}
    path = tmp_path / "p.yaml"
    path.write_text(render_profile({"schema": 1, "config": {}, "model": {"int8_variant": shared},
                                    "parity": {"variant": shared}}))
    assert "&" not in path.read_text() and load_profile(path)["model"]["int8_variant"] == shared
