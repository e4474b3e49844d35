"""Does a one-shot GO policy learn to improve on its hint by imitating search? (It does not, yet.)

Usage: python bench/bench_imitation.py [--random-graphs R] [--epochs E] [--budget N]
                                       [--move-weight W]

1. Training graphs: ``suite:default`` plus ``R`` seeded random DAGs (150-1,500 ops); placement on
   ``v100-nvlink-4``; the network and sizes of ``graphopt/configs/demo.yaml``.
2. Targets: for each training graph, simulated annealing from the hint (the best heuristic's
   placement) with ``N`` evaluations, then *pruned*: each moved op, in random order, goes back to
   its hinted device unless that makes the step time worse, so only useful moves remain.
3. Supervised training of the GO policy's placement logits towards the targets (cross-entropy
   per op, moved ops weighted ``W``; Adam, batches of 4 graphs), ``E`` epochs.
4. Every 5 epochs: the greedy policy's speed-up over the best heuristic (simulator) on the held-out
   graphs and on the training graphs themselves.

This is the experiment behind the README's "What limits the policy": the per-op policy decides
every op at once and cannot reproduce a coherent set of moves found by sequential search; its
departures from the hint make things worse, on held-out and training graphs alike.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F
from placement_moves import (
    clipped_step,
    demo_policy,
    placement_logits,
    random_graph_names,
    step_times,
)

from graphopt.baselines.search import simulated_annealing
from graphopt.sim import PreparedGraph
from graphopt.typing import Decision
from policies.rollout import geomean, run_policy


def pruned_search(graph, cluster, hint: np.ndarray, budget: int, seed: int) -> np.ndarray:
    """Annealing from ``hint``, then every move that does not help undone (module docstring)."""
    found = simulated_annealing(
        graph, cluster, "placement", budget, seed=seed, start=Decision(placement=hint)
    )
    best = np.asarray(found.decision.placement).copy()
    prepared = PreparedGraph(graph, cluster)
    current = step_times(prepared, best[None])[0]
    for op in np.random.default_rng(seed).permutation(np.flatnonzero(best != hint)):
        trial = best.copy()
        trial[op] = hint[op]
        c = step_times(prepared, trial[None])[0]
        if c <= current:
            best, current = trial, c
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--random-graphs", type=int, default=12)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--budget", type=int, default=3000, help="annealing evaluations")
    parser.add_argument("--move-weight", type=float, default=1.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    env, val, model = demo_policy(["suite:default", *random_graph_names(args.random_graphs)])

    t0 = time.perf_counter()
    m = env.max_ops
    hints = np.full((len(env.graphs), m), -1, dtype=np.int64)
    targets = np.full((len(env.graphs), m), -1, dtype=np.int64)
    for i, graph in enumerate(env.graphs):
        hint = np.asarray(env.reference(i).decision.placement, dtype=np.int64)
        hints[i, : graph.num_ops] = hint
        targets[i, : graph.num_ops] = pruned_search(graph, env.cluster, hint, args.budget, i)
    moved = (targets != hints) & (targets >= 0)
    print(
        f"{len(env.graphs)} training graphs, targets in {time.perf_counter() - t0:.0f} s: "
        f"{moved.sum()} useful moves ({moved.sum() / (targets >= 0).sum():.1%} of ops)"
    )
    observations = [env.reset(options={"graph": i})[0] for i in range(len(env.graphs))]
    net = model.policy
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)

    def report(tag: str) -> None:
        net.set_training_mode(False)
        held = [run_policy(model, val, i).speedup for i in range(len(val.graphs))]
        train = [run_policy(model, env, i).speedup for i in range(len(env.graphs))]
        print(
            f"{tag:>9}: held-out {' '.join(f'{s:.3f}' for s in held)} (geomean "
            f"{geomean(held):.3f}); training graphs geomean {geomean(train):.3f}, "
            f"worst {min(train):.3f}",
            flush=True,
        )

    report("start")
    for epoch in range(1, args.epochs + 1):
        net.set_training_mode(True)
        for lo in range(0, len(observations), 4):
            rows = list(range(lo, min(lo + 4, len(observations))))
            logp = F.log_softmax(placement_logits(net, [observations[i] for i in rows]), dim=-1)
            target = torch.as_tensor(targets[rows])
            nll = -logp.gather(-1, target.clamp(min=0)[..., None]).squeeze(-1)
            weight = torch.where(torch.as_tensor(moved[rows]), args.move_weight, 1.0)
            weight = weight * (target >= 0)
            clipped_step(opt, net, (nll * weight).sum() / weight.sum())
        if epoch % 5 == 0:
            report(f"epoch {epoch}")


if __name__ == "__main__":
    main()
