"""Where studies live: a journal file in the state directory by default, or a database (`--storage`).

Opening is checked before anything is measured: a bad URL, an unreachable database or a corrupt journal is
one line with exit 4. Hosts or runs creating Optuna's tables at once are serialized (a PostgreSQL advisory
lock, a file lock beside an SQLite file): unserialized, all but one failed on a unique constraint.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna

from autotune.errors import OptionsError, StateError, first_line
from autotune.paths import state_dir
from autotune.redact import redact

JOURNAL_NAME = "studies.journal"


def open_storage(storage: str | None, *, fresh: bool = False) -> Any:
    """The study storage, opened (and so checked) before anything is measured.

    A bad URL, an unreachable database or a corrupt journal is one line with exit 4. With
    `--fresh`, a corrupt journal is moved aside (its studies are lost, and the message says so).
    """
    if storage is not None:
        try:
            return _open_database(storage)
        except Exception as exc:  # sqlalchemy raises many kinds: bad scheme, missing driver, unreachable file
            raise OptionsError(redact(f"--storage {storage} cannot be opened: {first_line(exc)}")) from exc
    from optuna.storages.journal import JournalStorage

    state_dir().mkdir(parents=True, exist_ok=True)
    path = state_dir() / JOURNAL_NAME
    try:
        _check_journal(path)  # every complete line now, so a corrupt one shows here and not mid-run
        return JournalStorage(interrupt_safe_journal(path))
    except (ValueError, KeyError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
        if not fresh:
            raise StateError(f"the study journal {path} is corrupt ({first_line(exc)}): rerun with --fresh to "
                               "set it aside and start over") from exc
        aside = path.with_name(f"{JOURNAL_NAME}.corrupt-{int(time.time())}")
        path.rename(aside)
        return JournalStorage(interrupt_safe_journal(path))


JOURNAL_LOCK_SUFFIX = ".autotune-lock"


def interrupt_safe_journal(path: Path) -> Any:
    """Optuna's journal file, each append made whole before a Ctrl-C or SIGTERM lands, under a lock that dies
    with its holder.

    Optuna's own journal lock is a file it creates and removes, and it breaks one left behind only after a
    grace period of 30 s. A run killed inside an append (SIGKILL, the OOM killer, `docker kill`) left it, and
    the next run's first append waited those 30 s: a kernel file lock (flock, as the measuring lock) is let go
    when its holder dies. Its cleanup after an interrupt guessed where the signal landed, too (a missing
    `.rename` file in about 1 in 30 interrupted runs); holding Ctrl-C and SIGTERM until the append is done
    keeps every line whole.
    """
    from filelock import FileLock
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

    from autotune.signals import deferred_interrupts

    class KernelLock(JournalFileOpenLock):  # the public lock class; its base class is private
        def __init__(self) -> None:
            super().__init__(str(path))
            self._lock = FileLock(f"{path}{JOURNAL_LOCK_SUFFIX}")  # per thread: two threads exclude each other

        def acquire(self) -> bool:
            self._lock.acquire()
            return True

        def release(self) -> None:
            self._lock.release()

    class InterruptSafeJournal(JournalFileBackend):
        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            with deferred_interrupts():
                super().append_logs(logs)

    return InterruptSafeJournal(str(path), lock_obj=KernelLock())


def _open_database(url: str) -> Any:
    """Optuna's RDB storage, its tables created by one process at a time: hosts (or runs) starting at once
    on a fresh database all created them, and all but one failed on a unique constraint."""
    if url.startswith("postgresql"):
        return _open_postgresql(url)
    with _sqlite_creation_lock(url):
        return optuna.storages.get_storage(url)


def _open_postgresql(url: str) -> Any:
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as conn, _advisory_lock(conn):
            return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
    finally:
        engine.dispose()


@contextlib.contextmanager
def _sqlite_creation_lock(url: str) -> Iterator[None]:
    """A file lock beside an SQLite database while Optuna creates its tables; any other URL, none."""
    from filelock import FileLock
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    database = parsed.database if parsed.get_backend_name() == "sqlite" else None
    if not database or database == ":memory:" or not Path(database).resolve().parent.is_dir():
        yield  # nothing to serialize; and a lock file would create the missing directory SQLite must refuse
        return
    with FileLock(f"{Path(database).resolve()}.autotune-lock", timeout=120):
        yield


def _check_journal(path: Path) -> None:
    """Each complete line of an Optuna journal is one JSON object (a torn last line is Optuna's to skip)."""
    import json

    if not path.exists():
        return
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            if line.endswith(b"\n") and line.strip() and not isinstance(json.loads(line), dict):
                raise ValueError(f"line {number} is not a journal entry")


@contextlib.contextmanager
def shared_lock(store: Any) -> Iterator[None]:
    """Hosts sharing a PostgreSQL study take turns to count and ask for trials (a session advisory lock);
    any other storage is one host's, serialized by its measuring lock already."""
    engine = getattr(store, "engine", None)
    if engine is None or engine.dialect.name != "postgresql":
        yield
        return
    with engine.connect() as conn, _advisory_lock(conn):
        yield


ADVISORY_KEY = 0x61757475  # "autu": one lock for autotune's trial bookkeeping and schema creation


@contextlib.contextmanager
def _advisory_lock(conn: Any) -> Iterator[None]:
    """PostgreSQL's session advisory lock on ADVISORY_KEY, held for the block on this connection."""
    from sqlalchemy import text

    conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": ADVISORY_KEY})
    try:
        yield
    finally:
        conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": ADVISORY_KEY})
