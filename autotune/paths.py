"""Where autotune keeps its cache (built models, references) and state (studies), and whether a run may read
what is cached there.

Both directories are private (issue 50): created 0700, and refused when another user could write them, since a
planted reference or sensitivity file would steer the next run. `--fresh` reads none of the caches a run can
rebuild.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import platformdirs

from autotune.errors import OutputError

CACHE_ENV = "AUTOTUNE_CACHE_DIR"
STATE_ENV = "AUTOTUNE_STATE_DIR"
_reading = {"caches": True}


def cache_dir() -> Path:
    return private_dir(Path(os.environ.get(CACHE_ENV) or platformdirs.user_cache_dir("autotune")), CACHE_ENV)


def state_dir() -> Path:
    return private_dir(Path(os.environ.get(STATE_ENV) or platformdirs.user_state_dir("autotune")), STATE_ENV)


def private_dir(path: Path, env: str) -> Path:
    """`path`, created 0700 where missing; an OutputError where another user owns it or could write it."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError as exc:
        raise OutputError(f"cannot use {path} ({env}): {exc.strerror or exc}") from exc
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(f"cannot use {path} ({env}): it is not a directory")
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        mode = st.st_mode & 0o777
        who = "another user owns it" if st.st_uid != os.geteuid() else f"others can write it (mode {mode:o})"
        raise OutputError(f"refusing to use {path} ({env}): {who}, so a file planted there could steer a run; "
                          f"`chmod 700 {path}` it, or set {env} to a directory of your own")
    return path


def read_caches(flag: bool) -> None:
    """`--fresh` says False: nothing cached that a run can rebuild is read, only rewritten."""
    _reading["caches"] = flag


def caches_readable() -> bool:
    return _reading["caches"]
