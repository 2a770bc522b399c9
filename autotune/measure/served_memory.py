"""What the served configuration needs in memory, measured in a fresh process.

In the tuner's own process the allocator keeps pages freed by earlier sessions, so a new
session can grow without the RSS moving. A spawned child (pyperf's habit: a fresh worker
for every figure that a process's history can bend) loads the pool, notes its RSS, builds the
one session, replays the workload, and reports the kernel's high-water mark.

It then measures what the profile promises under load: every worker at once on its largest batch of
the longest input the server accepts (`burst`). For the sidecar that length is cut, where the model's
own would not fit, to the longest whose burst fits the memory budget, and `serve` is told so.
"""

from __future__ import annotations

import importlib
import multiprocessing
import signal
import threading
from dataclasses import asdict, dataclass, replace
from queue import Empty
from typing import Any

from autotune.measure.burst import BurstShape
from autotune.measure.memory import ESTIMATE_MARGIN, ModelMemory
from autotune.runtime.engine import EngineConfig, EngineTraits
from autotune.runtime.model import ModelBundle
from autotune.runtime.quantize import Int8Variant
from autotune.workload.queries import Query

TIMEOUT_S = 600.0
BURST_QUERY = "what does the memory say about the deployment"
# per worker, one after the other, and batches per request: on a ModernBERT export at 2,540 tokens one batch
# each peaked at 1,440 MB, 2 x 2 at 1,517 MB, 4 x 4 at 1,523 MB, and `serve` under 8 requests of 4 at 1,545 MB
BURST_REQUESTS = 2
BURST_BATCHES = 2
BURST_WORD = "memory"  # one token in every family's vocabulary: a document of n words is about n tokens


@dataclass(frozen=True)
class Burst:
    """Every worker on its largest batch of the longest accepted input at once, in a fresh process."""

    workers: int
    rows: int  # the largest batch at that length
    max_input_length: int  # the longest input served (tokens, query and document together)
    model_max_length: int
    base_mb: float  # the process before any session (for the sidecar: with its HTTP server imported)
    peak_mb: float  # its peak RSS during the burst
    estimated_mb: float | None
    within_budget: bool
    measured: bool = True  # False: its estimate passed the budget, so it was not run, and peak_mb is estimated

    @property
    def added_mb(self) -> float:
        return max(0.0, self.peak_mb - self.base_mb)

    def to_dict(self) -> dict[str, Any]:
        return {**{k: round(v, 1) if isinstance(v, float) else v for k, v in asdict(self).items()},
                "added_mb": round(self.added_mb, 1)}


@dataclass(frozen=True)
class ServedMemory:
    base_mb: float  # the process with the tokenizer loaded, before the session
    peak_mb: float  # its peak RSS once the session has scored the whole workload
    burst: Burst | None = None

    @property
    def served_mb(self) -> float:
        return max(0.0, self.peak_mb - self.base_mb)


@dataclass(frozen=True)
class BurstPlan:
    """What the child needs to size and run the burst."""

    model: ModelMemory | None
    budget_mb: float
    server_module: str | None = None  # autotune serves it (the sidecar): imported first, and its inputs can be cut

    @property
    def cut_length(self) -> bool:
        """Only a server of ours can be told a shorter input length; Hindsight's own providers cannot."""
        return self.server_module is not None


def burst_document(length: int) -> str:
    return " ".join([BURST_WORD] * (2 * length))  # past any length: the tokenizer cuts it to `length`


