"""The move-gain model zero-shot: one event-driven decode and one forward pass of the best
heuristic's placement, and the model's top ``K`` moves applied at once, with no simulator call to
choose them (issue #37's zero-shot target: one encoder pass and one decode per graph).

Usage: python bench/bench_move_zero_shot.py [--load F] [--graphs SPEC] [--clusters C,...]
       [--max-ops N] [--ks K,...] [--floor P]

From each graph's best heuristic placement (:func:`graphopt.baselines.reference_cache.
cached_best_placement`), the model (:func:`graphopt.nn.move_gain.load_move_net`; default the
built-in one) ranks every move (:func:`graphopt.nn.move_gain.ranked_moves`); the first ``K`` of
them, one per op (an op's best-ranked device; moves predicted below ``--floor`` percent left out)
are applied together and the placement simulated once, only to report it. Columns: the speed-up
over the best heuristic for each ``K``; rows: the graphs, their geometric mean and how many stay
at least 0.99x. Torch on 2 threads.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from graphopt.baselines.reference_cache import cached_best_placement
from graphopt.nn.move_gain import load_move_net, move_inputs, ranked_moves
from graphopt.sim.simulator import PreparedGraph
from graphopt.train.step_run import resolve_clusters, resolve_run_graphs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stepwise_scorer import geomean  # noqa: E402


def top_moves(moves: np.ndarray, predicted: np.ndarray, k: int, floor: float) -> np.ndarray:
    """The first ``k`` of ``moves`` (ranked best first) with one move per op and a predicted
    score of at least ``floor``."""
    chosen: list[np.ndarray] = []
    seen: set[int] = set()
    for move, score in zip(moves, predicted, strict=True):
        if len(chosen) == k or score < floor:
            break
        if int(move[0]) not in seen:
            seen.add(int(move[0]))
            chosen.append(move)
    return np.asarray(chosen, dtype=np.int64).reshape(-1, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--load", default="builtin")
    ap.add_argument("--graphs", default="suite:family-test")
    ap.add_argument("--clusters", default="v100-nvlink-4")
    ap.add_argument("--max-ops", type=int, default=1400)
    ap.add_argument("--ks", default="1,2,4,8,16,32")
    ap.add_argument("--floor", type=float, default=-np.inf, help="least predicted score kept")
    args = ap.parse_args()
    torch.set_num_threads(2)
    ks = [int(k) for k in args.ks.split(",")]
    net, trained_on = load_move_net(args.load)
    print(f"model {args.load}: trained on {trained_on}")
    tests = [g for g in resolve_run_graphs(args.graphs) if g.num_ops <= args.max_ops]
    began = time.perf_counter()
    for cluster in resolve_clusters(args.clusters):
        print(f"\n### {cluster.name}, {len(tests)} graphs of {args.graphs}\n")
        print("| graph | ops | " + " | ".join(f"top {k}" for k in ks) + " |")
        print("| --- | ---: |" + " ---: |" * len(ks))
        found: dict[int, list[float]] = {k: [] for k in ks}
        for graph in tests:
            start, ref, _ = cached_best_placement(graph, cluster)
            moves, predicted = ranked_moves(net, move_inputs(graph, cluster, start))
            prepared = PreparedGraph(graph, cluster)
            cells = []
            for k in ks:
                placement = start.copy()
                chosen = top_moves(moves, predicted, k, args.floor)
                placement[chosen[:, 0]] = chosen[:, 1]
                result = prepared.evaluate_batch(placement[None])
                speedup = ref / float(result.step_time[0]) if result.valid[0] else 0.0
                found[k].append(speedup)
                cells.append(f"{speedup:.4f}")
            print(f"| {graph.name} | {graph.num_ops} | " + " | ".join(cells) + " |")
        print("| geometric mean | | " + " | ".join(f"{geomean(found[k]):.4f}" for k in ks) + " |")
        print(
            "| >= 0.99x on | | "
            + " | ".join(f"{sum(s >= 0.99 for s in found[k])} of {len(tests)}" for k in ks)
            + " |"
        )
    print(f"\n{time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
