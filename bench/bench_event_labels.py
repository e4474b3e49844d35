"""Imitating the rollout algorithm's labels on an exact state: the event-driven decoder's
features, one-flip labels priced by the simulator, a conditional-logit rule fitted by DAgger.

Usage: python bench/bench_event_labels.py [--train SPEC] [--graphs SPEC] [--cluster C]
       [--max-ops N] [--ops K] [--rounds R] [--margin M] [--seed S]

On each training graph (``--train``, at most ``N`` ops), the current rule's decode
(``graphopt.decoders.event_step``; first the anchor's rule, i.e. the best heuristic's placement)
records every decision's features. For ``K`` sampled decisions, every other allowed device is
tried on the decoded placement with the rest unchanged, each priced by the simulator: the label
is the fastest device if it beats the placement by more than ``M`` (relative), else the
placement's own. Labels from all rounds so far are pooled and a linear rule ``theta`` fitted as
a conditional logit (the device's probability ``exp(theta . feat[d])`` over the allowed devices;
L-BFGS, L2 0.01); the next round decodes with it (DAgger). After each round the rule is decoded
once on every graph of ``--graphs`` (zero-shot). ``--ceiling``: instead, what following the
labels exactly gives on each graph of ``--graphs`` (:func:`rollout`), the most a rule that
learnt them perfectly could give. Speed-ups over each graph's best heuristic,
geometric means.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from graphopt.decoders.event_step import ANCHOR, NUM_EVENT_FEATURES, decode_events
from graphopt.train.step_run import resolve_clusters, resolve_run_graphs

sys.path.insert(0, str(Path(__file__).parent))
from bench_event_scorer import EventCase, rule  # noqa: E402
from bench_stepwise_scorer import geomean  # noqa: E402

L2 = 0.01


def labels(case: EventCase, theta: np.ndarray, count: int, margin: float, rng) -> tuple:
    """``(feats (K, D, F), masks (K, D), label (K,))`` at ``count`` decisions of ``theta``'s
    decode on ``case``, and the decode's speed-up."""
    episode = decode_events(case.eg, theta=theta, record=True)
    n = case.graph.num_ops
    choice = np.flatnonzero(episode.masks.sum(axis=1) >= 2)
    steps = np.sort(rng.choice(choice, min(count, len(choice)), replace=False))
    num_dev = episode.masks.shape[1]
    rows, where = [], []
    for k in steps:
        v = episode.ops[k]
        for d in np.flatnonzero(episode.masks[k]):
            if d != episode.placement[v]:
                p = episode.placement.copy()
                p[v] = d
                rows.append(p)
                where.append((k, d))
    result = case.prepared.evaluate_batch(np.stack([episode.placement, *rows]))
    times = np.where(result.valid, np.asarray(result.step_time), np.inf)
    best = np.full((len(steps), num_dev), np.inf)
    index = {k: i for i, k in enumerate(steps)}
    for (k, d), t in zip(where, times[1:], strict=True):
        best[index[k], d] = t
    own = episode.placement[episode.ops[steps]]
    label = own.copy()
    for i in range(len(steps)):
        d = int(best[i].argmin())
        if best[i, d] < times[0] * (1 - margin):
            label[i] = d
    return episode.feats[steps], episode.masks[steps], label, case.ref_time / times[0], n


def rollout(case: EventCase) -> tuple[float, int]:
    """The labels followed exactly: every decision of the anchor's decode, in its order, takes
    the device of the fastest placement among "this op on each allowed device, the ops before it
    as chosen so far, the ops after it on the anchor's devices" (one pass of coordinate descent,
    never slower than the anchor); returns its speed-up and simulator calls."""
    episode = decode_events(case.eg, theta=rule(anchor=1.0), record=True)
    placement = episode.placement.copy()
    best_time = case.ref_time
    calls = 0
    for k, v in enumerate(episode.ops):
        others = [d for d in np.flatnonzero(episode.masks[k]) if d != placement[v]]
        if not others:
            continue
        rows = np.repeat(placement[None], len(others), axis=0)
        rows[np.arange(len(others)), v] = others
        result = case.prepared.evaluate_batch(rows)
        times = np.where(result.valid, np.asarray(result.step_time), np.inf)
        calls += len(others)
        i = int(times.argmin())
        if times[i] < best_time:
            best_time, placement[v] = float(times[i]), others[i]
    return case.ref_time / best_time, calls


