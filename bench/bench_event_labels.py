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
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from graphopt.decoders.event_step import ANCHOR, EventHead, decode_events
from graphopt.sim.simulator import PreparedGraph
from graphopt.train.step_run import resolve_clusters, resolve_run_graphs

sys.path.insert(0, str(Path(__file__).parent))
from bench_event_scorer import EventCase, rule  # noqa: E402
from bench_stepwise_scorer import geomean  # noqa: E402

L2 = 0.01


def flip_labels(
    prepared: PreparedGraph, placement: np.ndarray, vs: np.ndarray, masks: np.ndarray, margin: float
) -> tuple[np.ndarray, float, np.ndarray]:
    """For each op of ``vs``, the allowed device (``masks`` ``(K, D)``) of the fastest placement
    that moves that op alone, when it beats ``placement`` by more than ``margin``, else the op's
    own device; ``placement``'s step time; and every move's gain ``(K, D)``, ``100 log(t / t_d)``
    (0 on the op's own device, ``-inf`` where not allowed or invalid)."""
    rows, where = [], []
    for i, v in enumerate(vs):
        for d in np.flatnonzero(masks[i]):
            if d != placement[v]:
                p = placement.copy()
                p[v] = d
                rows.append(p)
                where.append((i, d))
    result = prepared.evaluate_batch(np.stack([placement, *rows]))
    times = np.where(result.valid, np.asarray(result.step_time), np.inf)
    best = np.full(masks.shape, np.inf)
    for (i, d), t in zip(where, times[1:], strict=True):
        best[i, d] = t
    label = placement[vs].copy()
    best[np.arange(len(vs)), label] = times[0]
    for i in range(len(vs)):
        d = int(best[i].argmin())
        if best[i, d] < times[0] * (1 - margin):
            label[i] = d
    with np.errstate(divide="ignore"):
        gain = 100 * np.log(times[0] / best)
    return label, float(times[0]), gain


def labels(case: EventCase, head: EventHead, count: int, margin: float, rng) -> tuple:
    """``(feats (K, D, F), masks (K, D), label (K,))`` at ``count`` decisions of ``head``'s
    decode on ``case``, the decode's speed-up, its own devices there ``(K,)`` and the moves'
    gains ``(K, D)`` (:func:`flip_labels`)."""
    episode = decode_events(case.eg, head, record=True)
    choice = np.flatnonzero(episode.masks.sum(axis=1) >= 2)
    steps = np.sort(rng.choice(choice, min(count, len(choice)), replace=False))
    vs = episode.ops[steps]
    label, step_time, gain = flip_labels(
        case.prepared, episode.placement, vs, episode.masks[steps], margin
    )
    own = episode.placement[vs]
    return episode.feats[steps], episode.masks[steps], label, case.ref_time / step_time, own, gain


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


def perturbed_agreement(case: EventCase, cluster, spread: float, count: int, rng) -> tuple:
    """One-flip labels of the anchor's placement for ``count`` ops on ``case``'s cluster and on a
    copy whose every link bandwidth is scaled by ``1 + spread * N(0, 1)`` (the same ops, the same
    placement): the ops labelled away from the anchor on the original, how many of them the copy
    labels with the same device, and how many ops the copy labels away."""
    bandwidth = cluster.bandwidth * (1 + spread * rng.standard_normal(cluster.bandwidth.shape))
    twin = dataclasses.replace(cluster, name=f"{cluster.name}-perturbed", bandwidth=bandwidth)
    episode = decode_events(case.eg, theta=rule(anchor=1.0), record=True)
    choice = np.flatnonzero(episode.masks.sum(axis=1) >= 2)
    steps = np.sort(rng.choice(choice, min(count, len(choice)), replace=False))
    vs, masks = episode.ops[steps], episode.masks[steps]
    lab, _, _ = flip_labels(case.prepared, episode.placement, vs, masks, 1e-3)
    lab2, _, _ = flip_labels(PreparedGraph(case.graph, twin), episode.placement, vs, masks, 1e-3)
    own = episode.placement[vs]
    away = lab != own
    return away.sum(), (lab2[away] == lab[away]).sum(), (lab2 != own).sum()


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


