from __future__ import annotations

from dataclasses import replace

import pytest

from autotune.analysis.efficiency import ModelDims, efficiency, peak_flops
from autotune.host import Cores, HostInfo

HOST = HostInfo(brand="x", isa={"avx2": True, "avx512f": False, "avx512_vnni": False, "avx_vnni": False,
                                "amx_int8": False}, cores=Cores(4, 8, 4), l2_cache_bytes=None, l3_cache_bytes=None,
                memory_bytes=1, clock_hz=2e9, onnxruntime="1")


def test_flops_per_pair_by_hand():
    dims = ModelDims(layers=1, hidden=2, intermediate=4)
    # 8*L*H^2 + 4*L^2*H + 4*L*H*F with L=3: 96 + 72 + 96, plus pooler 2*H^2=8 and head 2*H=4
    assert dims.flops_per_pair(3) == 96 + 72 + 96 + 8 + 4
    assert ModelDims.from_config({"hidden_size": 1}) is None


def test_peak_depends_on_isa_and_usable_cores():
    assert peak_flops(HOST) == 4 * 2e9 * 32
    assert peak_flops(replace(HOST, isa={**HOST.isa, "avx512f": True})) == 4 * 2e9 * 64
    assert peak_flops(replace(HOST, clock_hz=None)) is None


def test_efficiency_excludes_padding():
    dims = ModelDims(1, 2, 4)
    eff = efficiency(dims, HOST, [[3, 3]], [1e-6], real_tokens=6, padded_tokens=9)
    assert eff.useful_gflops == pytest.approx(2 * 276 / 1e-6 / 1e9)
    assert eff.padding_overhead == 1.5
    assert eff.percent_of_peak == pytest.approx(100 * 2 * 276 / 1e-6 / (4 * 2e9 * 32))
