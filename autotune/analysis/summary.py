"""Human-readable tables for the terminal. Pure functions of results: easy to test."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from autotune.analysis.explain import SCOPE_STEPS
from autotune.host import HostInfo
from autotune.pipeline.record import SearchResult

if TYPE_CHECKING:
    from autotune.analysis.bench import BenchResult
    from autotune.analysis.explain import ExplainResult
    from autotune.search.scope_outcome import ScopeOutcome
    from autotune.search.study import TrialRecord


REJECTED_BY = {"parity": "Rejected by the parity gate", "memory": "Rejected by the memory budget",
               "cores": "Refused for the cores (never measured)"}


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_host(host: HostInfo) -> str:
    isa = ", ".join(k for k, v in host.isa.items() if v) or "none of avx2/avx512/vnni/amx"
    mib = 1024 * 1024
    caches = ", ".join(f"{n} {b // mib if b >= mib else b // 1024} {'MiB' if b >= mib else 'KiB'}"
                       for n, b in (("L2", host.l2_cache_bytes), ("L3", host.l3_cache_bytes)) if b)
    return "\n".join([
        f"cpu          {host.brand}",
        f"isa          {isa}",
        f"amx          {format_amx(host.amx)}",
        f"cores        physical {host.cores.physical}, logical {host.cores.logical}, usable {host.cores.usable}",
        f"cache        {caches or 'unknown'}",
        f"memory       {host.memory_bytes / 1024 ** 3:.1f} GiB",
        f"onnxruntime  {host.onnxruntime}",
        f"fingerprint  {host.fingerprint}",
    ])


def format_amx(amx: dict[str, bool | None]) -> str:
    """AMX's parts, and whether int8 GEMMs can use them: the CPU must offer AMX-INT8 and the OS enable the tiles."""
    parts = [p for p in ("amx_tile", "amx_int8", "amx_bf16") if amx.get(p)]
    if not parts:
        return "none (int8 runs on VNNI where there is VNNI)"
    enabled = amx.get("os_enabled")
    state = ("enabled by the OS: onnxruntime's int8 GEMMs use the tiles" if enabled else
             "not enabled by the OS (no tile state in XCR0): int8 runs on VNNI" if enabled is False else
             "whether the OS enables it could not be read")
    return f"{', '.join(parts)}; {state}"


def format_result(result: SearchResult) -> str:
    raced = next((f for f in result.finalists if f.is_baseline), None)  # the finalists' own race's baseline
    base = None if raced is None else raced.latency.p95_ms
    rows = []
    for f in sorted(result.finalists, key=lambda f: f.latency.p95_ms):
        tag = " (baseline: Hindsight default)" if f.is_baseline else ""
        mark = "*" if f.config == result.winner.config and result.winner in result.finalists else " "
        parity = "ok" if f.parity is None or f.parity.passed else "FAIL"
        rows.append([mark, f.config.label() + tag, f"{f.latency.p50_ms:.1f}", f"{f.latency.p95_ms:.1f}",
                     "n/a" if base is None else f"{base / f.latency.p95_ms:.2f}x", parity])
    under = ("" if result.concurrency == 1 else
             f", each under {result.concurrency} concurrent recalls (p50/p95 include the queueing)")
    out = [f"Finalists, re-measured interleaved in this run{under}:",
           table(["", "configuration", "p50 ms", "p95 ms", "vs baseline", "parity"], rows)]
    out += rejected_lines(result.rejected)
    pruned = sum(t.state == "pruned" for t in result.trials)
    failed = sum(t.state == "fail" for t in result.trials)
    refused = sum(t.unmeasured for t in result.trials)
    counted = len(result.trials) - failed - refused
    out += ["", f"{counted} trials ({result.resumed_trials} resumed from an earlier run, {pruned} stopped early by "
                f"successive halving, {len(result.rejected)} rejected)"
            + (f"; {refused} refused before measuring (the cores or the memory estimate), not counted"
               if refused else "")
            + (f"; {failed} interrupted, not counted" if failed else "")]
    out += [f"left out: {d.line()}" for d in result.dropped]
    if result.refined is not None:
        moves = sum(s.moved_to is not None for s in result.refined.steps)
        out.append(f"refinement: {moves} move(s) from the search's best, stopped at a {result.refined.stopped}"
                   if result.refined.stopped == "local optimum" else
                   f"refinement: {moves} move(s) from the search's best, stopped by the {result.refined.stopped}")
    memory = result.memory
    if memory is not None and memory.served_mb is not None:
        estimate = f" (estimated {memory.estimated_mb:.0f} MB)" if memory.estimated_mb is not None else ""
        out.append(f"memory: the chosen configuration adds {memory.served_mb:.0f} MB{estimate}; the tuner peaked "
                   f"at {memory.tuner_peak_rss_mb or 0:.0f} MB RSS, budget {memory.budget_mb:.0f} MB")
    if memory is not None and memory.burst:
        out.append(burst_line(memory.burst, memory.budget_mb))
    if result.rerun:
        out.append(f"rerun: {result.rerun}")
    if result.scope is not None:
        out += ["", *format_scope(result.scope)]
    base = None if result.baseline is None else result.baseline.latency.p95_ms
    chosen = f"Chosen: {result.winner.config.label()}"
    if result.scope is not None:
        chosen += f", {result.scope.scope.label()}"
    chosen += f" -> p95 {result.winner.latency.p95_ms:.1f} ms"
    if base is None:
        out += [f"{chosen}; the baseline was not raced: {result.baseline_skipped}"]
    else:
        out += [f"{chosen}, {result.speedup_p95:.2f}x the baseline's p95 ({base:.1f} ms)"]
    out += [f"warning: {w}" for w in result.warnings]
    return "\n".join(out)


