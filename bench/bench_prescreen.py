"""``graphopt optimize --prescreen M``: the decoder search's window moves ranked by the analytic
schedule estimate before the simulator prices one, against annealing with sixteen times the
simulator calls (issue #38: on ``hetero-cpu-2gpu``, optimize at 256 calls >= annealing at 4,096).

Usage: python bench/bench_prescreen.py [--graphs G] [--clusters C] [--calls K] [--prescreen 1,8,16]
       [--annealing 4096] [--seed S]

Per graph, the speed-up over its best heuristic of simulated annealing from it at ``--annealing``
calls and of :func:`graphopt.optimizer.optimize_graph` at ``K`` calls with each ``prescreen``
(1: the plain search), with each one's wall seconds: pre-screening spends decodes and estimates
(no simulation) to save simulator calls, for when those are the scarce resource (a learned cost
model, measurements on hardware); at equal wall time it is no better than the plain search with
more calls (the module docstring of :mod:`graphopt.decoders.search`).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_optimize import GRAPHS

from graphopt.baselines.search import simulated_annealing
from graphopt.baselines.staged import best_heuristic
from graphopt.hardware import get_cluster
from graphopt.optimizer import optimize_graph
from graphopt.sim import Simulator
from graphopt.workloads.registry import resolve_graphs


def geomean(values: list[float]) -> float:
    """Geometric mean of positive values."""
    return float(np.exp(np.mean(np.log(values))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", default=GRAPHS)
    ap.add_argument("--clusters", default="hetero-cpu-2gpu,v100-nvlink-4")
    ap.add_argument("--calls", type=int, default=256)
    ap.add_argument("--prescreen", default="1,8,16")
    ap.add_argument("--annealing", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    screens = [int(m) for m in args.prescreen.split(",")]
    graphs = resolve_graphs(args.graphs)
    optimize_graph(graphs[0], get_cluster("v100-nvlink-2"), calls=4, prescreen=2)  # compiled
    for cluster_name in args.clusters.split(","):
        cluster = get_cluster(cluster_name)
        heads = [f"annealing@{args.annealing}"] + [
            f"optimize@{args.calls} prescreen {m}" for m in screens
        ]
        print(f"\n### {cluster_name}, seed {args.seed} (speed-up over the best heuristic; s)\n")
        print("| graph | " + " | ".join(heads) + " |")
        print("| --- |" + " ---: |" * len(heads))
        columns: dict[str, list[float]] = {h: [] for h in heads}
        for graph in graphs:
            sim = Simulator()
            start, heuristic, _ = best_heuristic(graph, cluster, "placement", sim)
            ref = heuristic.step_time
            cells = []
            began = time.perf_counter()
            sa = simulated_annealing(
                graph, cluster, "placement", args.annealing, args.seed, start=start
            )
            columns[heads[0]].append(ref / sa.measurement.step_time)
            cells.append(f"{columns[heads[0]][-1]:.4f} ({time.perf_counter() - began:.1f})")
            for head, m in zip(heads[1:], screens, strict=True):
                began = time.perf_counter()
                found = optimize_graph(
                    graph, cluster, calls=args.calls, seed=args.seed, sim=sim, prescreen=m
                )
                columns[head].append(found.speedup_over(ref))
                cells.append(f"{columns[head][-1]:.4f} ({time.perf_counter() - began:.1f})")
            print(f"| {graph.name} | " + " | ".join(cells) + " |", flush=True)
        print(
            "| geometric mean | " + " | ".join(f"{geomean(v):.4f}" for v in columns.values()) + " |"
        )
        base = columns[heads[0]]
        for head, m in zip(heads[1:], screens, strict=True):
            wins = sum(a >= b for a, b in zip(columns[head], base, strict=True))
            verdict = "met" if geomean(columns[head]) >= geomean(base) else "missed"
            print(
                f"- optimize@{args.calls} with prescreen {m} >= annealing@{args.annealing}: "
                f"{geomean(columns[head]):.4f} vs {geomean(base):.4f} ({verdict}; on "
                f"{wins} of {len(base)} graphs)"
            )


if __name__ == "__main__":
    main()
