"""Atomic file writes and content hashes.

A user's `.env` and profile are either the old bytes or the new bytes, never a mix. A path that
is a symbolic link is written through: the new bytes replace the link's target atomically, and
the link stays a link. A cache file is the opposite: a link planted where it belongs is replaced,
never followed, and the file is the user's alone (0600). What a process has committed is recorded,
so an interrupt can say so. Files autotune reads are read as regular files, within a size limit
(`read_regular`): a profile that is `/dev/zero` or a FIFO is refused, not read until memory runs out.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path

from autotune.errors import AutotuneError, OutputError

_COMMITTED: list[Path] = []
_PARTIAL: dict[Path, str] = {}  # outputs written line by line, and what an interrupt should say of each


def record_commit(path: Path) -> None:
    """Note that `path` now holds this run's output (the commit point an interrupt reports from)."""
    _COMMITTED.append(Path(path))


def committed() -> list[Path]:
    return list(_COMMITTED)


def note_partial(path: Path, said: str | None) -> None:
    """An output that grows line by line (`record`'s workload) now holds what `said` tells; None: nothing."""
    if said is None:
        _PARTIAL.pop(Path(path), None)
    else:
        _PARTIAL[Path(path)] = said


def partial() -> list[str]:
    return list(_PARTIAL.values())


def reset_commits() -> None:
    """A new command starts with nothing committed (tests run several in one process)."""
    _COMMITTED.clear()
    _PARTIAL.clear()


def through_links(path: Path) -> Path:
    """Where writing `path` lands: the final target of a symbolic link, else `path` itself."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _refuse_hard_link(path: Path) -> None:
    """A file with several names keeps them only if written in place, which is not atomic: refused instead."""
    try:
        links = path.stat().st_nlink if path.is_file() else 1
    except OSError:
        return
    if links > 1:
        raise OutputError(f"cannot write {path}: it is a hard link ({links} names), which replacing it atomically "
                          "would split; give the path of a file with one name (a symbolic link is written through)")


def _keep_owner(tmp: str, path: Path) -> None:
    """The new file gets the old one's owner and group: a `.env` owned by `nobody`, written by root, must stay
    readable to its owner."""
    if not path.exists():
        return
    st = path.stat()
    if (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid()):
        return
    try:
        os.chown(tmp, st.st_uid, st.st_gid)
    except PermissionError as exc:
        raise OutputError(f"cannot write {path}: it belongs to uid {st.st_uid}, gid {st.st_gid}, and a new file "
                          "could not keep that owner; run as its owner") from exc


def _stage(path: Path, payload: bytes, *, private: bool = False) -> Path:
    """Write `payload` to a temp file beside `path`, with the mode and owner `path` has (or would get); a
    `private` one (a cache file) gets 0600 and this process's owner, whatever stands at `path`."""
    if not private:
        _refuse_hard_link(path)
    directory = path.parent if str(path.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        if private:
            os.chmod(tmp, 0o600)
        else:
            _keep_owner(tmp, path)
            os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~umask())
    except OutputError:
        Path(tmp).unlink(missing_ok=True)
        raise
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def write_atomic(path: Path, data: bytes | str, *, output: bool = True) -> None:
    """Write via a temp file in the same directory, then rename over the target. A cache file is no
    `output`: an interrupt's message lists only what the user gets."""
    with StagedFiles(output=output) as staged:
        staged.add(path, data)
        staged.commit()


class StagedFiles:
    """Several outputs written together: each is staged beside its target, then all are renamed, or none.

    A full disk or an unwritable file shows up while staging, before any target changes. Leaving
    the block without `commit()` removes what was staged.
    """

    def __init__(self, *, output: bool = True) -> None:
        self._staged: list[tuple[Path, Path]] = []
        self._output = output

    def __enter__(self) -> StagedFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        for tmp, _ in self._staged:
            tmp.unlink(missing_ok=True)
        self._staged.clear()

    def add(self, path: Path, data: bytes | str) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else data
        if self._output:
            target = through_links(path)
            self._staged.append((_stage(target, payload), target))
        else:  # a cache file: the rename replaces a link standing there, it never writes where one points
            self._staged.append((_stage(Path(path), payload, private=True), Path(path)))

    def commit(self) -> None:
        for tmp, path in self._staged:
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc
            if self._output:
                record_commit(path)
        self._staged.clear()


