from __future__ import annotations

import os
import signal

import pytest

from autotune.errors import OutputError
from autotune.fileio import check_writable, write_atomic
from autotune.signals import deferred_interrupts


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


def test_a_rewritten_file_keeps_its_owner_group_and_mode(tmp_path):
    """Issue 46, item 8: a `.env` owned by `nobody`, mode 600, became root's after a run as root, and its owner
    could no longer read it. (As another user than root, the owner is the writer's own: mode is what is held.)"""
    import os

    from autotune.fileio import write_atomic

    path = tmp_path / ".env"
    path.write_text("A=1\n")
    os.chmod(path, 0o600)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)
    before = path.stat()
    write_atomic(path, "A=2\n")
    after = path.stat()
    assert path.read_text() == "A=2\n"
    assert (after.st_uid, after.st_gid, after.st_mode & 0o7777) == (before.st_uid, before.st_gid, 0o600)


def test_a_hard_linked_file_is_refused_and_both_names_keep_their_bytes(tmp_path):
    import os

    import pytest

    from autotune.errors import OutputError
    from autotune.fileio import check_writable, write_atomic

    path, other = tmp_path / ".env", tmp_path / "deploy.env"
    path.write_text("A=1\n")
    os.link(path, other)
    with pytest.raises(OutputError, match="hard link"):
        check_writable(path)
    with pytest.raises(OutputError, match="hard link"):
        write_atomic(path, "A=2\n")
    assert path.read_text() == other.read_text() == "A=1\n" and os.path.samefile(path, other)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".env", "deploy.env"]  # no staged file left


# ---- issue 50, items 5 and 6: cache files never follow a link; what autotune reads is a bounded regular file ----


def test_a_cache_write_replaces_a_planted_link_and_never_writes_where_it_points(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    cache = tmp_path / "cache" / "entry.json"
    cache.parent.mkdir()
    cache.symlink_to(victim)
    write_atomic(cache, "{}", output=False)
    assert victim.read_text() == "precious"
    assert not cache.is_symlink() and cache.read_text() == "{}" and cache.stat().st_mode & 0o777 == 0o600


def test_a_bound_cache_entry_is_read_only_for_what_made_it(tmp_path):
    from autotune.fileio import read_bound, write_bound

    path = tmp_path / "e.bin"
    write_bound(path, {"model": "a", "n": 1}, b"payload\nwith lines")
    assert read_bound(path, {"model": "a", "n": 1}) == (b"payload\nwith lines", None)
    payload, why = read_bound(path, {"model": "b", "n": 1})
    assert payload is None and "another model" in str(why)
    assert read_bound(tmp_path / "missing", {}) == (None, None)
    link = tmp_path / "link.bin"
    link.symlink_to(path)
    payload, why = read_bound(link, {"model": "a", "n": 1})
    assert payload is None and "symbolic link" in str(why)


@pytest.mark.parametrize("kind", ["device", "fifo", "directory", "procfs", "too large"])
def test_only_a_regular_file_within_the_limit_is_read(tmp_path, kind):
    from autotune.errors import OptionsError
    from autotune.fileio import read_regular

    path = {"device": "/dev/zero", "procfs": "/proc/self/mem", "directory": str(tmp_path)}.get(kind)
    if kind == "fifo":
        path = str(tmp_path / "p.yaml")
        os.mkfifo(path)
    elif kind == "too large":
        path = str(tmp_path / "big.yaml")
        with open(path, "wb") as fh:
            fh.write(b"x" * 2048)
    with pytest.raises(OptionsError, match=r"refused|cannot be read"):
        read_regular(path, 1024, what="profile", error=OptionsError)  # type: ignore[arg-type]
