"""Imitating the search instead of the heuristic: the step-wise policy trained by DAgger towards
``graphopt.optimize``'s placements of its training graphs, then greedy zero-shot on family-test.

Usage: python bench/bench_stepwise_distill.py [--train N] [--max-ops M] [--calls K]
       [--updates U] [--anchor-weight A] [--encoder go|mlp] [--seed S] [--guided-search C]
       [--learning-rate LR] [--epochs E] [--positions P]

1. ``N`` graphs of ``suite:train-gen`` with at most ``M`` ops (drawn with seed 0), on
   ``v100-nvlink-4``; each one's imitation target is ``optimize_graph(calls=K)``'s placement where
   it beats the best heuristic (kept on disk under the cache root's ``distill-targets`` folder,
   keyed by graph, cluster and ``K``).
2. ``U`` imitation updates (:func:`graphopt.train.stepwise.train` with ``updates=0``: 8 graphs an
   update, 8 sampled decodes each, every visited state labelled with the target's device), from
   a fresh policy whose anchor bonus starts at ``A`` (Adam's step ``LR``, ``E`` passes an update;
   ``P`` > 0: the policy reads ``P`` Fourier features of each op's position, which let it hold
   one graph's placement exactly: does fitting the training targets harder carry to new graphs?).
3. Printed: the targets' speed-up, the share of the targets' decisions that leave the best
   heuristic's device and how many of those are the lowest-EFT device, the imitation accuracy,
   and the greedy decode's speed-up on the training graphs and on the 28 graphs of
   ``suite:family-test`` with at most 1,400 ops (``bench/bench_stepwise_headroom.py`` prints what
   the search itself reaches on them).
4. With ``--guided-search C``: the decoder search of ``graphopt optimize`` (from zero outputs,
   ``C`` calls, seeds 0 and 1) on those test graphs, its window moves as they are (uniform
   first op) against half of them centred on an op drawn in proportion to the trained policy's
   probability of leaving the anchor there (on the anchor's own trajectory): does the network
   point the search at the ops worth moving?
"""

from __future__ import annotations

import argparse
import hashlib
import time

import numpy as np
import torch

from graphopt.decoders.decision import channels
from graphopt.decoders.decision import decode as decode_outputs
from graphopt.decoders.search import (
    P_WINDOW,
    PLACEMENT_DECODER,
    WINDOW,
    decoder_search,
    window_move,
)
from graphopt.decoders.stepwise import SCHEDULE_FEATURES, decode
from graphopt.disk_cache import cache_root, read_npz, write_npz
from graphopt.optimizer import optimize_graph
from graphopt.sim import Simulator
from graphopt.train.step_run import build_items, resolve_clusters, resolve_run_graphs
from graphopt.train.stepwise import Item, StepTrainConfig, geomean, greedy_speedups, train
from graphopt.typing import Decision
from policies.step_policy import StepPolicy


def bench_items(train: int, max_ops: int) -> tuple[list[Item], list[Item]]:
    """The training items (``train`` graphs of ``suite:train-gen`` with at most ``max_ops`` ops,
    drawn with seed 0) and the test items (the family-test graphs of at most 1,400 ops), on
    ``v100-nvlink-4``."""
    clusters = resolve_clusters("v100-nvlink-4")
    pool = [g for g in resolve_run_graphs("suite:train-gen") if g.num_ops <= max_ops]
    picks = np.random.default_rng(0).choice(len(pool), min(train, len(pool)), replace=False)
    test = [g for g in resolve_run_graphs("suite:family-test") if g.num_ops <= 1400]
    return build_items([pool[i] for i in sorted(picks)], clusters), build_items(test, clusters)


def search_target(item: Item, calls: int) -> tuple[np.ndarray, float]:
    """``optimize_graph``'s placement of ``item`` at ``calls`` and its speed-up (cached)."""
    key = hashlib.sha256(f"{item.name}|{calls}".encode()).hexdigest()[:24]
    path = cache_root("distill-targets") / f"{key}.npz"
    try:
        z = read_npz(path)
        return z["placement"], float(z["speedup"])
    except (OSError, ValueError, KeyError):
        pass
    result = optimize_graph(item.sg.graph, item.sg.cluster, calls=calls, seed=0)
    placement = np.asarray(result.decision.placement, dtype=np.int64)
    speedup = result.speedup_over(item.reference_time)
    write_npz(path, {"placement": placement, "speedup": np.array(speedup)})
    return placement, speedup


def off_anchor(item: Item, placement: np.ndarray) -> tuple[float, float]:
    """Share of ``placement``'s decisions (steps with a choice) off the anchor's device, and the
    share of those on the lowest-EFT device, replayed by the step-wise decoder."""
    episode = decode(item.sg, "given", given=placement)
    chosen = episode.feats[np.arange(len(episode.ops)), episode.actions]
    choice = episode.masks.sum(axis=1) >= 2
    off = choice & (chosen[:, SCHEDULE_FEATURES.index("anchor")] < 0.5)
    on_min = chosen[:, SCHEDULE_FEATURES.index("is_min_eft")] > 0.5
    share = float(off.sum() / max(choice.sum(), 1))
    return share, float(on_min[off].mean()) if off.any() else float("nan")


