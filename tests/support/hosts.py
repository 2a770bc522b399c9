"""Hosts and profiles for tests: two unlike hosts, so drift and fingerprints have something to tell apart."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune.host import Cores, HostInfo
from autotune.outputs.profile import SCHEMA
from autotune.runtime.engine import EngineConfig
from autotune.runtime.model import load_model_dir

VNNI_HOST = HostInfo(brand="Intel Xeon", isa={"avx2": True, "avx512f": True, "avx512_vnni": True,
                                              "avx_vnni": False, "amx_int8": False},
                     cores=Cores(8, 16, 8), l2_cache_bytes=None, l3_cache_bytes=None, memory_bytes=1,
                     clock_hz=None, onnxruntime="1.32.0")
AVX2_HOST = replace(VNNI_HOST, brand="AMD Ryzen", isa={**VNNI_HOST.isa, "avx512f": False, "avx512_vnni": False},
                    cores=Cores(2, 2, 2))


def profile_for(host: HostInfo, config: EngineConfig, model_dir: Path, target: str = "tei") -> dict[str, Any]:
    bundle = load_model_dir(model_dir)
    return {"schema": SCHEMA, "name": "test", "target": target, "host": host.to_dict(), "config": config.to_dict(),
            "model": {"name": bundle.name, "ref": str(model_dir), "sha256": bundle.sha256}}
