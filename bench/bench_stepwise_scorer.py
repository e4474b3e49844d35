"""Is there a rule over the step-wise policy's schedule features that beats the best heuristic,
per graph and across graphs? The simplest policy class: a linear scoring rule (issue #37).

Usage: python bench/bench_stepwise_scorer.py [--graphs SPEC] [--train SPEC] [--cluster C]
       [--max-ops N] [--calls K] [--train-calls K] [--seed S] [--neighbours K] [--pool SPEC]

The step-wise decoder (``graphopt.decoders.stepwise``) with the head ``HeadParams.linear(theta)``
places each op on the allowed device of highest ``theta . feat`` (the schedule features,
``anchor`` among them: ``theta`` = 1 on ``anchor`` alone is the best heuristic's placement). The
weights are searched by CMA-ES (the ``cma`` package; one rule a generation per weight, from the
anchor's rule), each rule one greedy decode priced by the simulator, its score the log speed-up over the
best heuristic:

1. **per graph**: ``K`` simulator calls on each graph of ``--graphs``, against
   ``graphopt.optimize`` (the decoder search, then annealing) at the same ``K`` calls;
2. **transfer**: each graph's best ``theta`` applied to every other graph of the set (one decode
   each, no search): does a rule found on one graph carry to another?
3. **one rule for all** (``--train``): one ``theta`` searched for the geometric mean over the
   training graphs, then decoded once on each graph of ``--graphs`` (zero-shot);
4. **the nearest training graph's rule** (``--neighbours K``, ``gen:`` graphs of ``--graphs``
   only): for each, the ``K`` graphs of ``--pool`` of its family nearest in their arguments
   (:func:`distance`), each one's own rule searched with ``--calls`` calls as in part 1, then decoded on
   the test graph: the nearest one's (one decode: the simplest prediction of a graph's rule from
   the graph) and the best of the ``K`` (``K`` decodes).

Speed-ups over each graph's best heuristic (the reference cache's), geometric means.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import cma
import numpy as np

from graphopt.baselines.reference_cache import cached_best_placement
from graphopt.decoders.stepwise import (
    ANCHOR_FEATURE,
    NUM_FEATURES,
    HeadParams,
    StepGraph,
    decode,
    step_graph,
)
from graphopt.optimizer import optimize_graph
from graphopt.sim.simulator import PreparedGraph
from graphopt.train.step_run import resolve_clusters, resolve_run_graphs
from graphopt.workloads import generated

BOUND = 8.0
"""Each weight is searched in ``[-BOUND, BOUND]``."""
SPREAD = 4.0
"""The search starts at the anchor's rule with weight ``SPREAD``, step size ``SPREAD / 2``."""


class Case:
    """One graph on the cluster: its decoder arrays, simulator and best heuristic."""

    def __init__(self, graph, cluster) -> None:
        placement, self.ref_time, self.ref_name = cached_best_placement(graph, cluster)
        self.graph = graph
        self.sg: StepGraph = step_graph(graph, cluster, placement)
        self.prepared = PreparedGraph(graph, cluster)

    def placement(self, theta: np.ndarray) -> np.ndarray:
        """The greedy decode of the linear rule ``theta``."""
        return decode(self.sg, "greedy", HeadParams.linear(theta, self.graph.num_ops)).placement

    def priced(self, placements: np.ndarray) -> np.ndarray:
        """Speed-up of each placement ``(B, N)`` (0 where the simulator finds it invalid)."""
        result = self.prepared.evaluate_batch(placements)
        return np.where(result.valid, self.ref_time / np.asarray(result.step_time), 0.0)

    def speedups(self, thetas: np.ndarray) -> np.ndarray:
        """Speed-up of each rule's greedy decode (0 where the simulator finds it invalid)."""
        return self.priced(np.stack([self.placement(t) for t in thetas]))