def fit_mlp(
    feats: np.ndarray,
    masks: np.ndarray,
    label: np.ndarray,
    head: EventHead,
    weight: np.ndarray,
    hidden: int,
    epochs: int,
    seed: int,
) -> EventHead:
    """The same loss for the head with a hidden layer of ``hidden`` units (Adam, full batch),
    from ``head`` (its linear part; a fresh hidden layer if it has none)."""
    import torch

    torch.set_num_threads(2)
    gen = torch.Generator().manual_seed(seed)
    x = torch.as_tensor(feats, dtype=torch.float32)
    m = torch.as_tensor(masks)
    y = torch.as_tensor(label)
    wt = torch.as_tensor(weight / weight.mean(), dtype=torch.float32)
    theta = torch.tensor(head.theta, dtype=torch.float32, requires_grad=True)
    if head.b1.shape[0] == hidden:
        w_feat = torch.tensor(head.w_feat, dtype=torch.float32, requires_grad=True)
        b1 = torch.tensor(head.b1, dtype=torch.float32, requires_grad=True)
        w2 = torch.tensor(head.w2, dtype=torch.float32, requires_grad=True)
    else:
        f = feats.shape[-1]
        w_feat = (torch.randn(f, hidden, generator=gen) / f**0.5).requires_grad_()
        b1 = torch.zeros(hidden, requires_grad=True)
        w2 = (torch.randn(hidden, generator=gen) * 0.01).requires_grad_()
    params = [theta, w_feat, b1, w2]
    opt = torch.optim.Adam(params, lr=3e-3)
    for _ in range(epochs):
        score = x @ theta + torch.relu(x @ w_feat + b1) @ w2
        score = score.masked_fill(~m, -1e9)
        nll = torch.nn.functional.cross_entropy(score, y, reduction="none")
        loss = (wt * nll).mean() + L2 * sum((p * p).sum() for p in params)
        opt.zero_grad()
        loss.backward()
        opt.step()
    out = [p.detach().double().numpy() for p in params]
    return EventHead(*out)