def leave_probability(policy: StepPolicy, item: Item) -> np.ndarray:
    """Per op, the policy's probability of a device other than the anchor's, on the anchor's
    own trajectory (0 where there is no choice)."""
    episode = decode(item.sg, "anchor")
    with torch.no_grad():
        pre = policy.embed(item.observation)
        logits = policy.logits(
            pre[torch.from_numpy(episode.ops)],
            torch.from_numpy(episode.feats),
            torch.from_numpy(episode.masks),
        )
        stay = torch.softmax(logits, dim=1)[torch.arange(len(episode.ops)), episode.actions]
    weights = np.zeros(item.sg.num_ops)
    weights[episode.ops] = 1.0 - stay.numpy()
    return weights


def guided_search(item: Item, calls: int, seed: int, weights: np.ndarray | None) -> float:
    """Speed-up of the decoder search from zero outputs at ``calls``; with ``weights``, half of
    its window moves centred on an op drawn in proportion to them (module docstring, 4)."""
    graph, cluster, sim = item.sg.graph, item.sg.cluster, Simulator()
    anchor = Decision(placement=item.sg.anchor.copy()).filled(graph.num_ops)
    names = channels("placement", cluster.num_devices)
    gate = names.index("gate")
    devices = [c for c, name in enumerate(names) if name.startswith("affinity:")]
    n = graph.num_ops
    longest = max(1, int(WINDOW * n))

    def evaluate(outputs):
        placed = decode_outputs("placement", graph, cluster, outputs, anchor, "", PLACEMENT_DECODER)
        decision = Decision(placed.placement, anchor.priority, anchor.fusion)
        return decision, sim.evaluate(graph, cluster, decision)

    def move(current, rng):
        if weights is None or rng.random() >= P_WINDOW or rng.random() < 0.5:
            return window_move(current, rng, gate, devices, [], longest, 1.0)
        cand = current.copy()
        centre = min(int(np.searchsorted(cdf, rng.random())), n - 1)
        length = int(rng.integers(1, longest + 1))
        ops = np.arange(max(0, centre - length // 2), min(n, max(0, centre - length // 2) + length))
        cand[gate, ops] = 1.0
        cand[np.ix_(np.asarray(devices), ops)] = 0.0
        cand[devices[int(rng.integers(0, len(devices)))], ops] = rng.normal(0.0, 3.0)
        return cand

    cdf = np.cumsum(weights / max(weights.sum(), 1e-12)) if weights is not None else None
    result = decoder_search(
        evaluate, np.zeros((len(names), n)), calls, seed=seed, gate_channel=gate, move=move
    )
    return item.reference_time / result.measurement.step_time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", type=int, default=96)
    ap.add_argument("--max-ops", type=int, default=1200)
    ap.add_argument("--calls", type=int, default=512)
    ap.add_argument("--updates", type=int, default=60)
    ap.add_argument("--anchor-weight", type=float, default=3.0)
    ap.add_argument("--encoder", default="go", choices=("go", "mlp"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--guided-search", type=int, default=0, metavar="C")
    ap.add_argument("--learning-rate", type=float, default=3e-4)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--positions", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    items, test_items = bench_items(args.train, args.max_ops)
    start = time.perf_counter()
    speedups, shares, mins = [], [], []
    for item in items:
        placement, speedup = search_target(item, args.calls)
        speedups.append(speedup)
        if speedup > 1.0:
            item.target, item.target_return = placement.copy(), float(np.log(speedup))
            share, on_min = off_anchor(item, placement)
            shares.append(share)
            mins.append(on_min)
    print(
        f"targets: {len(items)} graphs, optimize@{args.calls} {geomean(np.array(speedups)):.3f}x "
        f"geomean ({time.perf_counter() - start:.0f} s); off the heuristic's device: "
        f"{np.mean(shares):.0%} of the decisions, {np.nanmean(mins):.0%} of those the "
        "lowest-EFT device",
        flush=True,
    )
    config = StepTrainConfig(
        updates=0,
        imitation_updates=args.updates,
        graphs_per_update=8,
        samples_per_graph=8,
        eval_every=10**6,
        threads=1,
        seed=args.seed,
        learning_rate=args.learning_rate,
        epochs=args.epochs,
        policy={
            "encoder": args.encoder,
            "anchor_weight": args.anchor_weight,
            "positions": args.positions,
        },
    )
    start = time.perf_counter()
    policy, rows = train(items, [], config)
    steps = [r for r in rows if "imitation/accuracy" in r]
    accuracy = np.mean([r["imitation/accuracy"] for r in steps[-10:]])
    print(
        f"imitation: {args.updates} updates, {time.perf_counter() - start:.0f} s; accuracy "
        f"(last 10 updates) {accuracy:.0%}"
    )
    for name, group in (("training graphs", items), ("family-test (<= 1,400 ops)", test_items)):
        s = greedy_speedups(policy, group)
        print(
            f"greedy on {name}: {geomean(s):.3f}x geomean, min {s.min():.3f}x; above the "
            f"heuristic {(s > 1.001).sum()}, below {(s < 0.999).sum()} of {len(s)}"
        )
    if args.guided_search:
        plain, guided = [], []
        for item in test_items:
            weights = leave_probability(policy, item)
            plain.append(
                np.mean([guided_search(item, args.guided_search, s, None) for s in (0, 1)])
            )
            guided.append(
                np.mean([guided_search(item, args.guided_search, s, weights) for s in (0, 1)])
            )
        diff = np.array(guided) - np.array(plain)
        print(
            f"decoder search @{args.guided_search} (mean of seeds 0, 1) on family-test: uniform "
            f"windows {geomean(np.array(plain)):.3f}x, policy-guided {geomean(np.array(guided)):.3f}x;"
            f" guided ahead on {(diff > 1e-3).sum()}, behind on {(diff < -1e-3).sum()} of {len(diff)}"
        )


if __name__ == "__main__":
    main()
