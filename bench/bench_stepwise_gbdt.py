"""Are the search's departures from the heuristic predictable from the step-wise decoder's
features, and does following a predictor of them pay? A diagnostic with gradient-boosted trees
(LightGBM) in place of the policy's head.

Usage: python bench/bench_stepwise_gbdt.py [--train N] [--max-ops M] [--calls K]
       [--thresholds T1,T2,...] [--release]

The targets are ``bench/bench_stepwise_distill.py``'s (``optimize_graph(calls=K)``'s placements of
``N`` ``suite:train-gen`` graphs, cached on disk), and the test set its 28 family-test graphs
with their own targets at ``K`` calls.

1. Each target is replayed by the step-wise decoder (mode ``given``: teacher forcing). At every
   step with a choice, the row holds the features of the anchor's device and of the lowest-EFT
   device, whether they are one device, the spread of the devices' loads, the number of allowed
   devices, and two features of persistence: the share of the op's inputs placed off their
   anchor device and whether the previous step left its anchor. Label: the target leaves the
   anchor here. A classifier of that label (300 trees) is scored by its AUC on the test graphs'
   own rows, with and without the persistence features.
2. A second model ranks the other devices (label: the target's device). Decoding greedily, each
   step leaves the anchor for the best-ranked other device when the first model's probability
   is above a threshold: the speed-up of that decode over the best heuristic on the test graphs.
3. With ``--release``: whether *where* the search releases ops is enough, decoded by the
   placement decoder (which re-places every released op by its list scheduler against the rest):
   the decoder search at 256 calls (seed 0) as it ends; its gate channel alone (its device
   affinities zeroed); the ops where the target leaves the anchor released; the ops where the
   first model (without persistence, on the anchor's own trajectory) says the search leaves it,
   above each threshold, released.
"""

from __future__ import annotations

import argparse
import time

import lightgbm as lgb
import numpy as np
import torch
from bench_stepwise_distill import bench_items, search_target

from graphopt.decoders.decision import decode as decode_outputs
from graphopt.decoders.search import PLACEMENT_DECODER, search_placements
from graphopt.decoders.stepwise import (
    NUM_FEATURES,
    SCHEDULE_FEATURES,
    candidates,
    commit,
    decode,
    new_state,
    next_op,
)
from graphopt.sim import Simulator
from graphopt.train.stepwise import Item, geomean
from graphopt.typing import Decision

ANCHOR = SCHEDULE_FEATURES.index("anchor")
MIN_EFT = SCHEDULE_FEATURES.index("is_min_eft")
LOAD = SCHEDULE_FEATURES.index("load")
PARAMS = {"objective": "binary", "learning_rate": 0.05, "num_leaves": 63, "verbose": -1}


def step_row(feat: np.ndarray, mask: np.ndarray, a: int, persistence: tuple[float, float]):
    """The step's features (module docstring, 1)."""
    e = int(np.argmax(feat[:, MIN_EFT]))
    return np.concatenate(
        [feat[a], feat[e], [float(a == e), feat[:, LOAD].std(), mask.sum()], persistence]
    )


def device_row(feat: np.ndarray, mask: np.ndarray, d: int, a: int, persistence):
    """The features of moving the step's op to device ``d`` instead of the anchor ``a``."""
    return np.concatenate([feat[d], feat[a], [mask.sum()], persistence])


def inputs_off(item: Item, placement: np.ndarray, v: int) -> float:
    """Share of ``v``'s inputs placed off their anchor device in ``placement``."""
    ptr, src = item.sg.arrays[3], item.sg.arrays[4]
    preds = src[ptr[v] : ptr[v + 1]]
    return float((placement[preds] != item.sg.anchor[preds]).mean()) if len(preds) else 0.0


