"""`autotune bench`: the profile's configuration against references, interleaved, in one run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autotune.analysis.efficiency import ASSUMPTIONS, Efficiency, ModelDims, efficiency
from autotune.analysis.peak import measured_peak
from autotune.errors import DriftError, MissingDependencyError, OptionsError
from autotune.gates.scope import Scope, profile_form, scoring_on
from autotune.host import HostInfo
from autotune.measure.stats import Latency, per_query_medians, percentile
from autotune.measure.timing import Scorer, interleaved, replay
from autotune.outputs.profile import load_profile, profile_config, profile_max_tokens, profile_target
from autotune.runtime.engine import EngineConfig, ScoringPool
from autotune.runtime.model import ModelBundle
from autotune.runtime.targets import TARGET_NAMES, Target, get_target
from autotune.workload.queries import Workload

REFERENCES = ("hindsight-onnx", "ort-default", "hindsight-local", "hindsight-local-bucket")


def defaults_of(reference: str) -> tuple[Target, str, EngineConfig] | None:
    """The target whose own defaults this reference is, if any (the targets say which is theirs), with them."""
    for target in map(get_target, TARGET_NAMES):
        own = target.defaults_for(reference)
        if own is not None:
            return target, *own
    return None


@dataclass
class Contender:
    name: str
    description: str
    score: Scorer
    config: EngineConfig | None = None
    pool: ScoringPool | None = None  # set where the efficiency figures can be computed (an ONNX graph)
    form: Workload | None = None  # the workload as its scope hands it over (None: the whole pool)


@dataclass
class Row:
    name: str
    description: str
    latency: Latency
    round_p95_ms: list[float]
    efficiency: Efficiency | None = None


@dataclass
class Ratio:
    reference: str
    median: float
    low: float
    high: float


@dataclass
class BenchResult:
    rows: list[Row]
    ratios: list[Ratio]
    skipped: dict[str, str] = field(default_factory=dict)
    recorded_p95_ms: float | None = None
    assumptions: str = ASSUMPTIONS

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [{"name": r.name, "p50_ms": r.latency.p50_ms, "p95_ms": r.latency.p95_ms,
                      "p99_ms": r.latency.p99_ms,
                      "efficiency": r.efficiency.to_dict() if r.efficiency else None} for r in self.rows],
            "ratios": [r.__dict__ for r in self.ratios], "skipped": self.skipped,
            "hindsight_recorded_p95_ms": self.recorded_p95_ms,
        }


def ensure_same_host(profile: dict[str, Any], host: HostInfo, force: bool) -> None:
    recorded = profile.get("host", {}).get("fingerprint")
    if recorded != host.fingerprint and not force:
        raise DriftError(f"profile was made on host {recorded}, this is {host.fingerprint}: its figures do not "
                         "apply here (rerun autotune run, or pass --force)")


def model_ref(profile: dict[str, Any], model_dir: Path | None) -> str:
    return str(model_dir) if model_dir is not None else str(profile.get("model", {}).get("ref", "default"))


class _Pools:
    """One pool per target, built on first use, so contenders of one target share sessions."""

    def __init__(self, bundle: ModelBundle, host: HostInfo) -> None:
        self.bundle, self.host = bundle, host
        self._pools: dict[tuple[str, Any], Any] = {}

    def get(self, target_name: str, max_tokens: int | None = None) -> Any:
        """Keyed by the target and how it scores, so a profile truncating as the defaults do shares their pool."""
        target = get_target(target_name)
        key = (target_name, target.traits(self.host.cores.usable, self.bundle.max_length, max_tokens))
        if key not in self._pools:
            self._pools[key] = target.pool(self.bundle, has_vnni=self.host.has_vnni,
                                           usable_cores=self.host.cores.usable, max_tokens=max_tokens)
        return self._pools[key]


def _profile_contender(name: str, profile: dict[str, Any], pools: _Pools, workload: Workload) -> Contender:
    """A profile's engine on the pool its scope hands over (a smaller pool, shorter candidates)."""
    target = profile_target(profile)
    config = profile_config(profile)
    pool = pools.get(target, profile_max_tokens(profile))
    form = profile_form(profile, workload)
    scope = "" if form is None else f", {Scope.from_dict(profile['scope']['chosen']).label()}"
    return Contender(name, f"{target} target: {config.label()}{scope}",
                     scoring_on(pool.engine(config).score, workload, form), config,
                     pool if pool.model_path(config) is not None else None, form)


