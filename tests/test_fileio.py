from __future__ import annotations

import os
import signal

import pytest

from autotune.errors import OutputError
from autotune.fileio import check_writable, deferred_interrupts, write_atomic


def test_write_atomic_replaces_whole_file_and_keeps_mode(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_text("old")
    os.chmod(path, 0o640)
    write_atomic(path, "new")
    assert path.read_text() == "new" and (path.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["f.yaml"]


def test_failed_write_leaves_old_content_and_no_temp(tmp_path):
    path = tmp_path / "f"
    path.write_text("old")

    with pytest.raises(TypeError):
        write_atomic(path, 123)  # type: ignore[arg-type]
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["f"]


def test_unwritable_locations(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OutputError, match="not a directory"):
        check_writable(blocker / "sub" / ".env")
    with pytest.raises(OutputError):
        write_atomic(blocker / "x", "data")
    check_writable(tmp_path / "new-dir" / "x.yaml")  # a directory that can be created is fine


def test_interrupts_wait_until_outputs_are_written(tmp_path):
    path = tmp_path / "a"
    with pytest.raises(KeyboardInterrupt), deferred_interrupts():
        os.kill(os.getpid(), signal.SIGINT)
        write_atomic(path, "landed")
    assert path.read_text() == "landed"