def search_rule(
    score: Callable[[np.ndarray], np.ndarray],
    calls: int,
    seed: int,
    num_features: int = NUM_FEATURES,
    anchor: int = ANCHOR_FEATURE,
) -> tuple[np.ndarray, float]:
    """The weights of highest ``score`` (mean log speed-up of a batch of rules) that CMA-ES finds
    in ``calls`` evaluations, starting from the anchor's rule (``num_features`` weights, the
    anchor's at ``anchor``; one rule a generation per weight); returns them and their score."""
    x0 = np.zeros(num_features)
    x0[anchor] = SPREAD
    best_x, best = x0, float(score(x0[None])[0])
    options = {"popsize": num_features, "seed": seed + 1, "verbose": -9, "bounds": [-BOUND, BOUND]}
    es = cma.CMAEvolutionStrategy(x0, SPREAD / 2, options)
    used = 1
    while used + num_features <= calls:
        xs = np.asarray(es.ask())
        values = score(xs)
        used += len(xs)
        if values.max() > best:
            best_x, best = xs[int(values.argmax())].copy(), float(values.max())
        es.tell(list(xs), list(-values))
    return best_x, best


def log_score(cases: Sequence[Case]) -> Callable[[np.ndarray], np.ndarray]:
    """Mean log speed-up over ``cases`` of each rule of a batch."""

    def score(thetas: np.ndarray) -> np.ndarray:
        logs = [np.log(np.maximum(c.speedups(thetas), 1e-3)) for c in cases]
        return np.mean(logs, axis=0)

    return score


def distance(a: str, b: str) -> float:
    """How far two ``gen:`` configurations of one family are: the sum over their arguments of
    ``|log2((a + 1) / (b + 1))|`` (``inf`` across families, or for a name that is not ``gen:``)."""
    if not (generated.is_generated(a) and generated.is_generated(b)):
        return float("inf")
    fa, va = generated.parse_name(a)
    fb, vb = generated.parse_name(b)
    if fa.name != fb.name:
        return float("inf")
    return float(sum(abs(np.log2((va[k] + 1) / (vb[k] + 1))) for k in va))


