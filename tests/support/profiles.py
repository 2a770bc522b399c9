"""Profiles as `run` writes them, built without a run: for the tests of the commands that read one."""

from __future__ import annotations

from autotune.host import HostInfo
from autotune.outputs.profile import SCHEMA
from autotune.runtime.engine import EngineConfig
from autotune.runtime.targets import EnvContext
from autotune.runtime.targets.tei_sidecar import TeiTarget
from tests.support.hosts import AVX2_HOST

CONFIG = EngineConfig(batch_size=4, intra_op_threads=1, length_sort=True, precision="fp32", workers=2)


def tei_profile() -> dict:  # type: ignore[type-arg]
    ctx = EnvContext(model_ref="default", model_dir=None, tei_url="http://reranker:8080", tei_batch_size=300,
                     max_tokens=512, usable_cores=2,
                     client_keys={"HINDSIGHT_API_RERANKER_TEI_MAX_CONCURRENT": "2",
                                  "HINDSIGHT_API_RERANKER_TEI_HTTP_TIMEOUT": "30"})
    return {"schema": 1, "name": "node", "target": "tei", "host": AVX2_HOST.to_dict(), "config": CONFIG.to_dict(),
            "model": {"ref": "default"}, "env": TeiTarget().env_keys(CONFIG, ctx),
            "memory": {"served_mb": 250.0}}


INT8 = EngineConfig(batch_size=4, intra_op_threads=4, length_sort=True, precision="int8")


def drift_profile(host: HostInfo, config: EngineConfig = INT8, model_dir=None) -> dict:
    from autotune.runtime.model import load_model_dir

    sha = load_model_dir(model_dir).sha256 if model_dir else None
    return {"schema": SCHEMA, "target": "tei", "host": host.to_dict(), "config": config.to_dict(),
            "model": {"ref": str(model_dir), "sha256": sha}}