def read_regular(path: Path, limit: int, *, what: str, error: type[AutotuneError] = OutputError,
                 follow: bool = True) -> bytes:
    """The bytes of `path`, which must be a regular file of at most `limit` bytes. It is opened first and
    checked on the open descriptor (no race with a rename), never opened blocking on a FIFO, and read to at
    most `limit` + 1 bytes, so `/dev/zero`, `/proc/self/mem`, a FIFO or a directory is one line naming `what`.
    `follow=False` refuses a symbolic link (a cache file: autotune never made one)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise error(f"{what} {path} is a symbolic link, which autotune never makes there: refused") from None
        raise error(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file")
            raise error(f"{what} {path} is {kind}, not a regular file: refused unread")
        if st.st_size > limit:
            raise error(f"{what} {path} is {_size(st.st_size)}, past the {_size(limit)} limit: refused unread")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # a file that grew while read, or whose size the kernel does not report (procfs)
            raise error(f"{what} {path} holds more than the {_size(limit)} limit: refused")
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MB" if n >= 2**20 else f"{n} bytes"


MAX_CACHE_BYTES = 1 << 30  # a cached reference or sensitivity table is KBs to MBs


def write_bound(path: Path, binding: dict[str, object], payload: bytes) -> None:
    """A cache entry that says what made it: one line of JSON (`binding`), then `payload`."""
    write_atomic(path, json.dumps(binding, sort_keys=True).encode() + b"\n" + payload, output=False)


def read_bound(path: Path, binding: dict[str, object]) -> tuple[bytes | None, str | None]:
    """(payload, None) where `path` is a cache entry made for exactly `binding`; else (None, why not), with
    why None where there is simply no entry. A link, a special file or a foreign entry is never trusted."""
    if not os.path.lexists(path):
        return None, None
    try:
        data = read_regular(path, MAX_CACHE_BYTES, what="cache file", follow=False)
    except AutotuneError as exc:
        return None, exc.message
    head, _, payload = data.partition(b"\n")
    try:
        made_for = json.loads(head)
    except ValueError:
        return None, f"cache file {path} does not say what made it"
    if made_for != json.loads(json.dumps(binding, sort_keys=True)):
        differs = sorted(k for k in set(binding) | set(made_for if isinstance(made_for, dict) else {})
                         if not isinstance(made_for, dict) or made_for.get(k) != binding.get(k))
        return None, f"cache file {path} was made for another {', '.join(differs) or 'input'}"
    return payload, None


def check_writable(path: Path) -> None:
    """Fail before minutes of measuring, not after, when an output cannot be written."""
    path = through_links(path)
    directory = path if path.is_dir() else path.parent
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    if not directory.is_dir():
        raise OutputError(f"cannot write {path}: {directory} is not a directory")
    if path.exists() and not path.is_dir() and not os.access(path, os.W_OK):
        raise OutputError(f"cannot write {path}: permission denied")
    _refuse_hard_link(path)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {path}: directory {directory} is not writable")


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path, *, what: str = "file", error: type[AutotuneError] = OutputError) -> str:
    """The sha256 of a regular file, streamed; a device, a FIFO, a directory or an unreadable file is one line
    naming `what` (`/dev/zero` would never end, a FIFO would block, `/proc/self/mem` fails with EIO)."""
    digest = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise error(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error(f"{what} {path} is not a regular file: refused unread")
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    except OSError as exc:
        raise error(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return digest.hexdigest()
