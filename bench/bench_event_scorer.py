"""Linear rules over the event-driven decoder's features, whose state is the simulator's own
partial execution (``graphopt.decoders.event_step``): per graph, and one rule for all graphs.

Usage: python bench/bench_event_scorer.py [--graphs SPEC] [--train SPEC] [--cluster C]
       [--max-ops N] [--calls K] [--train-calls K] [--seed S]

The same three parts as ``bench/bench_stepwise_scorer.py`` (which runs them on the
list-scheduling decoder, whose schedule is not the simulator's: ``bench_stepwise_fidelity.py``),
plus fixed rules:

0. **fixed rules**, one decode each: ``eft`` (the device of the earliest estimated finish: a
   HEFT that reads the simulator's state) and the anchor's rule with ``eft`` as a tie-break;
1. **per graph**: a rule searched by CMA-ES with ``K`` decodes on each graph of ``--graphs``;
2. **transfer**: each graph's rule decoded on every other graph of the set;
3. **one rule for all** (``--train``): one rule searched for the geometric mean over the
   training graphs, then decoded once on each graph of ``--graphs`` (zero-shot).

Each decode is priced by the simulator (its step time equals the decoder's makespan; the
simulator also checks memory). Speed-ups over each graph's best heuristic (the reference
cache's), geometric means.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from graphopt.baselines.reference_cache import cached_best_placement
from graphopt.decoders.event_step import (
    ANCHOR,
    FEATURES,
    NUM_EVENT_FEATURES,
    EventGraph,
    EventHead,
    decode_events,
    event_graph,
)
from graphopt.sim.simulator import PreparedGraph
from graphopt.train.step_run import resolve_clusters, resolve_run_graphs

sys.path.insert(0, str(Path(__file__).parent))
from bench_stepwise_scorer import Case, geomean, log_score, search_rule  # noqa: E402


class EventCase(Case):
    """One graph on the cluster: its event graph, simulator and best heuristic; rules decoded by
    the event-driven decoder."""

    def __init__(self, graph, cluster) -> None:
        placement, self.ref_time, self.ref_name = cached_best_placement(graph, cluster)
        self.graph = graph
        self.eg: EventGraph = event_graph(graph, cluster, placement)
        self.prepared = PreparedGraph(graph, cluster)

    def placement(self, theta: np.ndarray) -> np.ndarray:
        """The decode of the linear rule ``theta``."""
        return decode_events(self.eg, theta=theta).placement

    def speedup_of(self, head: EventHead) -> float:
        """Speed-up of ``head``'s decode (0 where the simulator finds it invalid)."""
        return float(self.priced(decode_events(self.eg, head).placement[None])[0])


def rule(**weights: float) -> np.ndarray:
    """A rule from feature names and weights."""
    theta = np.zeros(NUM_EVENT_FEATURES)
    for name, w in weights.items():
        theta[FEATURES.index(name)] = w
    return theta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", default="suite:family-test")
    ap.add_argument("--train", default="suite:train-gen-small", help="'' skips part 3")
    ap.add_argument("--cluster", default="v100-nvlink-4")
    ap.add_argument("--max-ops", type=int, default=1400)
    ap.add_argument("--calls", type=int, default=256, help="per graph (part 1)")
    ap.add_argument("--train-calls", type=int, default=400, help="rules tried in part 3")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    (cluster,) = resolve_clusters(args.cluster)
    graphs = [g for g in resolve_run_graphs(args.graphs) if g.num_ops <= args.max_ops]
    cases = [EventCase(g, cluster) for g in graphs]
    print(f"{len(cases)} graphs of {args.graphs} (<= {args.max_ops} ops), {cluster.name}")
    search = dict(num_features=NUM_EVENT_FEATURES, anchor=ANCHOR)

    fixed = {
        "anchor": rule(anchor=1.0),
        "eft": rule(eft=-1.0),
        "anchor, eft tie-break": rule(anchor=1.0, eft=-1e-3),
    }
    print("\n0. fixed rules, one decode each")
    for name, theta in fixed.items():
        s = np.concatenate([c.speedups(theta[None]) for c in cases])
        print(
            f"{name}: {geomean(s):.4f}x (min {s.min():.3f}x, max {s.max():.3f}x; above the "
            f"heuristic on {(s > 1.001).sum()}, below 0.99x on {(s < 0.99).sum()})"
        )

    print(f"\n1. per graph, {args.calls} decodes each, seed {args.seed}")
    print(f"| graph | ops | best heuristic | rule@{args.calls} | s |")
    print("| --- | ---: | --- | ---: | ---: |")
    thetas, found = [], []
    for case in cases:
        began = time.perf_counter()
        theta, value = search_rule(log_score([case]), args.calls, args.seed, **search)
        thetas.append(theta)
        found.append(float(np.exp(value)))
        print(
            f"| {case.graph.name} | {case.graph.num_ops:,} | {case.ref_name} | {found[-1]:.3f}x | "
            f"{time.perf_counter() - began:.1f} |",
            flush=True,
        )
    print(f"| geometric mean | | | {geomean(found):.3f}x | |")

    print("\n2. each graph's rule decoded once on every other graph of the set")
    matrix = np.stack([case.speedups(np.stack(thetas)) for case in cases])  # graph x rule
    others = np.array([geomean(np.delete(matrix[:, j], j)) for j in range(len(cases))])
    above = np.array([(np.delete(matrix[:, j], j) > 1.001).sum() for j in range(len(cases))])
    print(
        f"on the other {len(cases) - 1} graphs: {geomean(others):.3f}x (best rule "
        f"{others.max():.3f}x, worst {others.min():.3f}x); above the heuristic on "
        f"{above.mean():.1f} graphs on average"
    )

    if args.train:
        fingerprints = {c.graph.fingerprint for c in cases}
        train = [
            EventCase(g, cluster)
            for g in resolve_run_graphs(args.train)
            if g.num_ops <= args.max_ops and g.fingerprint not in fingerprints
        ]
        print(
            f"\n3. one rule searched over {len(train)} graphs of {args.train} "
            f"({args.train_calls} rules)"
        )
        began = time.perf_counter()
        theta, value = search_rule(log_score(train), args.train_calls, args.seed, **search)
        zero_shot = np.concatenate([c.speedups(theta[None]) for c in cases])
        print(
            f"rule {np.round(theta, 3).tolist()}\ntraining graphs: {np.exp(value):.4f}x; "
            f"{args.graphs}, one decode each: {geomean(zero_shot):.4f}x (min "
            f"{zero_shot.min():.3f}x; above the heuristic on {(zero_shot > 1.001).sum()}, below "
            f"0.99x on {(zero_shot < 0.99).sum()}); {time.perf_counter() - began:.0f} s"
        )


if __name__ == "__main__":
    main()