def geomean(values) -> float:
    return float(np.exp(np.mean(np.log(np.maximum(values, 1e-3)))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", default="suite:family-test")
    ap.add_argument("--train", default="suite:train-gen-small", help="'' skips part 3")
    ap.add_argument("--cluster", default="v100-nvlink-4")
    ap.add_argument("--max-ops", type=int, default=1400)
    ap.add_argument("--calls", type=int, default=256, help="per graph (parts 1 and 2)")
    ap.add_argument("--train-calls", type=int, default=224, help="rules tried in part 3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--neighbours", type=int, default=0, help="part 4: K nearest (0: skip)")
    ap.add_argument("--pool", default="suite:train-gen", help="part 4: the training graphs")
    args = ap.parse_args()
    (cluster,) = resolve_clusters(args.cluster)
    graphs = [g for g in resolve_run_graphs(args.graphs) if g.num_ops <= args.max_ops]
    cases = [Case(g, cluster) for g in graphs]
    print(f"{len(cases)} graphs of {args.graphs} (<= {args.max_ops} ops), {cluster.name}")

    print(f"\n1. per graph, {args.calls} simulator calls each, seed {args.seed}")
    print(
        f"| graph | ops | best heuristic | linear rule@{args.calls} | optimize@{args.calls} | s |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    thetas, rule, opt = [], [], []
    for case in cases:
        began = time.perf_counter()
        theta, value = search_rule(log_score([case]), args.calls, args.seed)
        result = optimize_graph(case.graph, cluster, calls=args.calls, seed=args.seed)
        thetas.append(theta)
        rule.append(float(np.exp(value)))
        opt.append(result.speedup_over(case.ref_time))
        print(
            f"| {case.graph.name} | {case.graph.num_ops:,} | {case.ref_name} | {rule[-1]:.3f}x | "
            f"{opt[-1]:.3f}x | {time.perf_counter() - began:.1f} |",
            flush=True,
        )
    ahead = sum(r >= o for r, o in zip(rule, opt, strict=True))
    print(f"| geometric mean | | | {geomean(rule):.3f}x | {geomean(opt):.3f}x | |")
    print(f"linear rule >= optimize on {ahead} of {len(cases)} graphs")

    print("\n2. each graph's rule decoded once on every other graph of the set")
    matrix = np.stack([case.speedups(np.stack(thetas)) for case in cases])  # graph x rule
    others = [np.delete(matrix[:, j], j) for j in range(len(cases))]
    means = np.array([geomean(o) for o in others])
    above = np.array([(o > 1.001).sum() for o in others])
    below = np.array([(o < 0.99).sum() for o in others])
    moved = np.array([rule[j] > 1.001 for j in range(len(cases))])
    print(
        f"the {moved.sum()} rules that leave the heuristic on their own graph: geomean on the "
        f"other {len(cases) - 1} graphs {geomean(means[moved]) if moved.any() else 1:.3f}x "
        f"(best rule {means[moved].max() if moved.any() else 1:.3f}x, worst "
        f"{means[moved].min() if moved.any() else 1:.3f}x); above the heuristic on "
        f"{above[moved].mean() if moved.any() else 0:.1f} graphs on average, below 0.99x on "
        f"{below[moved].mean() if moved.any() else 0:.1f}"
    )

    if args.train:
        train = [
            Case(g, cluster)
            for g in resolve_run_graphs(args.train)
            if g.num_ops <= args.max_ops
            and g.fingerprint not in {c.graph.fingerprint for c in cases}
        ]
        print(
            f"\n3. one rule searched over {len(train)} graphs of {args.train} ({args.train_calls} rules)"
        )
        began = time.perf_counter()
        theta, value = search_rule(log_score(train), args.train_calls, args.seed)
        zero_shot = cases and np.concatenate([c.speedups(theta[None]) for c in cases])
        print(
            f"training graphs: {np.exp(value):.4f}x; {args.graphs}, one decode each: "
            f"{geomean(zero_shot):.4f}x (min {zero_shot.min():.3f}x; above the heuristic on "
            f"{(zero_shot > 1.001).sum()}, below 0.99x on {(zero_shot < 0.99).sum()}); "
            f"{time.perf_counter() - began:.0f} s"
        )

    if args.neighbours:
        tests = [c for c in cases if generated.is_generated(c.graph.name)]
        pool = [n for n in resolve_run_graphs(args.pool) if n.num_ops <= args.max_ops]
        pool_names = [g.name for g in pool]
        print(
            f"\n4. each of {len(tests)} gen: graphs decoded with the rules of its "
            f"{args.neighbours} nearest graphs of {args.pool} ({args.calls} calls each)"
        )
        print("| graph | nearest | its rule on its own graph | nearest's rule | best of the K |")
        print("| --- | --- | ---: | ---: | ---: |")
        nearest, best_of = [], []
        for case in tests:
            far = [distance(case.graph.name, n) for n in pool_names]
            picks = [int(i) for i in np.argsort(far)[: args.neighbours] if np.isfinite(far[i])]
            rules = [
                search_rule(log_score([Case(pool[i], cluster)]), args.calls, args.seed)
                for i in picks
            ]
            here = case.speedups(np.stack([theta for theta, _ in rules]))
            nearest.append(float(here[0]))
            best_of.append(float(here.max()))
            print(
                f"| {case.graph.name} | {pool_names[picks[0]]} | {np.exp(rules[0][1]):.3f}x | "
                f"{here[0]:.3f}x | {here.max():.3f}x |",
                flush=True,
            )
        print(
            f"| geometric mean | | | {geomean(nearest):.3f}x | {geomean(best_of):.3f}x |\n"
            f"nearest's rule above the heuristic on {sum(v > 1.001 for v in nearest)} of "
            f"{len(tests)}, below 0.99x on {sum(v < 0.99 for v in nearest)}"
        )


if __name__ == "__main__":
    main()
