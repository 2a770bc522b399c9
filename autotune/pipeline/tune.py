"""`autotune run` as one plain function: the phases (`phases.py`) in order, under the host's measuring lock."""

from __future__ import annotations

import time
from collections.abc import Callable

from autotune.host import HostProbe
from autotune.measure.memory_guard import MemoryGuard
from autotune.measure.noise import LoadMonitor
from autotune.paths import read_caches
from autotune.pipeline.handoffs import Prepared, Tuning
from autotune.pipeline.options import RunOptions, RunOutcome
from autotune.pipeline.phases import (
    ProgressFn,
    commit,
    judge,
    load,
    precheck,
    prepare,
    race,
    refine,
    scope,
    search,
)
from autotune.runlock import host_lock
from autotune.search.storage import open_storage


def tune(opts: RunOptions, *, probe: HostProbe | None = None, progress: ProgressFn | None = None,
         on_stage: Callable[[str], None] | None = None,
         on_phase: Callable[[str, float | None], None] | None = None) -> RunOutcome:
    """prepare -> load -> precheck -> search -> refine -> race -> scope -> judge -> commit; `on_phase` hears each
    phase begin, with the time plan's estimate of it."""
    prepared = prepare(opts, probe=probe, stage=on_stage or (lambda _msg: None),  # refusals before any model loads
                       phase=on_phase or (lambda _name, _seconds: None))
    read_caches(not opts.fresh)  # --fresh: what a run can rebuild is rebuilt, never read
    try:
        return _tune(opts, prepared, progress)
    finally:
        read_caches(True)


def _tune(opts: RunOptions, prepared: Prepared, progress: ProgressFn | None) -> RunOutcome:
    with host_lock():  # before the model loads: a second run on this host refuses at once
        store = open_storage(opts.storage, fresh=opts.fresh)
        phases: dict[str, float] = {}  # every phase's wall time, for the profile (`benchmarks/run_phases.py`)

        def timed(name: str, clock: float) -> None:
            phases[name] = time.monotonic() - clock

        clock = time.monotonic()
        loaded = load(prepared)
        timed("load", clock)  # the model, the time plan, the fp32 reference
        clock = time.monotonic()
        t = Tuning(prepared, loaded, precheck(prepared, loaded, store))
        timed("precheck", clock)  # int8's speed and verdict, the fused graph, the memory model

        with MemoryGuard(t.checked.budget_mb):  # what the estimates admit, measured RSS holds to the budget
            with LoadMonitor(prepared.host.cores.usable) as monitor:
                clock = time.monotonic()
                searched = search(t, store, progress)
                timed("search", clock)
                clock = time.monotonic()
                refined = refine(t, searched.study)
                timed("refine", clock)
                clock = time.monotonic()
                raced = race(t, searched.study, refined)
                timed("race", clock)
            clock = time.monotonic()
            scoped = scope(t, raced)
            timed("scope", clock)
            judged = judge(t, searched, refined, raced, scoped, monitor.result(), phases)  # its time: the commit's
    return commit(t, judged)
