"""Can the GO policy's placement logits rank single-op moves away from its hint?

Usage: python bench/bench_move_ranking.py [--suite S] [--random-graphs R] [--epochs E] [--top K]
                                          [--max-moves M] [--max-ops N]

A one-shot policy that departs from the best heuristic must know *which few* ops to move and
where; ``bench_headroom.py`` shows an oracle's best single move gains 1.5-4.7% and
``bench_imitation.py`` that imitating whole annealed placements fails. This asks the narrower
question, with no search at inference:

1. Training graphs: ``suite:S`` (default ``default``) plus ``R`` seeded random DAGs (150-1,500
   ops); placement on ``v100-nvlink-4``; the network and sizes of ``graphopt/configs/demo.yaml``.
2. Targets: every single-op move from the hint (the best heuristic's placement) is simulated (a
   random sample of ``M`` on graphs with more possible moves; the oracle is then the best sampled
   move); the
   target distribution over the ``N x D`` (op, device) pairs is uniform over the ``K`` best
   improving moves (the hint's own entries when no move improves).
3. Supervised training of the placement logits, one softmax over all (op, device) pairs of a
   graph (cross-entropy against the target), ``E`` epochs, Adam, batches of 4 graphs.
4. Every 5 epochs, on the held-out graphs and the training graphs: the network's top-1 move
   (highest logit among pairs that change the hint) and its top-``K`` moves on distinct ops
   applied together, priced by the simulator as a speed-up over the hint, beside the oracle: its
   best single move, or no move (1.0) on a graph where none improves.

One torch thread; every figure from runs in this process.
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
    move_times,
    placement_logits,
    random_graph_names,
    step_times,
)

from graphopt.sim import PreparedGraph
from policies.rollout import geomean


def apply_top(hint: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """``hint`` with the ``k`` highest-scoring moves (pairs that change the hint; one per op)."""
    scores = scores.copy()
    scores[np.arange(len(hint)), hint] = -np.inf
    placement = hint.copy()
    taken: set[int] = set()
    for flat in np.argsort(-scores, axis=None):
        i, d = divmod(int(flat), scores.shape[1])
        if i in taken:
            continue
        placement[i] = d
        taken.add(i)
        if len(taken) == k:
            break
    return placement


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suite", default="default", help="built-in suite of training graphs")
    parser.add_argument("--random-graphs", type=int, default=12)
    parser.add_argument(
        "--max-moves",
        type=int,
        default=100_000,
        help="moves simulated per graph at most (a random sample beyond)",
    )
    parser.add_argument("--max-ops", type=int, default=2048, help="policy size (demo: 2,048)")
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--top", type=int, default=4, help="K: target moves and moves applied")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    graphs = [f"suite:{args.suite}", *random_graph_names(args.random_graphs)]
    env, val, model = demo_policy(graphs, max_ops=args.max_ops)
    net = model.policy
    d = env.cluster.num_devices

    def prepare(e):  # hints, observations, prepared graphs and oracle gains of an env's graphs
        hints = [
            np.asarray(e.reference(i).decision.placement, np.int64) for i in range(len(e.graphs))
        ]
        obs = [e.reset(options={"graph": i})[0] for i in range(len(e.graphs))]
        prepared = [PreparedGraph(g, e.cluster) for g in e.graphs]
        timed = [
            move_times(p, h, d, args.max_moves, i)
            for i, (p, h) in enumerate(zip(prepared, hints, strict=True))
        ]
        gains = [base / times for base, times in timed]
        return hints, obs, prepared, gains

    t0 = time.perf_counter()
    train, held = prepare(env), prepare(val)
    m = env.max_ops
    targets = np.zeros((len(env.graphs), m, d), dtype=np.float32)
    for i, (hint, gains) in enumerate(zip(train[0], train[3], strict=True)):
        order = np.argsort(-np.nan_to_num(gains, nan=0.0), axis=None)[: args.top]
        best = [int(f) for f in order if gains.flat[f] > 1.0]
        if best:
            for f in best:
                targets[i].reshape(-1)[f] = 1.0 / len(best)
        else:
            targets[i, np.arange(len(hint)), hint] = 1.0 / len(hint)
    improving = sum(int((np.nan_to_num(g) > 1.0).sum()) for g in train[3])
    print(
        f"{len(env.graphs)} training graphs, {len(val.graphs)} held-out; all single moves "
        f"simulated in {time.perf_counter() - t0:.0f} s ({improving} improving moves on the "
        f"training graphs)"
    )

    def scores(obs: dict) -> np.ndarray:
        with torch.no_grad():
            return placement_logits(net, [obs])[0].numpy()

    def report(tag: str) -> None:
        net.set_training_mode(False)
        line = [f"{tag:>9}:"]
        for name, (hints, obs, prepared, gains) in (("held-out", held), ("training", train)):
            one, top, oracle = [], [], []
            for hint, o, p, g in zip(hints, obs, prepared, gains, strict=True):
                s = scores(o)[: len(hint)]
                base = step_times(p, hint[None])[0]
                one.append(base / step_times(p, apply_top(hint, s, 1)[None])[0])
                top.append(base / step_times(p, apply_top(hint, s, args.top)[None])[0])
                oracle.append(float(np.nanmax(g)))
            line.append(
                f"{name}: top-1 move {geomean(one):.4f} ({sum(x > 1 for x in one)}/{len(one)} "
                f"improve), top-{args.top} {geomean(top):.4f}, oracle (best move, or none) "
                f"{geomean(oracle):.4f};"
            )
            if name == "held-out":
                line.append("per graph top-1 " + " ".join(f"{x:.3f}" for x in one) + ";")
        print(" ".join(line), flush=True)

    report("start")
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for epoch in range(1, args.epochs + 1):
        net.set_training_mode(True)
        for lo in range(0, len(env.graphs), 4):
            rows = list(range(lo, min(lo + 4, len(env.graphs))))
            flat = placement_logits(net, [train[1][i] for i in rows]).reshape(len(rows), -1)
            real = torch.zeros(len(rows), m, d, dtype=torch.bool)
            for r, i in enumerate(rows):
                real[r, : env.graphs[i].num_ops] = True
            logp = F.log_softmax(flat.masked_fill(~real.reshape(len(rows), -1), -1e9), dim=-1)
            target = torch.as_tensor(targets[rows]).reshape(len(rows), -1)
            clipped_step(opt, net, -(target * logp).sum(dim=-1).mean())
        if epoch % 5 == 0:
            report(f"epoch {epoch}")


if __name__ == "__main__":
    main()
