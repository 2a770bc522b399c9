"""The served memory, measured in a fresh process: the workload's own need, and the burst the profile promises
(every worker at once on its largest batch of the longest accepted input)."""

from __future__ import annotations

import pytest

from autotune.measure.burst import BurstShape
from autotune.measure.memory import ESTIMATE_MARGIN, ModelMemory
from autotune.measure.served_memory import BurstPlan, measure_served
from autotune.runtime.engine import EngineConfig, EngineTraits
from autotune.runtime.model import build_default_model
from autotune.workload.queries import Query

SERVER = "autotune.serve.app"
QUERIES = [Query("who fixed the boiler", ["the plumber fixed the boiler on monday", "a short note"])]
CONFIG = EngineConfig(batch_size=8, intra_op_threads=1, length_sort=True, precision="fp32", workers=2)
TRAITS = EngineTraits(max_batch_tokens=16384)


@pytest.fixture(scope="module")
def bundle():
    return build_default_model()  # MiniLM at 512 positions: its activations, not its fixed costs, dominate a burst


def _longest(bundle) -> int:
    from autotune.runtime.tokenize import PairTokenizer

    tok = PairTokenizer(bundle.tokenizer_path, bundle.max_length)
    return max(len(e.ids) for q in QUERIES for e in tok.encode(q.query, q.documents))


def _measure(bundle, plan: BurstPlan | None, config: EngineConfig = CONFIG):
    served = measure_served(bundle, has_vnni=False, traits=TRAITS, config=config, queries=QUERIES, plan=plan)
    assert served is not None, "the child could not measure"
    return served


def test_the_sidecar_cuts_its_inputs_to_what_the_budget_holds(bundle):
    model = ModelMemory.from_config(bundle.config, bundle.onnx_path.stat().st_size)
    whole = _measure(bundle, BurstPlan(model, 100_000.0, SERVER)).burst
    assert whole is not None and whole.max_input_length == whole.model_max_length == bundle.max_length
    assert whole.workers == 2 and whole.rows == 8 and whole.within_budget
    # a budget that holds the burst at half the model's length (with the estimate's margin), not at all of it
    shape = BurstShape(CONFIG.workers, False, CONFIG.batch_size, TRAITS.max_batch_tokens)
    budget = whole.base_mb + ESTIMATE_MARGIN * shape.estimate_mb(model, bundle.max_length // 2)
    cut = _measure(bundle, BurstPlan(model, budget, SERVER)).burst
    # the child measures its own base RSS, a few MB either way of the first's: the boundary moves a few tokens
    half = bundle.max_length // 2
    assert cut is not None and max(_longest(bundle), int(0.9 * half)) <= cut.max_input_length < bundle.max_length
    assert cut.measured and cut.within_budget and cut.peak_mb <= budget
    assert cut.added_mb < whole.added_mb


def test_hindsight_in_process_is_never_cut(bundle):
    """Hindsight's providers take no input length from autotune: the burst is at the model's length. Where its
    estimate passes the budget it is never run: the figure is the estimate, and says so."""
    model = ModelMemory.from_config(bundle.config, bundle.onnx_path.stat().st_size)
    roomy = _measure(bundle, BurstPlan(model, 100_000.0, None)).burst
    assert roomy is not None and roomy.max_input_length == bundle.max_length and roomy.measured
    tight = _measure(bundle, BurstPlan(model, roomy.base_mb + 50.0, None)).burst
    assert tight is not None and tight.max_input_length == bundle.max_length
    assert not tight.measured and not tight.within_budget
    assert tight.added_mb == pytest.approx(tight.estimated_mb, abs=0.1)
    assert tight.added_mb > 50.0


def test_without_a_plan_only_the_workload_is_measured(bundle):
    served = _measure(bundle, None)
    assert served.burst is None and served.served_mb > 0


def report_sigint(out) -> None:  # type: ignore[no-untyped-def]
    import signal

    out.put(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)


def test_the_measuring_child_does_not_hear_ctrl_c():
    """Issue 50, item 10: a Ctrl-C reached the spawned child too, which printed its own traceback."""
    import multiprocessing
    import signal

    from autotune.measure.served_memory import start_deaf_to_ctrl_c

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    before = signal.getsignal(signal.SIGINT)
    child = ctx.Process(target=report_sigint, args=(out,), daemon=True)
    start_deaf_to_ctrl_c(child)
    assert out.get(timeout=60) is True and signal.getsignal(signal.SIGINT) is before
    child.join(timeout=10)


def test_the_child_measures_the_int8_graph_the_run_chose(bundle, tmp_path, monkeypatch):
    """Issue 50, item 15: the child measured the default (per-tensor) int8 graph, quantizing it inside the measured
    process, and reported 1.72x the estimate for a per-token pick. It must load the chosen graph, built before."""
    from dataclasses import replace

    from autotune.runtime.quantize import Int8Variant
    from autotune.runtime.sessions import EnginePool

    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "cache"))
    chosen = Int8Variant("per-token")
    pool = EnginePool(bundle, has_vnni=False, traits=TRAITS)
    pool.use_int8(chosen)
    int8 = replace(CONFIG, precision="int8", workers=1)
    pool.model_path(int8)  # what the run has by then: the chosen graph, cached
    built = sorted(p.name for p in (tmp_path / "cache" / "int8").iterdir())
    served = measure_served(bundle, has_vnni=False, traits=TRAITS, config=int8, queries=QUERIES, variant=chosen)
    assert served is not None
    assert sorted(p.name for p in (tmp_path / "cache" / "int8").iterdir()) == built  # no other graph was made