def _run_burst(engines: list[Any], rows: int) -> None:
    """Each worker scores `BURST_REQUESTS` requests of `BURST_BATCHES` batches of the longest documents, all
    starting together, on engines warmed as `serve` warms them: a peak can grow over consecutive batches (an
    arena's), not only with one."""
    document = burst_document(engines[0].tokenizer.max_length)
    start = threading.Barrier(len(engines))
    errors: list[BaseException] = []

    def work(engine: Any) -> None:
        try:
            start.wait()
            for _ in range(BURST_REQUESTS):
                engine.score(BURST_QUERY, [document] * (rows * BURST_BATCHES))
        except BaseException as exc:  # re-raised in the child's main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _burst(bundle: ModelBundle, has_vnni: bool, traits: EngineTraits, config: EngineConfig, plan: BurstPlan,
           base_mb: float, workload_longest: int, variant: Int8Variant) -> Burst:
    """At the model's length, or for the sidecar the longest that fits the budget; never shorter than the
    workload's longest pair, which must be scored as it was tuned (then the burst says it passes the budget)."""
    from autotune.measure.memory import PeakRss
    from autotune.runtime.sessions import EnginePool, warm_up

    model_max = min(traits.max_tokens or bundle.max_length, bundle.max_length)
    shape = BurstShape(config.workers, traits.shared_session, config.batch_size, traits.max_batch_tokens)
    length = model_max
    if plan.model is not None and plan.cut_length:
        fitting = shape.longest_within(plan.model, model_max, plan.budget_mb - base_mb) or 0
        length = min(model_max, max(fitting, workload_longest))
    estimate = None if plan.model is None else shape.estimate_mb(plan.model, length)
    if estimate is not None and ESTIMATE_MARGIN * estimate > plan.budget_mb - base_mb:
        # never run what is estimated past the budget: the figure is then the estimate, and says so
        return Burst(config.workers, shape.rows_at(length), length, model_max, base_mb, base_mb + estimate,
                     estimate, within_budget=False, measured=False)
    pool = EnginePool(bundle, has_vnni=has_vnni, traits=replace(traits, max_tokens=length), max_sessions=1)
    pool.use_int8(variant)
    engines = pool.serving(config)
    with PeakRss() as peak:
        warm_up(engines, config.batch_size)
        _run_burst(engines, shape.rows_at(length))
    return Burst(config.workers, shape.rows_at(length), length, model_max, base_mb, peak.peak_mb, estimate,
                 within_budget=peak.peak_mb <= plan.budget_mb)


def _child(bundle: ModelBundle, has_vnni: bool, traits: EngineTraits, config: dict[str, Any],
           queries: list[Query], plan: BurstPlan | None, out: Any, variant: dict[str, Any]) -> None:
    try:
        if plan is not None and plan.server_module is not None:  # the serving process holds its HTTP server too
            importlib.import_module(plan.server_module)
        import onnxruntime  # noqa: F401  (the runtime and the tokenizer are the process's, not the session's)

        from autotune.measure.memory import PeakRss, rss_mb
        from autotune.measure.timing import replay
        from autotune.runtime.sessions import EnginePool

        engine_config = EngineConfig.from_dict(config)
        pool = EnginePool(bundle, has_vnni=has_vnni, traits=traits, max_sessions=1)
        int8 = Int8Variant.from_dict(variant)  # the int8 graph the run chose, not the default one
        pool.use_int8(int8)
        base_mb = rss_mb()
        with PeakRss() as peak:
            replay(pool.engine(engine_config), queries)
        pool.release()
        burst = None
        if plan is not None:
            longest = max((n for row in pool.pair_lengths(queries) for n in row), default=1)
            burst = _burst(bundle, has_vnni, traits, engine_config, plan, base_mb, longest, int8)
        out.put(("ok", (peak.start_mb, peak.peak_mb, burst)))
    except BaseException as exc:  # reported to the parent as one line; the child exits either way
        out.put(("error", f"{type(exc).__name__}: {exc}"))


def start_deaf_to_ctrl_c(child: Any) -> None:
    """Start `child` with SIGINT ignored: Ctrl-C reaches the whole process group, and a spawned child would print
    its own KeyboardInterrupt traceback (6 interrupts of 28 once did) before the parent's one clean line. The
    parent stops it; CPython keeps an ignored SIGINT ignored in the new interpreter."""
    if threading.current_thread() is not threading.main_thread():
        child.start()
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        child.start()
    finally:
        signal.signal(signal.SIGINT, previous)


def measure_served(bundle: ModelBundle, *, has_vnni: bool, traits: EngineTraits, config: EngineConfig,
                   queries: list[Query], plan: BurstPlan | None = None,
                   variant: Int8Variant | None = None) -> ServedMemory | None:
    """None when the child could not measure (it never takes the run down with it); with no `plan`, no burst."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=_child, args=(bundle, has_vnni, traits, config.to_dict(), queries, plan, out,
                                             (variant or Int8Variant()).to_dict()), daemon=True)
    start_deaf_to_ctrl_c(child)
    try:
        status, value = out.get(timeout=TIMEOUT_S)
    except Empty:
        return None
    finally:
        child.join(timeout=5)
        if child.is_alive():
            child.kill()
            child.join()
    if status != "ok":
        return None
    start, peak, burst = value
    return ServedMemory(float(start), float(peak), burst)
