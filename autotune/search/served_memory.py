"""What the served configuration needs in memory, measured in a fresh process.

In the tuner's own process the allocator keeps pages freed by earlier sessions, so a new
session can grow without the RSS moving. A spawned child (pyperf's habit: a fresh worker
for every figure that a process's history can bend) loads the pool, notes its RSS, builds the
one session, replays the workload, and reports the kernel's high-water mark.
"""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from queue import Empty
from typing import Any

from autotune.runtime.engine import EngineConfig, EngineTraits
from autotune.runtime.model import ModelBundle
from autotune.workload.queries import Query

TIMEOUT_S = 600.0


@dataclass(frozen=True)
class ServedMemory:
    base_mb: float  # the process with the tokenizer loaded, before the session
    peak_mb: float  # its peak RSS once the session has scored the whole workload

    @property
    def served_mb(self) -> float:
        return max(0.0, self.peak_mb - self.base_mb)


def _child(bundle: ModelBundle, has_vnni: bool, traits: EngineTraits, config: dict[str, Any],
           queries: list[Query], out: Any) -> None:
    try:
        from autotune.runtime.sessions import EnginePool
        from autotune.search.measure import replay
        from autotune.search.memory import PeakRss

        pool = EnginePool(bundle, has_vnni=has_vnni, traits=traits, max_sessions=1)
        with PeakRss() as peak:
            replay(pool.engine(EngineConfig.from_dict(config)), queries)
        out.put(("ok", peak.start_mb, peak.peak_mb))
    except BaseException as exc:  # reported to the parent as one line; the child exits either way
        out.put(("error", f"{type(exc).__name__}: {exc}", 0.0))


def measure_served(bundle: ModelBundle, *, has_vnni: bool, traits: EngineTraits, config: EngineConfig,
                   queries: list[Query]) -> ServedMemory | None:
    """None when the child could not measure (it never takes the run down with it)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=_child, args=(bundle, has_vnni, traits, config.to_dict(), queries, out), daemon=True)
    child.start()
    try:
        status, first, second = out.get(timeout=TIMEOUT_S)
    except Empty:
        return None
    finally:
        child.join(timeout=5)
        if child.is_alive():
            child.kill()
            child.join()
    if status != "ok":
        return None
    return ServedMemory(float(first), float(second))
