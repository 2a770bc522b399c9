"""Where autotune keeps its cache (built models, references), its state (studies) and its host lock."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

CACHE_ENV = "AUTOTUNE_CACHE_DIR"
STATE_ENV = "AUTOTUNE_STATE_DIR"
LOCK_ENV = "AUTOTUNE_LOCK_DIR"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or platformdirs.user_cache_dir("autotune"))


def state_dir() -> Path:
    return Path(os.environ.get(STATE_ENV) or platformdirs.user_state_dir("autotune"))


def lock_dir() -> Path:
    """Where the host-wide measuring lock lives: shared by every user and state directory on the host."""
    import tempfile

    return Path(os.environ.get(LOCK_ENV) or tempfile.gettempdir())
