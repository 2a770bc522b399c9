"""Where autotune keeps its cache (built models, references) and state (studies)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

CACHE_ENV = "AUTOTUNE_CACHE_DIR"
STATE_ENV = "AUTOTUNE_STATE_DIR"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or platformdirs.user_cache_dir("autotune"))


def state_dir() -> Path:
    return Path(os.environ.get(STATE_ENV) or platformdirs.user_state_dir("autotune"))