def sibling_profiles(path: Path | None, profile: dict[str, Any], host: HostInfo) -> list[tuple[str, dict[str, Any]]]:
    """Profiles beside this one, for this host and the same model, made for other targets."""
    if path is None:
        return []
    found = []
    mine = profile_target(profile)
    for other in sorted(Path(path).parent.glob("*.yaml")):
        if other.resolve() == Path(path).resolve():
            continue
        try:
            data = load_profile(other)
        except OptionsError:
            continue
        same_host = data.get("host", {}).get("fingerprint") == host.fingerprint
        same_model = data.get("model", {}).get("sha256") == profile.get("model", {}).get("sha256")
        if same_host and same_model and profile_target(data) != mine:
            found.append((f"profile:{profile_target(data)}", data))
    return found


def contenders(pools: _Pools, profile: dict[str, Any], against: Sequence[str], ref: str, workload: Workload,
               siblings: Sequence[tuple[str, dict[str, Any]]] = ()) -> tuple[list[Contender], dict[str, str]]:
    out = [_profile_contender("profile", profile, pools, workload)]
    out += [_profile_contender(name, data, pools, workload) for name, data in siblings]
    skipped: dict[str, str] = {}
    for name in against:
        if name not in REFERENCES:
            raise OptionsError(f"unknown reference {name!r}; choose from {', '.join(REFERENCES)}")
        own = defaults_of(name)
        if own is not None:
            target, label, config = own
            pool = pools.get(target.name)
            out.append(Contender(name, label, pool.engine(config).score, config, pool))
            continue
        try:
            from autotune.runtime.torch_reference import hindsight_local

            local = hindsight_local(ref, bucket_batching=name.endswith("bucket"))
        except MissingDependencyError as exc:
            skipped[name] = exc.message
            continue
        out.append(Contender(name, "sentence-transformers CrossEncoder.predict(batch_size=32) on PyTorch"
                             + (", Hindsight's character bucket sort" if name.endswith("bucket") else ""),
                             local.score))
    return out, skipped


def run_bench(profile: dict[str, Any], workload: Workload, host: HostInfo, *, against: Sequence[str] | None = None,
              rounds: int, force: bool = False, model_dir: Path | None = None,
              profile_path: Path | None = None) -> BenchResult:
    if rounds < 1:
        raise OptionsError(f"--rounds must be at least 1, got {rounds}")
    ensure_same_host(profile, host, force)
    ref = model_ref(profile, model_dir)
    target = get_target(profile_target(profile))
    bundle = target.load_model(ref)
    pools = _Pools(bundle, host)
    chosen = list(against) if against else list(target.bench_references())
    entrants, skipped = contenders(pools, profile, chosen, ref, workload,
                                   sibling_profiles(profile_path, profile, host))
    passes = interleaved([c.score for c in entrants], workload.queries, rounds)
    dims = ModelDims.from_config(bundle.config)
    rows = []
    for c, p in zip(entrants, passes, strict=True):
        medians = per_query_medians(p)
        eff = None
        if c.config is not None and c.pool is not None and dims is not None:
            shape = replay(c.pool.engine(c.config), (c.form or workload).queries)
            threads = c.pool.effective(c.config).intra_op_threads or host.cores.usable
            eff = efficiency(dims, host, shape.lengths, medians, shape.real_tokens, shape.padded_tokens,
                             threads=threads, measured_peak=measured_peak(threads))
        rows.append(Row(c.name, c.description, Latency.from_seconds(medians),
                        [percentile(r, 95) * 1000.0 for r in p], eff))
    ratios = []
    for row in rows[1:]:
        per_round = np.array(row.round_p95_ms) / np.array(rows[0].round_p95_ms)
        ratios.append(Ratio(row.name, float(np.median(per_round)), float(per_round.min()), float(per_round.max())))
    recorded = [q.extra["hindsight_rerank_s"] for q in workload.queries if "hindsight_rerank_s" in q.extra]
    return BenchResult(rows, ratios, skipped, percentile(recorded, 95) * 1000.0 if recorded else None)
