"""What `bench` and `explain` load first: the profile, the workload and this host, each error its own status."""

from __future__ import annotations

import argparse

import pytest

from autotune.commands.inputs import profile_workload_host
from autotune.errors import OptionsError, WorkloadError
from autotune.host import HostProbe
from autotune.outputs.profile import write_profile
from autotune.runtime.engine import EngineConfig
from tests.support.hosts import profile_for

TUNED = EngineConfig(batch_size=2, intra_op_threads=1, length_sort=True, precision="fp32")


def test_all_three_are_loaded(tmp_path, tiny_model_dir, workload_file):
    host = HostProbe().probe()
    path = write_profile(tmp_path, "p", profile_for(host, TUNED, tiny_model_dir))
    profile, workload, probed = profile_workload_host(argparse.Namespace(profile=path, workload=workload_file))
    assert profile["config"] == TUNED.to_dict() and len(workload.queries) == 4
    assert probed.fingerprint == host.fingerprint


def test_a_bad_profile_is_an_option_error_and_a_bad_workload_a_workload_error(tmp_path, tiny_model_dir,
                                                                              workload_file):
    with pytest.raises(OptionsError):
        profile_workload_host(argparse.Namespace(profile=tmp_path / "none.yaml", workload=workload_file))
    path = write_profile(tmp_path, "p", profile_for(HostProbe().probe(), TUNED, tiny_model_dir))
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(WorkloadError):
        profile_workload_host(argparse.Namespace(profile=path, workload=tmp_path / "bad.jsonl"))
