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


def test_amx_is_reported_with_whether_the_os_enables_it():
    """Issue 44: the CPU's AMX parts, and the kernel's listing of them (what XCR0 enables), apart."""
    from autotune.analysis.summary import format_amx
    from autotune.host import amx_support

    cpu = {"avx512_vnni", "amx_tile", "amx_int8", "amx_bf16"}
    on = amx_support(cpu, kernel_flags=cpu)
    assert on == {"amx_tile": True, "amx_int8": True, "amx_bf16": True, "os_enabled": True}
    off = amx_support(cpu, kernel_flags={"avx512_vnni"})
    assert off["amx_int8"] and off["os_enabled"] is False
    assert amx_support({"avx2"}, kernel_flags={"avx2"})["os_enabled"] is False
    assert amx_support(cpu, kernel_flags=None)["os_enabled"] is None
    assert "use the tiles" in format_amx(on) and "int8 runs on VNNI" in format_amx(off)
    assert format_amx({}).startswith("none")


def test_amx_is_not_part_of_the_fingerprint():
    """Profiles committed before AMX was reported keep matching their hosts."""
    from dataclasses import replace

    from autotune.host import HostProbe

    host = HostProbe().probe()
    assert replace(host, amx={}).fingerprint == host.fingerprint
    assert HostInfo.from_dict(host.to_dict()) == host


def test_the_cpu_is_read_once_per_process(monkeypatch):
    """py-cpuinfo times cpuid in a child process (about 1 s): a second probe in the same process reuses the first
    reading, and a caller that changes what it got back changes nothing for the next."""
    import cpuinfo

    from autotune import host

    calls = []
    monkeypatch.setattr(cpuinfo, "get_cpu_info", lambda: calls.append(1) or {"flags": ["avx2"], "brand_raw": "x"})
    host._cpu_info.cache_clear()
    try:
        first = HostProbe().cpu_info()
        first["flags"].append("avx512f")
        assert HostProbe().cpu_info() == {"flags": ["avx2"], "brand_raw": "x"}
        assert HostProbe().probe().isa["avx2"] and len(calls) == 1
    finally:
        host._cpu_info.cache_clear()
