from __future__ import annotations

import json

import pytest

from autotune.host import FileProbe, HostInfo, HostProbe, cgroup_cpu_limit
from tests.support.hosts import AVX2_HOST, VNNI_HOST


def test_fingerprint_is_stable_and_sensitive():
    assert VNNI_HOST.fingerprint == HostInfo.from_dict(json.loads(json.dumps(VNNI_HOST.to_dict()))).fingerprint
    assert VNNI_HOST.fingerprint != AVX2_HOST.fingerprint
    assert FileProbe  # the seam the CLI honours through AUTOTUNE_PROBE_FILE


@pytest.mark.parametrize(("files", "expected"), [
    ({"/sys/fs/cgroup/cpu.max": "400000 100000"}, 4.0),
    ({"/sys/fs/cgroup/cpu.max": "150000 100000"}, 1.5),
    ({"/sys/fs/cgroup/cpu.max": "max 100000"}, None),
    ({"/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "200000", "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000"}, 2.0),
    ({"/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1", "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000"}, None),
    ({}, None),
])
def test_cgroup_quota(files, expected):
    assert cgroup_cpu_limit(files.get) == expected


def test_usable_cores_is_affinity_capped_by_quota():
    class Container(HostProbe):
        def affinity(self) -> int:
            return 16

        def read_text(self, path: str) -> str | None:
            return "400000 100000" if path == "/sys/fs/cgroup/cpu.max" else None

    host = Container().probe()
    assert host.cores.usable == 4
    assert set(host.isa) == {"avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8"}
