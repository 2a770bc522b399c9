"""How much of an exhaustive grid's measuring time the Optuna search needs.

On a small space (batch {1, 4, 16} x threads {default, 1, usable} x sort {off, on}, fp32) it
runs the grid once, then the seeded TPE search, and prints the fraction of the grid's
measuring time the search spent before a trial came within 5% of the grid's best p95, and
whether both picked the same configuration. A configuration counts as within 5% by the grid's
own measurement of it. Usage: python benchmarks/search_efficiency.py
"""

from __future__ import annotations

import argparse

import optuna
from _common import example_workload, setup

from autotune.search.objective import Objective
from autotune.search.parity import reference_scores
from autotune.search.space import SearchSettings, SearchSpace
from autotune.search.study import config_of, is_feasible


def feasible(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)) if is_feasible(t)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    host, _bundle, pool = setup()
    workload = example_workload()
    usable = host.cores.usable  # type: ignore[attr-defined]
    space = SearchSpace(batch_sizes=(1, 4, 16), threads=tuple(sorted({0, 1, usable})), precisions=("fp32",))
    settings = SearchSettings(trials=args.trials, repeats=2, prune_ratio=1e9, seed=args.seed)
    reference = reference_scores(pool, workload, host.onnxruntime)  # type: ignore[attr-defined]
    objective = Objective(pool, workload, reference, space, settings)
    grid_space = {"batch_size": list(space.batch_sizes), "intra_op_threads": list(space.threads),
                  "length_sort": [False, True], "precision": ["fp32"]}
    grid = optuna.create_study(sampler=optuna.samplers.GridSampler(grid_space, seed=args.seed))
    grid.optimize(objective, n_trials=space.size())
    grid_time = sum(t.duration.total_seconds() for t in grid.trials)
    grid_best = min(feasible(grid), key=lambda t: t.value)
    tpe = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=args.seed, n_startup_trials=4))
    tpe.optimize(objective, n_trials=args.trials)
    # Judge each configuration the search tried by the grid's own measurement of it, so that two
    # measurements of one configuration minutes apart do not decide the answer.
    grid_value = {config_of(t): t.value for t in feasible(grid)}
    spent, reached = 0.0, None
    for t in tpe.trials:
        spent += t.duration.total_seconds()
        value = grid_value.get(config_of(t)) if t.params else None
        if value is not None and is_feasible(t) and value <= grid_best.value * 1.05:
            reached = spent
            break
    tpe_best = min(feasible(tpe), key=lambda t: t.value)
    print(f"grid: {space.size()} configurations, {grid_time:.1f} s of measuring; best "
          f"{config_of(grid_best).label()} p95 {grid_best.value:.1f} ms")
    if reached is None:
        print(f"search: never came within 5% of the grid's best in {args.trials} trials")
    else:
        print(f"search reached within 5% of the grid's best after {reached / grid_time:.0%} of the grid's "
              f"measuring time")
    same = config_of(tpe_best) == config_of(grid_best)
    print(f"search picked {config_of(tpe_best).label()}: {'the same as' if same else 'different from'} the grid's")


if __name__ == "__main__":
    main()
