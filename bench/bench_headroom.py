"""How much room do the held-out graphs leave above the best heuristic, and for what kind of policy?

Usage: python bench/bench_headroom.py [--graphs GRAPHS] [--cluster PRESET] [--budget N]

For each graph, placement on ``--cluster``, starting from the best heuristic's placement (the
environments' reference and the policy's hint), every figure a speed-up over it (> 1 is better):

- ``bound``: the best heuristic over the lower bound (:func:`graphopt.sim.lower_bounds`): the most
  any placement could gain;
- ``anneal``: simulated annealing from the best heuristic with ``--budget`` simulator evaluations
  (sequential: each move is priced before the next);
- ``best 1``: the best *single-op move* (one op to another device), found by pricing all
  ``N (D - 1)`` of them: an oracle for a one-shot policy that edits one op of its hint;
- ``top k``: the ``k`` best single moves (by their gain alone) applied together;
- ``all``: every improving single move applied together: what a one-shot policy that knew each
  move's gain exactly, but not how moves interact, would output.

One-shot policies (``graphopt eval --mode greedy``) decide every op at once; these oracles bound
what such edits of the hint can gain without search.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from placement_moves import HELD_OUT, best_single_moves, move_times, step_times

from graphopt.baselines.search import simulated_annealing
from graphopt.baselines.staged import best_heuristic
from graphopt.hardware import get_cluster
from graphopt.sim import PreparedGraph, Simulator, lower_bounds
from graphopt.typing import Decision
from graphopt.workloads.registry import resolve_graphs

TOP = (1, 2, 4, 8, 16, 32)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--graphs", default=HELD_OUT)
    parser.add_argument("--cluster", default="v100-nvlink-4")
    parser.add_argument("--budget", type=int, default=3000, help="annealing evaluations")
    args = parser.parse_args()
    cluster = get_cluster(args.cluster)
    print(
        f"{'graph':<34} {'ops':>6} {'best heuristic':<15} {'bound':>6} {'anneal':>7} "
        f"{'all':>6} " + " ".join(f"{'best 1' if k == 1 else f'top {k}':>6}" for k in TOP)
    )
    for graph in resolve_graphs(args.graphs.split(",")):
        t0 = time.perf_counter()
        decision, measurement, label = best_heuristic(graph, cluster, "placement", Simulator())
        hint = np.asarray(decision.placement, dtype=np.int64)
        base = measurement.step_time
        prepared = PreparedGraph(graph, cluster)
        bound = base / lower_bounds(graph, cluster).best
        annealed = simulated_annealing(
            graph, cluster, "placement", args.budget, seed=0, start=Decision(placement=hint)
        )
        gain, device = best_single_moves(*move_times(prepared, hint, cluster.num_devices), hint)
        order = np.argsort(-gain)
        tops = []
        for k in TOP:
            chosen = order[:k][gain[order[:k]] > 1.0]
            edited = hint.copy()
            edited[chosen] = device[chosen]
            tops.append(base / step_times(prepared, edited[None])[0])
        improving = np.flatnonzero(gain > 1.0)
        edited = hint.copy()
        edited[improving] = device[improving]
        every = base / step_times(prepared, edited[None])[0]
        print(
            f"{graph.name[:34]:<34} {graph.num_ops:>6} {label:<15} {bound:6.3f} "
            f"{base / annealed.measurement.step_time:7.3f} {every:6.3f} "
            + " ".join(f"{t:6.3f}" for t in tops)
            + f"   ({len(improving)} improving single moves, {time.perf_counter() - t0:.1f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
