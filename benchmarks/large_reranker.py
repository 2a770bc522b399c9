"""What each knob buys on a large reranker: a graph of bge-reranker-v2-m3's class (XLM-R large, 568M parameters,
2.2 GB of external data) with RANDOM weights (issue 52). Speeds and memory are a real large model's; its
rankings mean nothing, so this script states no quality figure.

It prints, all measured side by side in one run on this host (its ISA first):
1. each step's peak RSS, each in a process of its own: hashing the model, the per-token and dynamic
   per-channel int8 rewrites, the fused graph, staging the emitted directory, an fp32 and an int8 session;
2. fp32 against int8 (per-token, dynamic per-channel) per pair at 128, 256 and 512 tokens, as ratios to fp32,
   interleaved round by round so the variants share whatever else the host was doing;
3. threads and batch: each configuration's cost per pair at one length, as a ratio to Hindsight's defaults;
4. one recall's projected reranking time at 300, 100 and 50 candidates, for Hindsight's defaults and for the
   fastest configuration measured here (or `--profile`'s): the steps a user of Hindsight #3534 can take.

Usage: python benchmarks/large_reranker.py [--model DIR] [--rounds 3] [--pairs 8] [--lengths 128,256,512]
       [--typical 96] [--profile PROFILE.yaml] [--skip-steps]
Without --model it builds the graph once into $TMPDIR/autotune-large-xlmr (about 30 s and 5 GB of peak RSS).
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import statistics
import tempfile
import time
from pathlib import Path

from _common import host_line

from autotune.host import default_probe
from autotune.runtime.engine import EngineConfig
from autotune.runtime.model import load_model_dir
from autotune.runtime.quantize import Int8Variant
from autotune.runtime.sessions import EnginePool

QUERY = "w10 w11 w12 w13"
DEFAULTS = EngineConfig(batch_size=32, intra_op_threads=0, length_sort=True, precision="fp32", mem_arena=False,
                        spinning=False)  # Hindsight 1.1's onnx provider
VARIANTS = (("fp32", None), ("int8 per-token", Int8Variant("per-token")),
            ("int8 per-channel", Int8Variant("per-channel")))


def docs_of(tokens: int, n: int) -> list[str]:
    """`n` documents whose pair with QUERY is `tokens` tokens long (4 special tokens, the word-level vocabulary)."""
    words = max(1, tokens - 4 - len(QUERY.split()))
    return [" ".join(f"w{100 + (i * 7 + j) % 5000}" for j in range(words)) for i in range(n)]


def per_pair_s(pool: EnginePool, config: EngineConfig, docs: list[str]) -> float:
    result = pool.engine(config).score(QUERY, docs)
    return result.total_s / len(docs)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _step(name: str, model: str, has_vnni: bool, out: str, queue: multiprocessing.Queue) -> None:
    """One step in a fresh process, so its peak RSS is its own."""
    import os

    os.environ["AUTOTUNE_CACHE_DIR"] = out
    from autotune.outputs.model_dir import stage_model_dir
    from autotune.runtime.fusion import fused_model_path
    from autotune.runtime.quantize import int8_model_path

    start = time.perf_counter()
    bundle = load_model_dir(Path(model))
    if name == "per-token int8 rewrite":
        int8_model_path(bundle, has_vnni, variant=Int8Variant("per-token"))
    elif name == "dynamic per-channel int8":
        int8_model_path(bundle, has_vnni, variant=Int8Variant("per-channel"))
    elif name == "fused graph":
        fused_model_path(bundle)
    elif name == "staging the emitted directory":
        stage_model_dir(Path(out) / "emitted", onnx_file=bundle.onnx_path, source_dir=bundle.directory,
                        input_names=["input_ids", "attention_mask"], max_tokens=512, owner="bench").commit()
    elif "session" in name:
        pool = EnginePool(bundle, has_vnni=has_vnni)
        pool.use_int8(Int8Variant("per-token"))
        config = EngineConfig(batch_size=4, intra_op_threads=0, length_sort=True,
                              precision="int8" if "int8" in name else "fp32")
        pool.engine(config).score(QUERY, docs_of(128, 4))
    queue.put((time.perf_counter() - start, _peak_mb()))


def steps(model: Path, has_vnni: bool) -> None:
    print("\n1. each step's peak RSS (a fresh process each; the model is "
          f"{sum(p.stat().st_size for p in model.iterdir()) / 2**30:.2f} GB on disk)")
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="large-steps-") as out:
        for name in ("hashing and loading the model", "per-token int8 rewrite", "dynamic per-channel int8",
                     "fused graph", "staging the emitted directory", "fp32 session, batch 4 at 128 tokens",
                     "int8 session, batch 4 at 128 tokens"):
            queue: multiprocessing.Queue = ctx.Queue()
            proc = ctx.Process(target=_step, args=(name, str(model), has_vnni, out, queue))
            proc.start()
            proc.join()
            if proc.exitcode != 0 or queue.empty():
                print(f"   {name:<40} failed (exit {proc.exitcode})")
                continue
            seconds, peak = queue.get()
            print(f"   {name:<40} {seconds:6.1f} s   peak RSS {peak:6.0f} MB")


def variants_by_length(model: Path, has_vnni: bool, lengths: list[int], pairs: int, rounds: int) -> None:
    print(f"\n2. per pair, at batch 4 and the host's threads, median of {rounds} interleaved rounds of {pairs} pairs; "
          "ratio = fp32's time / the variant's")
    bundle = load_model_dir(model)
    pools = []
    for _, variant in VARIANTS:
        pool = EnginePool(bundle, has_vnni=has_vnni, max_sessions=1)
        if variant is not None:
            pool.use_int8(variant)
        pools.append(pool)
    print(f"   {'tokens':>6}  " + "  ".join(f"{label:>22}" for label, _ in VARIANTS))
    for tokens in lengths:
        docs = docs_of(tokens, pairs)
        times: list[list[float]] = [[] for _ in VARIANTS]
        for pool, (_, variant) in zip(pools, VARIANTS, strict=True):
            per_pair_s(pool, _config(variant), docs[:2])  # warm-up: the session, the thread pool
        for _ in range(rounds):
            for i, (pool, (_, variant)) in enumerate(zip(pools, VARIANTS, strict=True)):
                times[i].append(per_pair_s(pool, _config(variant), docs))
        medians = [statistics.median(t) for t in times]
        cells = [f"{m * 1000:8.0f} ms  {medians[0] / m:5.2f}x" for m in medians]
        print(f"   {tokens:>6}  " + "  ".join(f"{c:>22}" for c in cells))
    for pool in pools:
        pool.release()


def _config(variant: Int8Variant | None, batch: int = 4, threads: int = 0) -> EngineConfig:
    return EngineConfig(batch_size=batch, intra_op_threads=threads, length_sort=True,
                        precision="fp32" if variant is None else "int8")


def threads_and_batch(model: Path, has_vnni: bool, cores: int, tokens: int, rounds: int
                      ) -> dict[EngineConfig, float]:
    print(f"\n3. threads and batch at {tokens} tokens a pair, 32 pairs (one batch of Hindsight's 32): cost per "
          "pair as a ratio to Hindsight's defaults (fp32, batch 32, its threads, arena off, no spinning)")
    bundle = load_model_dir(model)
    docs = docs_of(tokens, 32)
    results: dict[EngineConfig, float] = {}
    for _, variant in VARIANTS[:2]:
        pool = EnginePool(bundle, has_vnni=has_vnni, max_sessions=1)
        if variant is not None:
            pool.use_int8(variant)
        configs = [DEFAULTS] if variant is None else []
        configs += [_config(variant, batch, threads) for threads in sorted({1, cores})
                    for batch in (1, 4, 8, 32)]
        for config in configs:
            per_pair_s(pool, config, docs[:2])
            results[config] = statistics.median(per_pair_s(pool, config, docs) for _ in range(rounds))
        pool.release()
    base = results[DEFAULTS]
    for config, cost in sorted(results.items(), key=lambda kv: kv[1]):
        print(f"   {config.label():<48} {cost * 1000:7.0f} ms a pair   {base / cost:5.2f}x the defaults")
    return results


def projection(results: dict[EngineConfig, float], tuned: EngineConfig | None, tokens: int) -> None:
    base = results[DEFAULTS]
    pick = tuned or min(results, key=results.get)  # type: ignore[arg-type]
    cost = results.get(pick)
    print(f"\n4. one recall's reranking, projected from section 3's cost per pair at {tokens} tokens "
          f"(candidates x cost; the tuned pick: {pick.label()})")
    if cost is None:
        print("   the profile's configuration was not among those measured in section 3")
        return
    print(f"   {'candidates':>10}  {'defaults':>10}  {'tuned':>10}  {'vs defaults at 300':>20}")
    for n in (300, 100, 50):
        print(f"   {n:>10}  {n * base:9.1f}s  {n * cost:9.1f}s  {300 * base / (n * cost):19.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--lengths", default="128,256,512")
    parser.add_argument("--typical", type=int, default=96, help="a pair's tokens for sections 3 and 4")
    parser.add_argument("--profile", type=Path, help="project this profile's configuration in section 4")
    parser.add_argument("--skip-steps", action="store_true")
    args = parser.parse_args()
    host = default_probe().probe()
    print(host_line(host))
    model = args.model or Path(tempfile.gettempdir()) / "autotune-large-xlmr"
    if not (model / "model.onnx").exists():
        from tests.support.large import LARGE, build_xlmr

        start = time.perf_counter()
        build_xlmr(model, LARGE)
        print(f"built {model}: {time.perf_counter() - start:.0f} s, peak RSS {_peak_mb():.0f} MB")
    print(f"model: {model} (XLM-R large's shape, RANDOM weights: speed and memory only, no quality figure)")
    if not args.skip_steps:
        steps(model, host.has_vnni)
    variants_by_length(model, host.has_vnni, [int(x) for x in args.lengths.split(",")], args.pairs, args.rounds)
    results = threads_and_batch(model, host.has_vnni, host.cores.usable, args.typical, args.rounds)
    tuned = None
    if args.profile:
        import yaml

        from autotune.outputs.profile import profile_config

        tuned = profile_config(yaml.safe_load(args.profile.read_text()))
    projection(results, tuned, args.typical)


if __name__ == "__main__":
    main()
