"""Does the step-wise decoder's schedule describe the step time the policy is rewarded with?

Usage: python bench/bench_stepwise_fidelity.py [--graphs SPEC] [--cluster C] [--max-ops N]
       [--samples K] [--seed S]

The step-wise policy's state is the decoder's partial schedule (``graphopt.decoders.stepwise``:
ops in HEFT's order, insertion into idle gaps, heft-lc's link queues). The placement task's
reward is the simulator's step time, whose devices run their ready ops in topological order
(the default priorities). Per graph of ``SPEC`` (at most ``N`` ops) on cluster ``C``:

- ``dec/sim``: the decoder's own makespan of the best heuristic's placement over its simulated
  step time (1.000 where the decoder's model is the simulator's);
- ``order``: the speed-up of the same placement when the simulator runs ops in the decoder's
  order (its decision order as priorities): what the dispatch order alone is worth;
- ``tau``: Kendall's tau between the decoder's makespan and the simulated step time over ``K``
  placements sampled around the heuristic's (the linear anchor rule with weight 3);
- ``rollout``: a decode that at every step tries each allowed device, finishes the episode with
  the heuristic's devices and keeps the device of the lowest *decoder* makespan (the rollout
  algorithm with the decoder as its own model; no simulator call until the end): the decoder's
  predicted speed-up against the simulated one (topological order, and the decode's own order).

Speed-ups over each graph's best heuristic (the reference cache's), geometric means.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit
from scipy.stats import kendalltau

from graphopt.decoders.stepwise import (
    ANCHOR_FEATURE,
    NUM_FEATURES,
    HeadParams,
    candidates,
    commit,
    copy_state,
    decode,
    finish_greedy,
    new_state,
    next_op,
)
from graphopt.train.step_run import resolve_clusters, resolve_run_graphs

sys.path.insert(0, str(Path(__file__).parent))
from bench_stepwise_scorer import Case, geomean  # noqa: E402


@njit(cache=True)
def rollout_decode(g, pre, w_feat, b1, w2, b2, anchor_weight):
    """Place each op, in the decoder's order, on the allowed device whose branch (that device,
    then the head's greedy devices for every later op) has the lowest decoder makespan; ties
    keep the anchor's device. Returns ``(placement, makespan, order, moved)``."""
    n, num_dev = g[0].shape
    anchor = g[13]
    st = new_state(g)
    feat = np.zeros((num_dev, NUM_FEATURES), dtype=np.float32)
    mask = np.zeros(num_dev, dtype=np.bool_)
    order = np.zeros(n, dtype=np.int64)
    moved = 0
    for k in range(n):
        v = next_op(st)
        candidates(v, g, st, feat, mask)
        pick = anchor[v]
        mask[pick] = True
        branch = copy_state(st)
        commit(v, pick, g, branch)
        best = finish_greedy(g, branch, pre, w_feat, b1, w2, b2, anchor_weight)
        for d in range(num_dev):
            if mask[d] and d != anchor[v]:
                branch = copy_state(st)
                commit(v, d, g, branch)
                makespan = finish_greedy(g, branch, pre, w_feat, b1, w2, b2, anchor_weight)
                if makespan < best:
                    best, pick = makespan, d
        moved += pick != anchor[v]
        order[k] = v
        commit(v, pick, g, st)
    return st[0].copy(), st[17][0], order, moved


def levels(order: np.ndarray) -> np.ndarray:
    """Priorities that run ops in ``order`` (step ``k``'s op gets level ``k``)."""
    out = np.empty(len(order), dtype=np.int64)
    out[order] = np.arange(len(order))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", default="suite:family-test")
    ap.add_argument("--cluster", default="v100-nvlink-4")
    ap.add_argument("--max-ops", type=int, default=800)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    (cluster,) = resolve_clusters(args.cluster)
    graphs = [g for g in resolve_run_graphs(args.graphs) if g.num_ops <= args.max_ops]
    rng = np.random.default_rng(args.seed)
    print(f"{len(graphs)} graphs of {args.graphs} (<= {args.max_ops} ops), {cluster.name}")
    print(
        "| graph | ops | best heuristic | dec/sim | order | tau | rollout: ops moved | "
        "decoder's speed-up | simulated | simulated, its order | s |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    cols: dict[str, list[float]] = {k: [] for k in ("fid", "order", "pred", "sim", "sim_order")}
    taus = []
    for graph in graphs:
        began = time.perf_counter()
        case = Case(graph, cluster)
        n = graph.num_ops
        theta = np.zeros(NUM_FEATURES)
        theta[ANCHOR_FEATURE] = 1.0
        rule = HeadParams.linear(theta, n)
        base = decode(case.sg, "greedy", rule)
        theta[ANCHOR_FEATURE] = 3.0
        soft = HeadParams.linear(theta, n)
        samples = [decode(case.sg, "sample", soft, rng=rng) for _ in range(args.samples)]
        placement, makespan, order, moved = rollout_decode(
            case.sg.arrays, rule.pre, rule.w_feat, rule.b1, rule.w2, rule.b2, rule.anchor_weight
        )
        rows = [base.placement, base.placement, placement, placement]
        rows += [s.placement for s in samples]
        prios = [np.zeros(n, np.int64), levels(base.ops), np.zeros(n, np.int64), levels(order)]
        prios += [np.zeros(n, np.int64)] * len(samples)
        sim = np.asarray(case.prepared.evaluate_batch(np.stack(rows), np.stack(prios)).step_time)
        tau = float(kendalltau([s.makespan for s in samples], sim[4:])[0])
        figures = {
            "fid": base.makespan / sim[0],
            "order": sim[0] / sim[1],
            "pred": base.makespan / makespan,
            "sim": case.ref_time / sim[2],
            "sim_order": case.ref_time / sim[3],
        }
        for key, value in figures.items():
            cols[key].append(value)
        taus.append(tau)
        print(
            f"| {graph.name} | {n:,} | {case.ref_name} | {figures['fid']:.3f} | "
            f"{figures['order']:.3f}x | {tau:.2f} | {moved} | {figures['pred']:.3f}x | "
            f"{figures['sim']:.3f}x | {figures['sim_order']:.3f}x | "
            f"{time.perf_counter() - began:.1f} |",
            flush=True,
        )
    print(
        f"| geometric mean | | | {geomean(cols['fid']):.3f} (range {min(cols['fid']):.3f}-"
        f"{max(cols['fid']):.3f}) | {geomean(cols['order']):.3f}x | {np.mean(taus):.2f} (mean) | | "
        f"{geomean(cols['pred']):.3f}x | {geomean(cols['sim']):.3f}x | "
        f"{geomean(cols['sim_order']):.3f}x | |"
    )
    ahead = sum(v > 1.001 for v in cols["sim"])
    behind = sum(v < 0.999 for v in cols["sim"])
    print(f"rollout decode (topological order) above the heuristic on {ahead}, below on {behind}")


if __name__ == "__main__":
    main()
