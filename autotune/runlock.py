"""One search per host at a time: two would corrupt each other's timings.

An OS file lock (flock) is released by the kernel when its holder dies, so a crashed or
killed run never leaves it stuck.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from autotune.errors import LockedError


@contextmanager
def host_lock(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(directory / "run.lock"))
    owner = directory / "run.lock.owner"
    try:
        lock.acquire(timeout=0)
    except Timeout:
        pid = owner.read_text().strip() if owner.exists() else "unknown"
        raise LockedError(f"another autotune run is measuring on this host (pid {pid}); two searches at once "
                          "would corrupt each other's timings: wait for it to finish") from None
    try:
        owner.write_text(str(os.getpid()))
        yield
    finally:
        lock.release()
