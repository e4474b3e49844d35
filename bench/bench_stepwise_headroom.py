"""How far above the best heuristic a placement can be found on the step-wise policy's evaluation
sets: the bar a zero-shot policy is held to (issue #37: family-test >= 1.05x, cross-family
>= 1.02x), against what search finds on the same graph.

Usage: python bench/bench_stepwise_headroom.py [--graphs SPEC] [--cluster C] [--max-ops N]
       [--calls K,K2,...] [--seed S]

Per graph, every figure a speed-up over the best heuristic's placement (the step-wise policy's
reference, from the reference cache):

- ``bound``: the reference over the lower bound (:func:`graphopt.sim.lower_bounds`): the most any
  placement could gain;
- ``optimize@K``: ``graphopt.optimize`` with ``K`` simulator calls (the decoder search, then
  annealing: the project's strongest search), seed ``S``.

A zero-shot decision (one decode, no simulator call) that reaches the issue's bar would have to
be about as good as what this search finds with thousands of calls; the last lines count the
graphs where the search itself reaches it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from graphopt.baselines.reference_cache import cached_best_placement
from graphopt.optimizer import optimize_graph
from graphopt.sim import lower_bounds
from graphopt.train.step_run import resolve_clusters, resolve_run_graphs


def geomean(values: list[float]) -> float:
    """Geometric mean of positive values."""
    return float(np.exp(np.mean(np.log(values))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", default="suite:family-test")
    ap.add_argument("--cluster", default="v100-nvlink-4")
    ap.add_argument("--max-ops", type=int, default=1400)
    ap.add_argument("--calls", default="256,1024,4096")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    budgets = [int(c) for c in args.calls.split(",")]
    (cluster,) = resolve_clusters(args.cluster)
    graphs = [g for g in resolve_run_graphs(args.graphs) if g.num_ops <= args.max_ops]
    print(
        f"{len(graphs)} graphs of {args.graphs} (<= {args.max_ops} ops), {cluster.name}, seed {args.seed}"
    )
    heads = " | ".join(f"optimize@{k}" for k in budgets)
    print(f"| graph | ops | best heuristic | bound | {heads} | s |")
    print("| --- | ---: | --- | ---: |" + " ---: |" * len(budgets) + " ---: |")
    columns: dict[str, list[float]] = {"bound": [], **{str(k): [] for k in budgets}}
    for graph in graphs:
        start = time.perf_counter()
        _, ref_time, ref_name = cached_best_placement(graph, cluster)
        bound = ref_time / lower_bounds(graph, cluster).best
        columns["bound"].append(bound)
        cells = []
        for k in budgets:
            result = optimize_graph(graph, cluster, calls=k, seed=args.seed)
            speedup = result.speedup_over(ref_time)
            columns[str(k)].append(speedup)
            cells.append(f"{speedup:.3f}x")
        print(
            f"| {graph.name} | {graph.num_ops:,} | {ref_name} | {bound:.3f}x | "
            f"{' | '.join(cells)} | {time.perf_counter() - start:.0f} |",
            flush=True,
        )
    cells = " | ".join(f"{geomean(columns[str(k)]):.3f}x" for k in budgets)
    print(f"| geometric mean | | | {geomean(columns['bound']):.3f}x | {cells} | |")
    for bar in (1.02, 1.05):
        counts = ", ".join(
            f"optimize@{k} {sum(v >= bar for v in columns[str(k)])}" for k in budgets
        )
        reach = sum(v >= bar for v in columns["bound"])
        print(f"graphs at or above {bar:.2f}x: bound {reach}, {counts} (of {len(graphs)})")


if __name__ == "__main__":
    main()