def fit_gain(
    feats: np.ndarray,
    masks: np.ndarray,
    own: np.ndarray,
    gain: np.ndarray,
    head: EventHead,
    clip: float,
    balance: float,
    hidden: int,
    epochs: int,
    seed: int,
) -> EventHead:
    """The head (its hidden layer of ``hidden`` units, fresh, with its linear part) whose score
    of each allowed device less the op's own device's predicts that move's gain (percent,
    clipped to ``+-clip``; squared error, moves that gain weighted to ``balance`` of the rest's
    total when ``balance > 0``; Adam, full batch): a one-step value of each move, so the greedy
    decode leaves a device only where the move is predicted to pay."""
    import torch

    torch.set_num_threads(2)
    gen = torch.Generator().manual_seed(seed)
    x = torch.as_tensor(feats, dtype=torch.float32)
    rows = torch.arange(len(own))
    ok = np.isfinite(gain) & masks
    ok[np.arange(len(own)), own] = False
    target = torch.as_tensor(np.clip(np.where(ok, gain, 0.0), -clip, clip), dtype=torch.float32)
    m = torch.as_tensor(ok)
    good = m & (target > 0)
    wt = torch.ones_like(target)
    if balance > 0 and good.any():
        wt = torch.where(good, balance * (m & ~good).sum() / good.sum(), wt)
    wt = wt * m
    f = feats.shape[-1]
    theta = torch.zeros(f, requires_grad=True)
    w_feat = (torch.randn(f, max(hidden, 1), generator=gen) / f**0.5).requires_grad_()
    b1 = torch.zeros(max(hidden, 1), requires_grad=True)
    w2 = (torch.randn(max(hidden, 1), generator=gen) * 0.01).requires_grad_()
    params = [theta, w_feat, b1, w2] if hidden else [theta]
    opt = torch.optim.Adam(params, lr=3e-3)
    for _ in range(epochs):
        score = x @ theta
        if hidden:
            score = score + torch.relu(x @ w_feat + b1) @ w2
        diff = score - score[rows, torch.as_tensor(own)][:, None]
        loss = (wt * (diff - target) ** 2).sum() / wt.sum() + L2 * sum(
            (p * p).sum() for p in params
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    if not hidden:
        return EventHead.linear(theta.detach().double().numpy())
    return EventHead(*(p.detach().double().numpy() for p in params))


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
        "--perturb",
        type=float,
        default=0.0,
        help="instead: label agreement with a copy of the cluster, bandwidths scaled by 1 + P N(0,1)",
    )
    ap.add_argument("--hidden", type=int, default=0, help="hidden units of the head (0: linear)")
    ap.add_argument(
        "--regress",
        type=float,
        default=0.0,
        help="instead of the labels: fit the head's score differences to the moves' gains, in "
        "percent, clipped to +-R (0: labels)",
    )
    ap.add_argument("--epochs", type=int, default=300, help="Adam steps a round (--hidden)")
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
    if args.perturb:
        print("| graph | away from the anchor | same device on the copy | away on the copy |")
        print("| --- | ---: | ---: | ---: |")
        sums = np.zeros(3)
        for case in tests:
            counts = np.array(perturbed_agreement(case, cluster, args.perturb, args.ops, rng))
            sums += counts
            print(f"| {case.graph.name} | {counts[0]} | {counts[1]} | {counts[2]} |", flush=True)
        print(
            f"| all | {sums[0]:.0f} | {sums[1]:.0f} ({sums[1] / max(sums[0], 1):.0%}) | "
            f"{sums[2]:.0f} |"
        )
        return
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
    head = EventHead.linear(rule(anchor=4.0))
    pool_f, pool_m, pool_l, pool_o, pool_g = [], [], [], [], []
    for r in range(args.rounds + 1):
        began = time.perf_counter()
        zero = np.array([c.speedup_of(head) for c in tests])
        if r == args.rounds:
            print(f"final rule's zero-shot: {geomean(zero):.4f}x")
            for bonus in (0.25, 0.5, 1.0, 2.0):  # a margin the head must beat the anchor by
                theta = head.theta.copy()
                theta[ANCHOR] += bonus
                safer = dataclasses.replace(head, theta=theta)
                z = np.array([c.speedup_of(safer) for c in tests])
                print(
                    f"with the anchor's weight + {bonus}: {geomean(z):.4f}x (above the heuristic "
                    f"on {(z > 1.001).sum()}, below 0.99x on {(z < 0.99).sum()}, min {z.min():.3f}x)"
                )
            break
        speed = []
        for case in train:
            f, m, lab, s, own, gain = labels(case, head, args.ops, args.margin, rng)
            pool_f.append(f)
            pool_m.append(m)
            pool_l.append(lab)
            pool_o.append(own)
            pool_g.append(gain)
            speed.append(s)
        feats, masks, label = np.concatenate(pool_f), np.concatenate(pool_m), np.concatenate(pool_l)
        anchor_dev = feats[..., ANCHOR].argmax(axis=1)
        away = label != anchor_dev
        weight = np.ones(len(label))
        if args.balance > 0:
            weight = np.where(away, args.balance * (~away).sum() / max(away.sum(), 1), 1.0)
        if args.regress:
            own, gain = np.concatenate(pool_o), np.concatenate(pool_g)
            head = fit_gain(
                feats,
                masks,
                own,
                gain,
                head,
                args.regress,
                args.balance,
                args.hidden,
                args.epochs,
                args.seed,
            )
        elif args.hidden:
            head = fit_mlp(feats, masks, label, head, weight, args.hidden, args.epochs, args.seed)
        else:
            head = EventHead.linear(fit(feats, masks, label, head.theta, weight))
        th, wf, b1, w2 = head.arrays()
        score = np.where(masks, feats @ th + np.maximum(feats @ wf + b1, 0) @ w2, -np.inf)
        agree = (score.argmax(axis=1) == label).mean()
        agree_away = (score.argmax(axis=1) == label)[away].mean() if away.any() else 0.0
        print(
            f"| {r} | {len(label):,} | {away.mean():.1%} | {geomean(speed):.4f}x | "
            f"{agree:.1%} ({agree_away:.1%} of those away) | {geomean(zero):.4f}x | "
            f"{(zero > 1.001).sum()} / {(zero < 0.99).sum()} | {time.perf_counter() - began:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
