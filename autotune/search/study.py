"""The Optuna study: a seeded TPE search over the target's knobs.

Trials that fail parity or pass the memory budget are marked infeasible with
`Trial.set_constraint`, so they are never chosen; Optuna's `SuccessiveHalvingPruner` stops a
trial that is not in the better half at the same number of queries (see `objective`).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.errors import OptionsError, first_line
from autotune.paths import state_dir
from autotune.runtime.engine import EngineConfig

if TYPE_CHECKING:
    from autotune.search.objective import Objective

optuna.logging.set_verbosity(optuna.logging.ERROR)  # our own messages say what matters


def is_feasible(trial: FrozenTrial) -> bool:
    return all(v <= 0 for v in (trial.constraints or {}).values())


def best_feasible_value(trials: Sequence[FrozenTrial]) -> float | None:
    values = [t.value for t in trials if t.value is not None and is_feasible(t)]
    return min(values) if values else None


PARAMS = frozenset(EngineConfig(batch_size=1, intra_op_threads=0, length_sort=False, precision="fp32").to_dict())


def config_of(trial: FrozenTrial) -> EngineConfig:
    return EngineConfig.from_dict(trial.params)


def best_feasible_config(study: optuna.Study) -> EngineConfig | None:
    """The fastest complete trial that passed every constraint, or None when none did."""
    trials = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
              if t.value is not None and is_feasible(t) and set(t.params) == PARAMS]
    return config_of(min(trials, key=lambda t: t.value)) if trials else None  # type: ignore[arg-type,return-value]


@dataclass
class TrialRecord:
    number: int
    config: EngineConfig
    state: str
    p95_ms: float | None
    rejected: str | None
    rss_mb: float | None = None  # the process's peak RSS while this trial ran
    duplicate_of: int | None = None  # a configuration the study already held: its figures were reused
    peak_growth_mb: float | None = None  # how far this trial raised the RSS above where it started
    estimated_mb: float | None = None  # the estimate made before running it
    queries_measured: int | None = None  # fewer than the workload's when successive halving stopped it

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, **self.config.to_dict(), "state": self.state,
                "p95_ms": self.p95_ms, "rejected": self.rejected, "rss_mb": self.rss_mb,
                "peak_growth_mb": self.peak_growth_mb, "estimated_mb": self.estimated_mb,
                "queries_measured": self.queries_measured, "duplicate_of": self.duplicate_of}


HOST_ATTR = "host_id"  # which host ran a trial: a shared study's trials come from several
HOST_NAME_ATTR = "host"


def host_id() -> str:
    """This host's identity for shared studies: kept beside its run lock, so it is per host as the lock is."""
    import uuid

    path = state_dir() / "host-id"
    state_dir().mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(uuid.uuid4().hex[:16])
    return path.read_text().strip()


def fail_stale_trials(study: optuna.Study) -> int:
    """Trials this host left RUNNING when it was killed are failed (its run lock says none is live).

    Another host's running trials, in a shared study, are that host's: they are left alone.
    """
    me = host_id()
    stale = [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
             if t.user_attrs.get(HOST_ATTR, me) == me]
    for t in stale:
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
    return len(stale)


FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


def finished_trials(study: optuna.Study) -> list[FrozenTrial]:
    return study.get_trials(deepcopy=False, states=FINISHED)


TAKEN = (*FINISHED, TrialState.RUNNING)  # counted against --trials