def format_scope(scope: ScopeOutcome) -> list[str]:
    """The pool frontier: each token cut on the whole pool, and the smallest caps that keep the results."""
    gate = scope.gate
    out = [f"How much Hindsight scores, under the result gate (per query, the share of fp32's whole-pool results "
           f"still returned: mean >= {gate.min_mean:g}, every query >= {gate.min_query:g}, "
           f"first 10 >= {gate.min_mean:g}; "
           f"{scope.recorded_queries} queries replayed from the recording):"]
    rows = []
    for p in sorted(scope.points, key=lambda p: (p.p95_ms is None, p.p95_ms or 0.0, -p.agreement.mean)):
        a = p.agreement
        mark = "*" if p.scope == scope.scope and p.passed else " "
        rows.append([mark, p.scope.label(), str(p.pairs), f"{a.mean:.3f}", f"{a.worst:.3f}", f"{a.head_mean:.3f}",
                     f"{a.top1:.0%}",
                     "-" if p.p95_ms is None else f"{p.p95_ms:.1f}", "ok" if p.passed else "below the floor"])
    if rows:
        out.append(table(["", "scope", "pairs", "mean", "worst", "first 10", "top still 1st", "p95 ms", "gate"],
                         rows))
    if scope.note:
        out.append(f"pool: {scope.note}")
    if scope.engine_only is not None and scope.pairs_scored < scope.pairs_whole:
        out.append(f"pool: {scope.pairs_scored} pairs scored instead of {scope.pairs_whole}; the engine alone on the "
                   f"whole pool: p95 {scope.engine_only.latency.p95_ms:.1f} ms in the same race")
    return out


def format_bench(result: BenchResult) -> str:
    rows = [[r.name, f"{r.latency.p50_ms:.1f}", f"{r.latency.p95_ms:.1f}", f"{r.latency.p99_ms:.1f}",
             r.description] for r in result.rows]
    out = ["Per-query latency, contenders interleaved in this run (medians across rounds):",
           table(["contender", "p50 ms", "p95 ms", "p99 ms", "what"], rows), ""]
    out.append(table(["p95 ratio: reference / profile", "median", "min", "max"],
                     [[r.reference, f"{r.median:.2f}x", f"{r.low:.2f}x", f"{r.high:.2f}x"] for r in result.ratios]))
    effs = [(r.name, r.efficiency) for r in result.rows if r.efficiency is not None]
    if effs:
        def pct(value: float | None) -> str:
            return "unknown" if value is None else f"{value:.1f}%"

        out += ["", table(["efficiency", "threads", "useful GFLOP/s", "% of measured peak", "% of nominal peak",
                           "padded/real tokens"],
                          [[n, e.threads or "", f"{e.useful_gflops:.1f}", pct(e.percent_of_measured),
                            pct(e.percent_of_peak), f"{e.padding_overhead:.2f}"] for n, e in effs]),
                f"assumptions: {result.assumptions}"]
    if result.recorded_p95_ms is not None:
        out.append(f"Hindsight's own reranking p95 when the workload was recorded: {result.recorded_p95_ms:.1f} ms "
                   "(recorded there, not measured here)")
    out += [f"skipped {name}: {why}" for name, why in result.skipped.items()]
    return "\n".join(out)


