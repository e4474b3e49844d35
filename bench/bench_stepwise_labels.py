"""How much one changed device at one step is worth: the rollout algorithm's labels, measured.

Usage: python bench/bench_stepwise_labels.py [--graphs SPEC] [--count N] [--steps K]
       [--cluster C] [--seed S]

For ``N`` graphs drawn from ``SPEC`` (default ``suite:train-gen``): the best heuristic's decode
by the step-wise decoder (the anchor policy: what imitation makes the policy), then at ``K``
random steps with a choice, every allowed device tried and the episode finished by the anchor
policy (:func:`graphopt.decoders.stepwise.lookahead`), each branch priced by the simulator.
Printed per graph: the share of those steps where some other device is faster by more than
0.1%, the largest such gain, and the correlation between the decoder's own makespan change and
the simulator's step-time change over all branches (how far the decoder's estimate can stand in
for the simulator as a label). These are the labels ``algorithm: lookahead`` trains on
(docs/results/stepwise.md).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from graphopt.decoders.stepwise import NUM_FEATURES, HeadParams, decode, lookahead
from graphopt.hardware import get_cluster
from graphopt.train.stepwise import make_item
from graphopt.workloads.graph_cache import load_graphs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", default="suite:train-gen")
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--cluster", default="v100-nvlink-4")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    graphs = load_graphs(args.graphs)
    rng = np.random.default_rng(args.seed)
    cluster = get_cluster(args.cluster)
    picks = rng.choice(len(graphs), min(args.count, len(graphs)), replace=False)
    print(f"{args.steps} steps per graph, {args.cluster}, seed {args.seed}")
    print("| graph | ops | best heuristic | steps gaining > 0.1% | largest gain | corr. | s |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
    shares, gains = [], []
    for i in picks:
        graph = graphs[i]
        item = make_item(graph, cluster)
        n = graph.num_ops
        anchor = HeadParams(
            np.zeros((n, 1)), np.zeros((NUM_FEATURES, 1)), np.zeros(1), np.zeros(1), 0.0, 100.0
        )
        start = time.perf_counter()
        episode = decode(item.sg, "greedy", anchor)
        choice = np.flatnonzero(episode.masks.sum(axis=1) >= 2)
        steps = np.sort(rng.choice(choice, min(args.steps, len(choice)), replace=False))
        makespans, branches = lookahead(item.sg, anchor, episode.actions, steps)
        flat = branches.reshape(-1, n)
        allowed = flat[:, 0] >= 0
        priced = item.prepared.evaluate_batch(flat[allowed])
        times = np.full(len(flat), np.inf)
        times[allowed] = np.where(priced.valid, priced.step_time, np.inf)
        times = times.reshape(makespans.shape)
        rows = np.arange(len(steps))
        own = episode.actions[steps]
        base = times[rows, own]
        gain = (base - times.min(axis=1)) / base
        d_decoder = makespans - makespans[rows, own][:, None]
        d_sim = times - base[:, None]
        keep = np.isfinite(d_decoder) & np.isfinite(d_sim) & (d_decoder != 0)
        corr = np.corrcoef(d_decoder[keep], d_sim[keep])[0, 1] if keep.sum() > 2 else np.nan
        shares.append(float(np.mean(gain > 1e-3)))
        gains.append(float(gain.max()))
        print(
            f"| {graph.name} | {n:,} | {item.reference_name} | {shares[-1]:.0%} | "
            f"{100 * gains[-1]:.2f}% | {corr:.2f} | {time.perf_counter() - start:.1f} |",
            flush=True,
        )
    print(f"| mean | | | {np.mean(shares):.0%} | {100 * np.mean(gains):.2f}% | | |")


if __name__ == "__main__":
    main()