def run_study(
    study: optuna.Study,
    objective: Objective,
    trials: int,
    *,
    timeout_s: float | None = None,
    on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
    gate: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    wait_for_others_s: float = 1800.0,
) -> int:
    """Run trials until the study holds `trials` (finished or running, on any host), within `timeout_s`;
    returns how many were already done (resumed).

    Counting, asking and suggesting happen under `gate` (a database lock when several hosts share the
    study), so hosts split the trials and the total is what was asked. At the end it waits for the
    other hosts' running trials, so every host re-races from the whole study.
    """
    me, name = host_id(), _host_name()
    with gate():
        fail_stale_trials(study)
        done = len(finished_trials(study))
    started = time.monotonic()
    if timeout_s is not None and timeout_s <= 0:
        return done
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=optuna.exceptions.ExperimentalWarning)
        while timeout_s is None or time.monotonic() - started < timeout_s:
            with gate():
                if len(study.get_trials(deepcopy=False, states=TAKEN)) >= trials:
                    break
                trial = study.ask()
                trial.set_user_attr(HOST_ATTR, me)
                trial.set_user_attr(HOST_NAME_ATTR, name)
                # Suggested before the lock is let go: another host looking for a duplicate then sees
                # every parameter of this trial, never a half-suggested one it would take for different.
                objective.space.suggest(trial)
            frozen = _evaluate(study, objective, trial)
            if on_trial is not None:
                on_trial(study, frozen)
    _wait_for_others(study, me, min(wait_for_others_s, _left(timeout_s, started)))
    return done


def _evaluate(study: optuna.Study, objective: Objective, trial: optuna.Trial) -> FrozenTrial:
    """What `study.optimize` does for one trial: pruned and failed trials are told so; errors propagate."""
    try:
        value = objective(trial)
    except optuna.TrialPruned:
        return study.tell(trial, state=TrialState.PRUNED)
    except KeyboardInterrupt:
        # Nothing more is written once interrupted: the signal may have landed inside the journal's
        # lock, and a write would then wait out its 30 s grace period. The trial stays RUNNING until
        # this host's next run fails it (`fail_stale_trials`).
        raise
    except BaseException:
        study.tell(trial, state=TrialState.FAIL)
        raise
    return study.tell(trial, value)


def _wait_for_others(study: optuna.Study, me: str, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and any(
            t.user_attrs.get(HOST_ATTR, me) != me and is_live(study, t)
            for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))):
        time.sleep(1.0)


def is_live(study: optuna.Study, trial: FrozenTrial) -> bool:
    """A running trial that has not yet run three times as long as the study's trials take (at least a
    minute): past that, its host has likely died, and nobody should wait for it."""
    import datetime
    import statistics

    took = [(t.datetime_complete - t.datetime_start).total_seconds() for t in finished_trials(study)
            if t.datetime_start is not None and t.datetime_complete is not None]
    patience = max(60.0, 3.0 * statistics.median(took)) if took else 600.0
    started = trial.datetime_start
    return started is None or (datetime.datetime.now() - started).total_seconds() < patience


def _left(timeout_s: float | None, started: float) -> float:
    return float("inf") if timeout_s is None else max(0.0, timeout_s - (time.monotonic() - started))


def _host_name() -> str:
    import socket

    return socket.gethostname()


