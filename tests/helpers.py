"""Small builders shared by tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune.engine import EngineConfig
from autotune.host import HostInfo
from autotune.model import load_model_dir
from autotune.profile import SCHEMA


def profile_for(host: HostInfo, config: EngineConfig, model_dir: Path) -> dict[str, Any]:
    bundle = load_model_dir(model_dir)
    return {"schema": SCHEMA, "name": "test", "host": host.to_dict(), "config": config.to_dict(),
            "model": {"name": bundle.name, "ref": str(model_dir), "sha256": bundle.sha256}}
