"""Does a learned model of one-op moves pay inside search? The moves' gains on the exact state
(the event-driven decoder's features, ``bench_event_labels.py``'s labels) fitted on training
graphs, then used zero-shot to order a first-improvement search on unseen graphs.

Usage: python bench/bench_event_moves.py [--train SPEC] [--graphs SPEC] [--cluster C]
       [--max-ops N] [--ops K] [--calls C] [--hidden H] [--clip R] [--seed S]

Training: on each graph of ``--train`` (at most ``N`` ops), ``K`` decisions of the anchor's
decode (the best heuristic's placement) are sampled and every other allowed device is priced by
the simulator with the rest of the placement unchanged; a head (``--hidden`` units) is fitted so
that its score of a device less the op's own predicts the move's gain (percent, clipped to
``+-R``: ``bench_event_labels.fit_gain``).

Search, on each graph of ``--graphs``, from the best heuristic's placement, ``C`` simulator
calls: every move (op, allowed device other than its own) of the anchor's decode is tried in
turn and kept when the step time falls (first improvement); the order is the model's predicted
gain (**learned**) or a random permutation (**random**: what the model must beat). For
reference, ``graphopt.optimize`` (the decoder search) at the same calls. Speed-ups over each
graph's best heuristic, geometric means; "kept": moves that improved among those tried.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from graphopt.decoders.event_step import EventHead, decode_events
from graphopt.train.step_run import resolve_clusters, resolve_run_graphs

sys.path.insert(0, str(Path(__file__).parent))
from bench_event_labels import fit_gain, labels  # noqa: E402
from bench_event_scorer import EventCase, rule  # noqa: E402
from bench_stepwise_scorer import geomean  # noqa: E402


def predicted_gains(head: EventHead, feats: np.ndarray, own: np.ndarray) -> np.ndarray:
    """``(K, D)``: the head's score of each device less the op's own device's."""
    th, wf, b1, w2 = head.arrays()
    score = feats @ th + np.maximum(feats @ wf + b1, 0) @ w2
    return score - score[np.arange(len(own)), own][:, None]


def first_improvement(case: EventCase, start: np.ndarray, moves, calls: int) -> tuple:
    """Try the moves ``(op, device)`` in order from ``start`` for at most ``calls`` simulator
    calls, keeping each that lowers the step time; returns the speed-up and the moves kept."""
    placement, best, kept, used = start.copy(), case.ref_time, 0, 0
    for v, d in moves:
        if used >= calls:
            break
        if placement[v] == d:
            continue
        trial = placement.copy()
        trial[v] = d
        result = case.prepared.evaluate_batch(trial[None])
        used += 1
        if result.valid[0] and float(result.step_time[0]) < best:
            best, placement, kept = float(result.step_time[0]), trial, kept + 1
    return case.ref_time / best, kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", default="suite:train-gen-small")
    ap.add_argument("--graphs", default="suite:family-test")
    ap.add_argument("--cluster", default="v100-nvlink-4")
    ap.add_argument("--max-ops", type=int, default=1400)
    ap.add_argument("--ops", type=int, default=256, help="labelled decisions per training graph")
    ap.add_argument("--calls", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--clip", type=float, default=2.0)
    ap.add_argument("--epochs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-optimize", action="store_true", help="skip the decoder-search column")
    args = ap.parse_args()
    (cluster,) = resolve_clusters(args.cluster)
    tests = [
        EventCase(g, cluster) for g in resolve_run_graphs(args.graphs) if g.num_ops <= args.max_ops
    ]
    seen = {c.graph.fingerprint for c in tests}
    train = [
        EventCase(g, cluster)
        for g in resolve_run_graphs(args.train)
        if g.num_ops <= args.max_ops and g.fingerprint not in seen
    ]
    rng = np.random.default_rng(args.seed)
    anchor = EventHead.linear(rule(anchor=4.0))
    began = time.perf_counter()
    pool = [labels(case, anchor, args.ops, 1e-3, rng) for case in train]
    feats, masks, own, gain = (np.concatenate([p[i] for p in pool]) for i in (0, 1, 4, 5))
    head = fit_gain(feats, masks, own, gain, anchor, args.clip, 0.0, args.hidden, args.epochs, 0)
    ok = np.isfinite(gain) & masks
    ok[np.arange(len(own)), own] = False
    pred = predicted_gains(head, feats, own)
    print(
        f"{len(train)} training graphs, {ok.sum():,} moves priced ({(gain[ok] > 0).mean():.1%} "
        f"gain), fitted in {time.perf_counter() - began:.0f} s; on them the top 10% of "
        f"predictions gain on {(gain[ok][pred[ok] >= np.quantile(pred[ok], 0.9)] > 0).mean():.1%}"
    )
    print(f"{len(tests)} graphs of {args.graphs}, {args.calls} simulator calls each")
    print("| graph | ops | moves | learned | kept | random | kept | optimize |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    found: dict[str, list[float]] = {"learned": [], "random": [], "optimize": []}
    for case in tests:
        episode = decode_events(case.eg, anchor, record=True)
        own_t = episode.placement[episode.ops]
        gains = predicted_gains(head, episode.feats, own_t)
        allowed = episode.masks.copy()
        allowed[np.arange(len(own_t)), own_t] = False
        k, d = np.nonzero(allowed)
        moves = np.stack([episode.ops[k], d], axis=1)
        learned = first_improvement(
            case, episode.placement, moves[np.argsort(-gains[k, d], kind="stable")], args.calls
        )
        shuffled = first_improvement(
            case, episode.placement, moves[rng.permutation(len(moves))], args.calls
        )
        found["learned"].append(learned[0])
        found["random"].append(shuffled[0])
        opt = "-"
        if not args.no_optimize:
            from graphopt import optimize

            _, m = optimize(case.graph, cluster, calls=args.calls, seed=args.seed)
            found["optimize"].append(case.ref_time / m.step_time)
            opt = f"{found['optimize'][-1]:.3f}x"
        print(
            f"| {case.graph.name} | {case.graph.num_ops:,} | {len(moves):,} | {learned[0]:.3f}x | "
            f"{learned[1]} | {shuffled[0]:.3f}x | {shuffled[1]} | {opt} |",
            flush=True,
        )
    row = " | ".join(f"{geomean(v):.4f}x" if v else "-" for v in found.values())
    print(f"geometric means (learned | random | optimize): {row}")
    wins = sum(a > b + 1e-9 for a, b in zip(found["learned"], found["random"], strict=True))
    print(f"learned ahead of random on {wins} of {len(tests)}")


if __name__ == "__main__":
    main()
