"""Does the move-gain model pay more once fitted to the graph at hand? The built-in model is
fine-tuned on the graph's own labelled moves before the search, against the built-in model as it
is and a random order.

Usage: python bench/bench_move_tuning.py [--graphs SPEC] [--cluster C] [--max-ops N]
       [--calls C] [--ops K] [--epochs E] [--free-labels]

On each graph, from its best heuristic's placement: **builtin** (the search of
:mod:`graphopt.nn.move_search` in the built-in model's order, ``C`` calls), **random** (the same
in a random order), **tuned** (the moves of ``K`` drawn ops labelled by the simulator as
``graphopt moves train`` labels them, about ``2K``-``3K`` calls; the built-in model fine-tuned on them
for ``E`` full-batch Adam steps, learning rate 3e-4, binary cross-entropy (``fit_move_net(...,
start=)``); then the search in its
order on the calls left, or on all ``C`` with ``--free-labels``). Speed-ups over the best
heuristic, geometric means. Torch on 2 threads.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from graphopt.baselines.reference_cache import cached_best_placement
from graphopt.hardware import get_cluster
from graphopt.nn.move_gain import load_move_net
from graphopt.nn.move_search import move_search
from graphopt.train.move_gain import fit_move_net, move_examples
from graphopt.train.step_run import resolve_run_graphs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stepwise_scorer import geomean  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", default="suite:cross-family")
    ap.add_argument("--cluster", default="v100-nvlink-4")
    ap.add_argument("--max-ops", type=int, default=3000)
    ap.add_argument("--calls", type=int, default=256)
    ap.add_argument("--ops", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--free-labels", action="store_true", help="labels not taken from --calls")
    args = ap.parse_args()
    torch.set_num_threads(2)
    cluster = get_cluster(args.cluster)
    builtin, _ = load_move_net("builtin")
    columns: dict[str, list[float]] = {"builtin": [], "random": [], "tuned": []}
    print("| graph | ops | builtin | random | tuned | label calls | tuning s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    began = time.perf_counter()
    for graph in resolve_run_graphs(args.graphs):
        if graph.num_ops > args.max_ops:
            continue
        start, ref, _ = cached_best_placement(graph, cluster)
        example = move_examples([graph], cluster, args.ops, seed=5)[0]
        spent = int((~np.isnan(example.gains)).sum())
        t0 = time.perf_counter()
        net = fit_move_net([example], args.epochs, lr=3e-4, start=builtin)
        tuning = time.perf_counter() - t0
        left = args.calls if args.free_labels else max(1, args.calls - spent)
        for name, model, calls in (
            ("builtin", builtin, args.calls),
            ("random", None, args.calls),
            ("tuned", net, left),
        ):
            found = move_search(graph, cluster, model, start, calls, start_time=ref, seed=0)
            columns[name].append(ref / found.step_time)
        cells = " | ".join(f"{columns[c][-1]:.4f}" for c in columns)
        print(f"| {graph.name} | {graph.num_ops} | {cells} | {spent} | {tuning:.1f} |", flush=True)
    means = " | ".join(f"**{geomean(v):.4f}**" for v in columns.values())
    print(f"| geometric mean | | {means} | | |")
    ahead = sum(t >= b for t, b in zip(columns["tuned"], columns["builtin"], strict=True))
    print(
        f"\ntuned >= builtin on {ahead} of {len(columns['tuned'])}; "
        f"{time.perf_counter() - began:.0f} s"
    )


if __name__ == "__main__":
    main()