def trial_records(study: optuna.Study) -> list[TrialRecord]:
    records = []
    for t in study.get_trials(deepcopy=False):
        if set(t.params) != PARAMS:
            continue
        rejected = t.user_attrs.get("rejected")
        value = t.value if t.state == TrialState.COMPLETE else None
        if t.state == TrialState.PRUNED and t.last_step is not None:
            value = t.intermediate_values[t.last_step]  # its running p95 when it was stopped
        attrs = t.user_attrs
        records.append(TrialRecord(t.number, config_of(t), t.state.name.lower(), value, rejected,
                                   attrs.get("rss_mb"), attrs.get("duplicate_of"), attrs.get("peak_growth_mb"),
                                   attrs.get("estimated_mb"), attrs.get("queries_measured")))
    return records

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
            raise OptionsError(f"--storage {_redact(storage)} cannot be opened: {first_line(exc)}") from exc
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    state_dir().mkdir(parents=True, exist_ok=True)
    path = state_dir() / JOURNAL_NAME
    try:
        _check_journal(path)  # every complete line now, so a corrupt one shows here and not mid-run
        return JournalStorage(JournalFileBackend(str(path)))
    except (ValueError, KeyError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
        if not fresh:
            raise OptionsError(f"the study journal {path} is corrupt ({first_line(exc)}): rerun with --fresh to "
                               "set it aside and start over") from exc
        aside = path.with_name(f"{JOURNAL_NAME}.corrupt-{int(time.time())}")
        path.rename(aside)
        return JournalStorage(JournalFileBackend(str(path)))


def _open_database(url: str) -> Any:
    """Optuna's RDB storage. On PostgreSQL, hosts starting at once would all create Optuna's tables and
    all but one fail on a unique violation: the creation is serialized under an advisory lock."""
    if not url.startswith("postgresql"):
        return optuna.storages.get_storage(url)
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": ADVISORY_KEY})
            try:
                return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
            finally:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": ADVISORY_KEY})
    finally:
        engine.dispose()


def _check_journal(path: Path) -> None:
    """Each complete line of an Optuna journal is one JSON object (a torn last line is Optuna's to skip)."""
    import json

    if not path.exists():
        return
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            if line.endswith(b"\n") and line.strip() and not isinstance(json.loads(line), dict):
                raise ValueError(f"line {number} is not a journal entry")


def _redact(url: str) -> str:
    """Never print a password that sits in a storage URL."""
    import re

    return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", url)



def halving_pruner(rungs: Sequence[int]) -> optuna.pruners.BasePruner:
    """Optuna's successive halving with queries as the resource: rungs at the first rung's size, doubling."""
    if len(rungs) < 2:
        return optuna.pruners.NopPruner()
    return optuna.pruners.SuccessiveHalvingPruner(min_resource=rungs[0], reduction_factor=2,
                                                  min_early_stopping_rate=0)


def open_study(name: str, store: Any, seed: int, rungs: Sequence[int], fresh: bool) -> optuna.Study:
    """Create or resume a study. A resumed study's sampler continues from where the last run stopped:
    seeded by the seed and the number of trials it holds, so it never replays the first suggestions.
    In a shared database each host's sampler also takes its host id, and `constant_liar` makes it
    steer clear of what other hosts are running, so hosts do not suggest the same configurations."""
    if fresh:
        with contextlib.suppress(KeyError):
            optuna.delete_study(study_name=name, storage=store)
    study = optuna.create_study(study_name=name, storage=store, load_if_exists=True, direction="minimize",
                                pruner=halving_pruner(rungs))
    done = len(study.get_trials(deepcopy=False))
    shared = isinstance(store, optuna.storages.RDBStorage)
    salt = int(host_id(), 16) % 2**31 if shared else 0
    study.sampler = optuna.samplers.TPESampler(seed=(seed + done + salt) % 2**32, n_startup_trials=8,
                                               constant_liar=shared)
    return study


@contextlib.contextmanager
def shared_lock(store: Any) -> Iterator[None]:
    """Hosts sharing a PostgreSQL study take turns to count and ask for trials (a session advisory lock);
    any other storage is one host's, serialized by its run lock already."""
    engine = getattr(store, "engine", None)
    if engine is None or engine.dialect.name != "postgresql":
        yield
        return
    from sqlalchemy import text

    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": ADVISORY_KEY})
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": ADVISORY_KEY})


ADVISORY_KEY = 0x61757475  # "autu": one lock for autotune's trial bookkeeping and schema creation


@dataclass(frozen=True)
class StudySummary:
    """One study in a storage, as `autotune studies` lists it."""

    name: str
    target: str
    fingerprint: str
    model: str
    workload: str
    trials_done: int
    best_p95_ms: float | None
    hosts: tuple[str, ...]

    @classmethod
    def parse(cls, study: optuna.Study) -> StudySummary:
        parts = study.study_name.split("-")
        named = len(parts) == 6 and parts[0] == "autotune"
        trials = finished_trials(study)
        hosts = sorted({str(t.user_attrs[HOST_NAME_ATTR]) for t in study.get_trials(deepcopy=False)
                        if HOST_NAME_ATTR in t.user_attrs})
        return cls(study.study_name, parts[1] if named else "?", parts[2] if named else "?",
                   parts[3] if named else "?", parts[4] if named else "?", len(trials),
                   best_feasible_value([t for t in trials if t.state == TrialState.COMPLETE]), tuple(hosts))


def study_summaries(store: Any) -> list[StudySummary]:
    """Every study in the storage: autotune's own names say which target, host type, model and workload."""
    names = [s.study_name for s in optuna.get_all_study_summaries(storage=store, include_best_trial=False)]
    return [StudySummary.parse(optuna.load_study(study_name=n, storage=store)) for n in sorted(names)]