def format_explain(result: ExplainResult) -> str:
    rows = [["baseline", "Hindsight default", "", f"{result.baseline_p95_ms:.1f}", "", "1.00x"]]
    for step, cumulative in zip(result.steps, result.cumulative, strict=True):
        rows.append([f"+ {step.knob}", step.config.label(), f"{step.before_p95_ms:.1f}", f"{step.p95_ms:.1f}",
                     f"{step.ratio:.2f}x", f"{cumulative:.2f}x"])
    out = ["Waterfall (each step measured interleaved with the one before, in a pair of its own):",
           table(["step", "configuration", "p95 before", "p95 after", "incremental", "cumulative"], rows)]
    if any(s.knob in SCOPE_STEPS for s in result.steps):
        out.append(f"the gain: {result.gain(scope=False):.2f}x from cheaper pairs (the engine's knobs), "
                   f"{result.gain(scope=True):.2f}x from fewer and shorter pairs (the pool cap and the token cut)")
    if result.leave_one_out:
        out += ["", "Leave one out (each knob reverted alone, interleaved with the winner):",
                table(["reverted", "configuration", "winner p95", "reverted p95", "slowdown", "beyond noise"],
                      [[s.knob, s.config.label(), f"{s.before_p95_ms:.1f}", f"{s.p95_ms:.1f}", f"{1 / s.ratio:.2f}x",
                        "yes" if s.beyond_noise else "no"] for s in result.leave_one_out])]
        faster = [s.knob for s in result.leave_one_out if s.ratio > 1 and s.beyond_noise]
        if faster:
            out.append(f"warning: reverting {', '.join(faster)} alone was faster beyond the noise: rerun `autotune run`"
                       " on a quiet host")
    if result.unchanged:
        out.append(f"not timed: {', '.join(result.unchanged)} (on this host its change runs the same configuration, "
                   "e.g. the default threads are the count the winner names)")
    most = result.most_important()
    out.append("" if most is None else f"\nThe knob that mattered most: {most}")
    if not result.steps:
        out.append("The chosen configuration is the baseline: nothing to attribute.")
    return "\n".join(out)


def burst_line(burst: dict[str, Any], budget_mb: float) -> str:
    """What the profile promises under load, and the input cut that keeps that promise."""
    cut = ""
    if burst["max_input_length"] < burst["model_max_length"]:
        cut = (f"; inputs are cut to {burst['max_input_length']} tokens (the model takes {burst['model_max_length']}) "
               f"so that it fits the {budget_mb:.0f} MB budget")
    over = "" if burst["within_budget"] else f", past the {budget_mb:.0f} MB budget"
    verb = "add" if burst.get("measured", True) else "would add (estimated; not run, as it would pass the budget)"
    return (f"under load: {burst['workers']} worker(s) at once on the longest input ({burst['max_input_length']} "
            f"tokens, {burst['rows']} per batch) {verb} {burst['added_mb']:.0f} MB, {burst['peak_mb']:.0f} MB in all"
            f"{over}{cut}")


def rejected_lines(records: list[TrialRecord]) -> list[str]:
    """The rejected trials under what rejected each: the parity gate, the memory budget or the cores (a memory
    estimate's refusal was once headed "Rejected by the parity gate")."""
    out: list[str] = []
    for cause, heading in REJECTED_BY.items():
        rejected = [t for t in records if (t.cause or "parity") == cause]
        if not rejected:
            continue
        out += ["", f"{heading} ({len(rejected)}):"]
        out += [f"  #{t.number} {t.config.label()}: {t.rejected}" for t in rejected[:10]]
        if len(rejected) > 10:
            out.append(f"  ... and {len(rejected) - 10} more (see the profile)")
    return out
