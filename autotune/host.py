"""What this host is, as far as reranker latency is concerned.

Collectors tolerate missing files (containers hide a lot): each fills what it can read.
`HostProbe` is the seam: tests and `AUTOTUNE_PROBE_FILE` replace what it reads, never
its internals.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import json
import math
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

ISA_FLAGS: dict[str, tuple[str, ...]] = {
    "avx2": ("avx2",),
    "avx512f": ("avx512f",),
    "avx512_vnni": ("avx512_vnni", "avx512vnni"),
    "avx_vnni": ("avx_vnni", "avxvnni"),
    "amx_int8": ("amx_int8", "amxint8"),
}

PROBE_FILE_ENV = "AUTOTUNE_PROBE_FILE"
AMX_PARTS = ("amx_tile", "amx_int8", "amx_bf16")


def amx_support(cpu_flags: set[str], kernel_flags: set[str] | None) -> dict[str, bool | None]:
    """What the CPU offers of AMX, and whether the OS enables it: Linux lists `amx_*` in /proc/cpuinfo only
    where its XSAVE setup (XCR0's tile bits) covers the tile state, so a CPU flag the kernel does not list is
    AMX the OS has not turned on; MLAS then falls back to VNNI. None: the kernel's flags were not readable."""
    out: dict[str, bool | None] = {part: part in cpu_flags or part.replace("_", "") in cpu_flags
                                   for part in AMX_PARTS}
    offered = any(out.values())
    out["os_enabled"] = None if kernel_flags is None else (offered and "amx_tile" in kernel_flags)
    return out


@dataclass(frozen=True)
class Cores:
    physical: int
    logical: int
    usable: int


@dataclass(frozen=True)
class HostInfo:
    brand: str
    isa: dict[str, bool]
    cores: Cores
    l2_cache_bytes: int | None
    l3_cache_bytes: int | None
    memory_bytes: int
    clock_hz: float | None
    onnxruntime: str
    machine: str = field(default_factory=platform.machine)
    # AMX's parts and the OS's enabling of it: reported, not in the fingerprint (`amx_int8` in `isa` is)
    amx: dict[str, bool | None] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        """Short hash of what decides performance: brand, ISA, usable cores, ORT version."""
        key = {
            "brand": self.brand,
            "isa": dict(sorted(self.isa.items())),
            "usable": self.cores.usable,
            "onnxruntime": self.onnxruntime,
        }
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def has_vnni(self) -> bool:
        return bool(self.isa.get("avx512_vnni") or self.isa.get("avx_vnni") or self.isa.get("amx_int8"))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["fingerprint"] = self.fingerprint
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostInfo:
        return cls(
            brand=str(data["brand"]),
            isa={k: bool(data["isa"].get(k, False)) for k in ISA_FLAGS},
            cores=Cores(**{k: int(data["cores"][k]) for k in ("physical", "logical", "usable")}),
            l2_cache_bytes=data.get("l2_cache_bytes"),
            l3_cache_bytes=data.get("l3_cache_bytes"),
            memory_bytes=int(data.get("memory_bytes", 0)),
            clock_hz=data.get("clock_hz"),
            onnxruntime=str(data["onnxruntime"]),
            machine=str(data.get("machine", "")),
            amx=dict(data["amx"]) if isinstance(data.get("amx"), dict) else {},
        )


def cgroup_cpu_limit(read: Any = None) -> float | None:
    """CPUs allowed by the cgroup quota (v2 cpu.max, else v1 cfs), or None when unlimited."""
    read = read or _read_text
    v2 = read("/sys/fs/cgroup/cpu.max")
    if v2:
        parts = v2.split()
        if len(parts) == 2 and parts[0] != "max":
            return int(parts[0]) / int(parts[1])
        return None
    quota = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
    period = read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
    if quota and period and int(quota) > 0:
        return int(quota) / int(period)
    return None


@functools.cache
def _cpu_info() -> dict[str, Any]:
    """py-cpuinfo's reading, once per process: it runs a Python child that times cpuid (about 1 s), and the CPU
    a process runs on does not change; a suite of in-process runs paid it on every run."""
    import cpuinfo

    return cpuinfo.get_cpu_info()


def _read_text(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except (OSError, ValueError):
        return None


class HostProbe:
    """Reads the host. Subclass and override a reader to fake a host in tests."""

    def cpu_info(self) -> dict[str, Any]:
        return copy.deepcopy(_cpu_info())

    def affinity(self) -> int:
        try:
            return len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            return psutil.cpu_count(logical=True) or 1

    def read_text(self, path: str) -> str | None:
        return _read_text(path)

    def cache_bytes(self, level: int) -> int | None:
        """From sysfs, which knows the real sizes where cpuid-based readers often guess wrong."""
        base = "/sys/devices/system/cpu/cpu0/cache"
        for index in range(8):
            if self.read_text(f"{base}/index{index}/level") == str(level):
                return _parse_size(self.read_text(f"{base}/index{index}/size"))
        return None

    def kernel_flags(self) -> set[str] | None:
        """The CPU flags the kernel lists (what it enabled), from /proc/cpuinfo; None where it cannot be read."""
        text = self.read_text("/proc/cpuinfo")
        if text is None:
            return None
        for line in text.splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
        return None

    def onnxruntime_version(self) -> str:
        import onnxruntime

        return onnxruntime.__version__

    def probe(self) -> HostInfo:
        info = self.cpu_info()
        flags = {f.lower() for f in info.get("flags", [])}
        isa = {name: any(alias in flags for alias in aliases) for name, aliases in ISA_FLAGS.items()}
        logical = psutil.cpu_count(logical=True) or 1
        physical = psutil.cpu_count(logical=False) or logical
        usable = self.affinity()
        quota = cgroup_cpu_limit(self.read_text)
        if quota is not None:
            usable = max(1, min(usable, math.ceil(quota)))
        hz = info.get("hz_advertised") or info.get("hz_actual")
        return HostInfo(
            brand=str(info.get("brand_raw") or platform.processor() or "unknown"),
            isa=isa,
            cores=Cores(physical=physical, logical=logical, usable=usable),
            l2_cache_bytes=self.cache_bytes(2) or _as_int(info.get("l2_cache_size")),
            l3_cache_bytes=self.cache_bytes(3) or _as_int(info.get("l3_cache_size")),
            memory_bytes=int(psutil.virtual_memory().total),
            clock_hz=float(hz[0]) if hz and hz[0] else None,
            onnxruntime=self.onnxruntime_version(),
            amx=amx_support(flags, self.kernel_flags()),
        )


class FileProbe(HostProbe):
    """A host described by a JSON file (the `AUTOTUNE_PROBE_FILE` seam)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def probe(self) -> HostInfo:
        return HostInfo.from_dict(json.loads(Path(self.path).read_text()))


def default_probe() -> HostProbe:
    path = os.environ.get(PROBE_FILE_ENV)
    return FileProbe(Path(path)) if path else HostProbe()


def run_conditions() -> dict[str, Any]:
    """What else was going on while measuring (pyperf-style metadata)."""
    conditions: dict[str, Any] = {}
    with contextlib.suppress(OSError):
        conditions["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    governor = _read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if governor:
        conditions["cpu_governor"] = governor
    freq = psutil.cpu_freq()
    if freq is not None and freq.current:
        conditions["cpu_mhz"] = round(freq.current, 1)
    return conditions


def _as_int(value: Any) -> int | None:
    if isinstance(value, int):
        return value
    return None


def _parse_size(text: str | None) -> int | None:
    """sysfs sizes look like "2048K" or "32M"."""
    if not text:
        return None
    units = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
    try:
        return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
    except ValueError:
        return None
