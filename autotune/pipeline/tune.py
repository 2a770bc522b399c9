"""`autotune run` as one plain function: the phases (`phases.py`) in order, under the host's measuring lock."""

from __future__ import annotations

import time
from collections.abc import Callable

from autotune.host import HostProbe
from autotune.pipeline.options import RunOptions, RunOutcome
from autotune.pipeline.phases import ProgressFn, commit, judge, load, precheck, prepare, race, refine, search
from autotune.runlock import host_lock
from autotune.search.memory_guard import MemoryGuard
from autotune.search.noise import LoadMonitor
from autotune.search.storage import open_storage


def tune(opts: RunOptions, *, probe: HostProbe | None = None, progress: ProgressFn | None = None,
         on_stage: Callable[[str], None] | None = None) -> RunOutcome:
    ctx = prepare(opts, probe=probe, stage=on_stage or (lambda _msg: None))  # refusals before any model loads
    with host_lock():  # before the model loads: a second run on this host refuses at once
        store = open_storage(opts.storage, fresh=opts.fresh)
        load(ctx)
        precheck(ctx)
        with MemoryGuard(ctx.budget_mb):  # what the estimates admit, measured RSS holds to the budget
            with LoadMonitor(ctx.host.cores.usable) as monitor:
                clock = time.monotonic()
                searched = search(ctx, store, progress)
                phases = {"search": time.monotonic() - clock}
                clock = time.monotonic()
                refined = refine(ctx, searched.study)
                phases["refine"], clock = time.monotonic() - clock, time.monotonic()
                finalists, baseline_skipped = race(ctx, searched.study, refined)
                phases["race"] = time.monotonic() - clock
            result, conditions, int8_sample = judge(ctx, searched, refined, finalists, baseline_skipped,
                                                    monitor.result(), phases)
    return commit(ctx, result, conditions, int8_sample)
