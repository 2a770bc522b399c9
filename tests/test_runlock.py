"""One search per host: the lock is shared by every state directory and user, and dies with its holder."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from autotune.errors import LockedError
from autotune.runlock import LOCK_NAME, host_lock, lock_dir


def test_a_second_holder_is_refused_naming_the_first(tmp_path):
    with host_lock(tmp_path), pytest.raises(LockedError, match=f"pid {os.getpid()}"), host_lock(tmp_path):
        pass
    with host_lock(tmp_path):  # released on exit: taken again
        pass


def test_the_lock_is_writable_by_every_user(tmp_path):
    with host_lock(tmp_path):
        mode = stat.S_IMODE((tmp_path / LOCK_NAME).stat().st_mode)
    assert mode & 0o666 == 0o666


def test_a_killed_holder_leaves_no_lock(tmp_path):
    code = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from autotune.runlock import host_lock
        with host_lock(Path({str(tmp_path)!r})):
            print("held", flush=True)
            sys.stdin.readline()
    """)
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with pytest.raises(LockedError), host_lock(tmp_path):
        pass
    holder.kill()
    holder.wait()
    with host_lock(tmp_path):
        pass


def test_the_lock_directory_is_the_hosts_unless_set(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOTUNE_LOCK_DIR", str(tmp_path))
    assert lock_dir() == tmp_path
    monkeypatch.delenv("AUTOTUNE_LOCK_DIR")
    import tempfile

    assert lock_dir() == type(tmp_path)(tempfile.gettempdir())
