"""Freed memory back to the OS, so that the RSS the memory budget watches falls when a session is dropped."""

from __future__ import annotations

import contextlib
import ctypes
import gc


def give_back() -> None:
    """Return freed heap to the OS: glibc keeps what a dropped session freed, so the RSS would not fall (a 2.2 GB
    model's session left 1.98 GB resident after it was released, and every configuration after it looked as if
    it had to fit beside it: issue 52)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: the RSS falls as the allocator decides
        ctypes.CDLL("libc.so.6").malloc_trim(0)