def fit(
    feats: np.ndarray, masks: np.ndarray, label: np.ndarray, theta0: np.ndarray, weight: np.ndarray
) -> np.ndarray:
    """The conditional-logit weights (module docstring), each label weighted by ``weight``."""
    weight = weight / weight.mean()

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        score = feats @ theta
        score = np.where(masks, score, -np.inf)
        top = score.max(axis=1, keepdims=True)
        e = np.where(masks, np.exp(score - top), 0.0)
        z = e.sum(axis=1, keepdims=True)
        p = e / z
        rows = np.arange(len(label))
        nll = -(weight * (score[rows, label] - top[:, 0] - np.log(z[:, 0]))).mean()
        grad = -(weight[:, None] * (feats[rows, label] - (p[..., None] * feats).sum(axis=1))).mean(
            axis=0
        )
        return nll + L2 * float(theta @ theta), grad + 2 * L2 * theta

    return minimize(loss, theta0, jac=True, method="L-BFGS-B").x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", default="suite:train-gen-small")
    ap.add_argument("--graphs", default="suite:family-test")
    ap.add_argument("--cluster", default="v100-nvlink-4")
    ap.add_argument("--max-ops", type=int, default=1400)
    ap.add_argument("--ops", type=int, default=128, help="labelled decisions per graph a round")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--margin", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--balance",
        type=float,
        default=0.0,
        help="labels away from the anchor weighted to this share of the anchor's (0: unweighted)",
    )
    ap.add_argument(
        "--ceiling",
        action="store_true",
        help="instead: the labels followed exactly on each graph of --graphs (no learning)",
    )
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
    if args.ceiling:
        print("| graph | ops | labels followed exactly | simulator calls | s |")
        print("| --- | ---: | ---: | ---: | ---: |")
        found = []
        for case in tests:
            began = time.perf_counter()
            speedup, calls = rollout(case)
            found.append(speedup)
            print(
                f"| {case.graph.name} | {case.graph.num_ops:,} | {speedup:.3f}x | {calls:,} | "
                f"{time.perf_counter() - began:.0f} |",
                flush=True,
            )
        print(f"| geometric mean | | {geomean(found):.3f}x | | |")
        return
    print(f"{len(train)} training graphs of {args.train}, {len(tests)} of {args.graphs}")
    print(
        "| round | labels | away from the anchor | train: the round's rule | fitted rule agrees | zero-shot: the round's rule | above / below 0.99x | s |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    theta = rule(anchor=4.0)
    pool_f, pool_m, pool_l = [], [], []
    for r in range(args.rounds + 1):
        began = time.perf_counter()
        zero = np.concatenate([c.speedups(theta[None]) for c in tests])
        if r == args.rounds:
            print(f"final rule {np.round(theta, 3).tolist()}: zero-shot {geomean(zero):.4f}x")
            break
        speed = []
        for case in train:
            f, m, lab, s, _ = labels(case, theta, args.ops, args.margin, rng)
            pool_f.append(f)
            pool_m.append(m)
            pool_l.append(lab)
            speed.append(s)
        feats, masks, label = np.concatenate(pool_f), np.concatenate(pool_m), np.concatenate(pool_l)
        anchor_dev = feats[..., ANCHOR].argmax(axis=1)
        away = label != anchor_dev
        weight = np.where(
            away & (args.balance > 0), args.balance * (~away).sum() / max(away.sum(), 1), 1.0
        )
        theta = fit(feats, masks, label, theta, weight)
        score = np.where(masks, feats @ theta, -np.inf)
        agree = (score.argmax(axis=1) == label).mean()
        print(
            f"| {r} | {len(label):,} | {(label != anchor_dev).mean():.1%} | {geomean(speed):.4f}x | "
            f"{agree:.1%} | {geomean(zero):.4f}x | {(zero > 1.001).sum()} / "
            f"{(zero < 0.99).sum()} | {time.perf_counter() - began:.0f} |",
            flush=True,
        )
    assert theta.shape == (NUM_EVENT_FEATURES,)


if __name__ == "__main__":
    main()