def teacher_rows(item: Item, target: np.ndarray):
    """Rows of both models along the target's own trajectory."""
    episode = decode(item.sg, "given", given=target)
    steps, leaves, devices, labels = [], [], [], []
    previous = 0.0
    for k, v in enumerate(episode.ops):
        feat, mask = episode.feats[k], episode.masks[k]
        a = int(item.sg.anchor[v])
        if mask.sum() >= 2:
            persistence = (inputs_off(item, target, v), previous)
            steps.append(step_row(feat, mask, a, persistence))
            leaves.append(float(target[v] != a))
            for d in np.flatnonzero(mask):
                if d != a:
                    devices.append(device_row(feat, mask, d, a, persistence))
                    labels.append(float(target[v] == d))
        previous = float(target[v] != item.sg.anchor[v])
    return steps, leaves, devices, labels


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (the rank-sum formula)."""
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels.sum()
    neg = len(labels) - pos
    return float((ranks[labels == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def follow(item: Item, leave: lgb.Booster, rank: lgb.Booster, threshold: float) -> float:
    """Speed-up of the greedy decode that leaves the anchor where ``leave`` says so (module
    docstring, 2)."""
    g = item.sg.arrays
    st = new_state(g)
    n, num_dev = item.sg.num_ops, item.sg.num_devices
    feat = np.zeros((num_dev, NUM_FEATURES), np.float32)
    mask = np.zeros(num_dev, np.bool_)
    placement = np.full(n, -1, dtype=np.int64)
    previous = 0.0
    for _ in range(n):
        v = next_op(st)
        candidates(v, g, st, feat, mask)
        a = int(item.sg.anchor[v])
        mask[a] = True
        d = a
        if mask.sum() >= 2:
            persistence = (inputs_off(item, placement, v), previous)
            if leave.predict(step_row(feat, mask, a, persistence)[None])[0] > threshold:
                others = [q for q in np.flatnonzero(mask) if q != a]
                rows = np.array([device_row(feat, mask, q, a, persistence) for q in others])
                d = int(others[int(np.argmax(rank.predict(rows)))])
        commit(v, d, g, st)
        placement[v] = d
        previous = float(d != a)
    m = item.prepared.evaluate_batch(placement[None, :])
    return item.reference_time / m.step_time[0] if m.valid[0] else 0.0


def released(item: Item, gates: np.ndarray, sim: Simulator) -> float:
    """Speed-up of the placement decoder's decision with ``gates`` (+1 released, -1 anchored)
    and no affinity: the released ops re-placed by its list scheduler."""
    graph, cluster = item.sg.graph, item.sg.cluster
    anchor = Decision(placement=item.sg.anchor.copy()).filled(graph.num_ops)
    outputs = np.zeros((2 + cluster.num_devices, graph.num_ops))
    outputs[1] = gates
    placed = decode_outputs("placement", graph, cluster, outputs, anchor, "", PLACEMENT_DECODER)
    m = sim.evaluate(graph, cluster, Decision(placed.placement, anchor.priority, anchor.fusion))
    return item.reference_time / m.step_time if m.valid else 0.0


def release_sets(items, calls: int, model: lgb.Booster, thresholds: list[float]) -> None:
    """Part 3 of the module docstring, printed."""
    sim = Simulator()
    names = ["search@256", "its gates alone", "target's departures"]
    names += [f"predicted above {t}" for t in thresholds]
    columns: dict[str, list[float]] = {name: [] for name in names}
    for item in items:
        graph, anchor = item.sg.graph, item.sg.anchor
        result = search_placements(graph, item.sg.cluster, Decision(placement=anchor.copy()), 256)
        columns["search@256"].append(item.reference_time / result.measurement.step_time)
        columns["its gates alone"].append(released(item, result.outputs[1], sim))
        target, _ = search_target(item, calls)
        columns["target's departures"].append(
            released(item, np.where(target != anchor, 1.0, -1.0), sim)
        )
        episode = decode(item.sg, "anchor")
        steps = [(k, v) for k, v in enumerate(episode.ops) if episode.masks[k].sum() >= 2]
        p = np.zeros(graph.num_ops)
        if steps:
            rows = [
                step_row(episode.feats[k], episode.masks[k], int(anchor[v]), (0.0, 0.0))[:-2]
                for k, v in steps
            ]
            p[[v for _, v in steps]] = model.predict(np.array(rows))
        for t in thresholds:
            columns[f"predicted above {t}"].append(released(item, np.where(p > t, 1.0, -1.0), sim))
    for name, values in columns.items():
        v = np.array(values)
        print(
            f"released: {name}: {geomean(np.maximum(v, 1e-9)):.3f}x, above the heuristic "
            f"{(v > 1.001).sum()}, below {(v < 0.999).sum()} of {len(v)}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", type=int, default=96)
    ap.add_argument("--max-ops", type=int, default=1200)
    ap.add_argument("--calls", type=int, default=512)
    ap.add_argument("--thresholds", default="0.5,0.7,0.9")
    ap.add_argument("--release", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    train_items, test_items = bench_items(args.train, args.max_ops)
    start = time.perf_counter()
    sets = []
    for items in (train_items, test_items):
        rows: tuple[list, list, list, list] = ([], [], [], [])
        for item in items:
            target, speedup = search_target(item, args.calls)
            if speedup > 1.0:
                for acc, part in zip(rows, teacher_rows(item, target), strict=True):
                    acc.extend(part)
        sets.append([np.asarray(r) for r in rows])
    (xs, ys, xd, yd), (ts, us, _, _) = sets
    print(
        f"rows: {len(ys):,} training steps ({ys.mean():.0%} leave the anchor), {len(us):,} test "
        f"steps ({us.mean():.0%}); {time.perf_counter() - start:.0f} s"
    )
    leave = lgb.train(PARAMS, lgb.Dataset(xs, ys), 300)
    without = lgb.train(PARAMS, lgb.Dataset(xs[:, :-2], ys), 300)
    print(
        f"test AUC of 'the search leaves the anchor here': {auc(us, without.predict(ts[:, :-2])):.3f}"
        f" (schedule features), {auc(us, leave.predict(ts)):.3f} (+ persistence, teacher-forced)"
    )
    thresholds = [float(t) for t in args.thresholds.split(",")]
    if args.release:
        release_sets(test_items, args.calls, without, thresholds)
        return
    rank = lgb.train(PARAMS, lgb.Dataset(xd, yd), 300)
    for threshold in thresholds:
        s = np.array([follow(item, leave, rank, threshold) for item in test_items])
        print(
            f"decode leaving the anchor above p = {threshold}: family-test {geomean(s):.3f}x "
            f"geomean, min {s.min():.3f}x; above the heuristic {(s > 1.001).sum()}, below "
            f"{(s < 0.999).sum()} of {len(s)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
