"""Does a learned model of single-op moves pay inside search? A MoveGainNet trained on one set of
graphs ranks the moves of a first-improvement search on unseen ones, against the same search in a
random order and against ``graphopt optimize``'s search at equal simulator calls.

Usage: python bench/bench_move_gain.py [--train SPEC] [--train-clusters C,...] [--graphs SPEC]
       [--clusters C,...]
       [--max-ops N] [--ops K] [--epochs E] [--calls C] [--seed S] [--save F | --load F]
       [--no-optimize]

1. Training (``graphopt moves train``'s code, :mod:`graphopt.train.move_gain`) on ``--train``
   (at most ``N`` ops; graphs of ``--graphs`` left out), each graph on one of
   ``--train-clusters`` in turn; or ``--load``.
2. On ``--graphs``: the share of moves that gain among all sampled moves and among the model's
   top 10% (128 ops a graph, every other allowed device; the model never saw these graphs).
3. On each graph of ``--graphs`` and each cluster, from the best heuristic's placement, ``C``
   simulator calls each (:mod:`graphopt.nn.move_search`): **learned** (moves in the model's
   order, re-ranked after each kept move), **random** (the same search in a random order: what
   the model must beat), **optimize** (``graphopt.optimize``: decoder search and annealing),
   **optimize+learned** (``graphopt optimize --moves``: the same search on half the calls, then
   the learned moves on the other half) and **optimize+random** (the same with a random order).

Speed-ups over each graph's best heuristic; geometric means; seconds per graph. Torch on 2
threads.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from graphopt.baselines.reference_cache import cached_best_placement
from graphopt.nn.move_gain import load_move_net, move_inputs, save_move_net
from graphopt.nn.move_search import move_phase, move_search
from graphopt.optimizer import optimize_graph
from graphopt.sim.simulator import PreparedGraph
from graphopt.train.move_gain import fit_move_net, move_examples, move_gains
from graphopt.train.step_run import resolve_clusters, resolve_run_graphs

sys.path.insert(0, str(Path(__file__).parent))
from bench_stepwise_scorer import geomean  # noqa: E402

COLUMNS = ("learned", "random", "optimize", "optimize+learned", "optimize+random")


def held_out_precision(net, graphs, cluster, rng) -> tuple[int, float, float, int]:
    """Moves sampled on ``graphs`` (128 ops each): how many, the share that gain, the share that
    gain among the model's top 10% (all pooled), and on how many graphs the share among that
    graph's own top 10% is above the graph's share."""
    truth, guess = [], []
    above = 0
    for graph in graphs:
        placement, _, _ = cached_best_placement(graph, cluster)
        inputs = move_inputs(graph, cluster, placement)
        choice = np.flatnonzero(inputs.masks.sum(axis=1) >= 2)
        ops = np.sort(rng.choice(choice, min(128, len(choice)), replace=False))
        gains = move_gains(PreparedGraph(graph, cluster), inputs, ops)
        with torch.no_grad():
            predicted = net(inputs).numpy()
        known = ~np.isnan(gains)
        truth.append(gains[known])
        guess.append(predicted[known])
        mine = truth[-1][guess[-1] >= np.quantile(guess[-1], 0.9)]
        above += int((mine > 0).mean() > (truth[-1] > 0).mean())
    t, g = np.concatenate(truth), np.concatenate(guess)
    top = t[g >= np.quantile(g, 0.9)]
    return len(t), float((t > 0).mean()), float((top > 0).mean()), above


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", default="suite:train-gen")
    ap.add_argument("--graphs", default="suite:family-test")
    ap.add_argument("--clusters", default="v100-nvlink-4", help="evaluated on each")
    ap.add_argument(
        "--train-clusters", default="v100-nvlink-4", help="training graphs on each in turn"
    )
    ap.add_argument("--max-ops", type=int, default=1400)
    ap.add_argument("--ops", type=int, default=256, help="labelled ops per training graph")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--calls", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", default="", help="write the trained model here")
    ap.add_argument("--load", default="", help="a model (--save, graphopt moves train) instead")
    ap.add_argument("--no-optimize", action="store_true", help="the first two columns only")
    ap.add_argument("--precision-only", action="store_true", help="part 2 only")
    ap.add_argument("--loss", default="bce", help="bce (gains or not) or mse (clipped gains)")
    args = ap.parse_args()
    torch.set_num_threads(2)
    clusters = resolve_clusters(args.clusters)
    tests = [g for g in resolve_run_graphs(args.graphs) if g.num_ops <= args.max_ops]
    rng = np.random.default_rng(args.seed)
    began = time.perf_counter()
    if args.load:
        net, trained_on = load_move_net(args.load)
        print(f"model {args.load}: trained on {trained_on}")
    else:
        seen = {g.fingerprint for g in tests}
        train = [
            g
            for g in resolve_run_graphs(args.train)
            if g.num_ops <= args.max_ops and g.fingerprint not in seen
        ]
        train_clusters = resolve_clusters(args.train_clusters)
        examples = move_examples(train, train_clusters, args.ops, args.seed)
        labelled = time.perf_counter() - began
        net = fit_move_net(examples, args.epochs, seed=args.seed, loss=args.loss)
        moves = sum(int((~np.isnan(e.gains)).sum()) for e in examples)
        where = ",".join(c.name for c in train_clusters)
        print(
            f"trained on {len(train)} graphs of {args.train} ({where}): {moves:,} moves "
            f"labelled in {labelled:.0f} s, fitted in {time.perf_counter() - began - labelled:.0f}"
            f" s ({args.epochs} epochs)"
        )
        if args.save:
            save_move_net(
                net, args.save, f"{args.train} ({len(train)} graphs) on {clusters[0].name}"
            )
    for cluster in clusters:
        count, base, top, above = held_out_precision(net, tests, cluster, rng)
        print(
            f"{cluster.name}, {len(tests)} graphs of {args.graphs}: of {count:,} sampled moves "
            f"{base:.1%} gain; of the model's top 10%, {top:.1%}; a graph's own top 10% gains "
            f"more often than its moves on {above} of {len(tests)} graphs"
        )
        if args.precision_only:
            continue
        columns = COLUMNS[:2] if args.no_optimize else COLUMNS
        print(f"| graph | ops | {' | '.join(columns)} |")
        print("| --- | ---: |" + " ---: |" * len(columns))
        found: dict[str, list[float]] = {c: [] for c in columns}
        secs: dict[str, float] = dict.fromkeys(columns, 0.0)
        for graph in tests:
            placement, ref, _ = cached_best_placement(graph, cluster)
            for name in columns:
                t0 = time.perf_counter()
                if name in ("learned", "random"):
                    model = net if name == "learned" else None
                    r = move_search(
                        graph, cluster, model, placement, args.calls, start_time=ref, seed=args.seed
                    )
                    step = r.step_time
                else:
                    phase = None
                    if name != "optimize":
                        phase = move_phase(
                            net if name.endswith("learned") else None, seed=args.seed
                        )
                    step = optimize_graph(
                        graph, cluster, calls=args.calls, seed=args.seed, moves=phase
                    ).measurement.step_time
                secs[name] += time.perf_counter() - t0
                found[name].append(ref / step)
            row = " | ".join(f"{found[c][-1]:.3f}x" for c in columns)
            print(f"| {graph.name} | {graph.num_ops:,} | {row} |", flush=True)
        means = " | ".join(f"**{geomean(found[c]):.4f}x**" for c in columns)
        print(f"| geometric mean | | {means} |")
        print(
            f"| seconds a graph | | {' | '.join(f'{secs[c] / len(tests):.2f}' for c in columns)} |"
        )
        wins = sum(a > b + 1e-9 for a, b in zip(found["learned"], found["random"], strict=True))
        print(f"learned ahead of random on {wins} of {len(tests)} graphs")


if __name__ == "__main__":
    main()
