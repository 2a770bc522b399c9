"""One search per host at a time: two would corrupt each other's timings.

The lock is host-wide, not per state directory: runs with different `AUTOTUNE_STATE_DIR`s, or by different
users, share the same cores just as much. It lives in the system's temporary directory (or
`AUTOTUNE_LOCK_DIR`, which a container sharing a host's cores can mount), readable and writable by every
user. An OS file lock (flock) is released by the kernel when its holder dies, so a crashed or killed run
never leaves it stuck.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from autotune.errors import LockedError

LOCK_NAME = "autotune-measuring.lock"
LOCK_ENV = "AUTOTUNE_LOCK_DIR"


def lock_dir() -> Path:
    """Where the host-wide measuring lock lives: shared by every user and state directory on the host."""
    import tempfile

    return Path(os.environ.get(LOCK_ENV) or tempfile.gettempdir())


@contextlib.contextmanager
def host_lock(directory: Path | None = None) -> Iterator[None]:
    """Hold the host's measuring lock for the block, or a LockedError naming the run that holds it."""
    directory = lock_dir() if directory is None else directory
    directory.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(directory / LOCK_NAME), mode=0o666)  # another user's run must be able to take it
    owner = directory / f"{LOCK_NAME}.owner"
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise LockedError(f"another autotune run is measuring on this host ({_holder(owner)}); two searches at "
                          "once would corrupt each other's timings: wait for it to finish") from None
    try:
        with contextlib.suppress(OSError):  # the note is a courtesy; the lock is what counts
            owner.write_text(f"pid {os.getpid()}")
            owner.chmod(0o666)
        yield
    finally:
        lock.release()


def _holder(owner: Path) -> str:
    try:
        return owner.read_text()[:40].strip() or "pid unknown"
    except OSError:
        return "pid unknown"
