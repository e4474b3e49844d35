from __future__ import annotations

import bisect
import math

import numpy as np
import pytest

from graphopt.baselines._costs import link_arrays, op_times
from graphopt.baselines.heft import heft_contention, upward_rank
from graphopt.baselines.placement import PLACERS
from graphopt.decoders.stepwise import (
    ANCHOR_FEATURE,
    NUM_FEATURES,
    SCHEDULE_FEATURES,
    HeadParams,
    decode,
    lookahead,
    step_graph,
)
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, get_cluster
from graphopt.workloads import get_graph


# ---------------------------------------------------------------------------------- readable twin
def symlog(x: float) -> float:
    return math.copysign(math.log1p(10.0 * abs(x)), x)


def twin(
    graph: CompGraph, cluster: Cluster, anchor: np.ndarray, head: HeadParams, uniforms: np.ndarray
) -> tuple[list[int], list[list[list[float]]]]:
    """The step-wise decoder's rules in plain Python (memory that never runs out, no
    constraints, link contention on): the ready op of highest upward rank (ties: lower index), every device's
    features as the module docstring defines them, the head's softmax sampled by inverse CDF.
    Returns the placement and each step's features."""
    n, num_dev = graph.num_ops, cluster.num_devices
    comp = op_times(graph, cluster).tolist()
    latency, bandwidth = (a.tolist() for a in link_arrays(cluster))
    rank = upward_rank(graph, cluster).tolist()
    w_mean = [sum(row) / num_dev for row in comp]
    scale = max(rank)
    pred: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for s, d, b in sorted(
        zip(
            graph.edge_src.tolist(), graph.edge_dst.tolist(), graph.edge_bytes.tolist(), strict=True
        )
    ):
        pred[d].append((s, b))
    succ: list[list[int]] = [[] for _ in range(n)]
    for s, d in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(), strict=True):
        succ[s].append(d)
    waiting = [len(p) for p in pred]
    ready_ops = {i for i in range(n) if waiting[i] == 0}
    placement = [-1] * n
    finish = [0.0] * n
    intervals: list[list[tuple[float, float]]] = [[] for _ in range(num_dev)]
    link_free = [[0.0] * num_dev for _ in range(num_dev)]
    copies: dict[tuple[int, int], float] = {}
    busy = [0.0] * num_dev
    memory = [d.memory for d in cluster.devices]
    params = graph.param_bytes.tolist()
    resident = [0.0] * num_dev
    makespan = 0.0
    steps: list[list[list[float]]] = []

    def arrival(v: int, p: int, commit: bool) -> float:
        free = [link_free[q][p] for q in range(num_dev)]
        ready = 0.0
        for u, b in pred[v]:
            q = placement[u]
            t = finish[u]
            if q != p:
                if (u, p) in copies:
                    t = copies[(u, p)]
                else:
                    t = max(t, free[q]) + (latency[q][p] + b / bandwidth[q][p])
                    free[q] = t
                    if commit:
                        copies[(u, p)] = t
            ready = max(ready, t)
        if commit:
            for q in range(num_dev):
                link_free[q][p] = free[q]
        return ready

    def slot(p: int, ready: float, duration: float) -> float:
        busy_p = intervals[p]
        j = bisect.bisect_left([s for s, _ in busy_p], ready)
        for k in range(j, min(len(busy_p), j + 256)):
            begin = max(ready, busy_p[k - 1][1]) if k > 0 else ready
            if begin + duration <= busy_p[k][0]:
                return begin
        return max(ready, busy_p[-1][1]) if busy_p else ready

    for step in range(n):
        v = min(ready_ops, key=lambda i: (-rank[i], i))
        ready_ops.remove(v)
        ready = [arrival(v, p, False) for p in range(num_dev)]
        est = [slot(p, ready[p], comp[v][p]) for p in range(num_dev)]
        eft = [est[p] + comp[v][p] for p in range(num_dev)]
        bound = [max(makespan, eft[p] + rank[v] - w_mean[v]) for p in range(num_dev)]
        in_bytes = sum(b for _, b in pred[v])
        best = min(range(num_dev), key=lambda p: (eft[p], p))
        mean_busy = sum(busy) / num_dev
        k = 100.0 / scale
        fastest = max(
            bandwidth[p][q]
            for p in range(num_dev)
            for q in range(num_dev)
            if p != q and bandwidth[p][q] < math.inf
        )
        feats = []
        for p in range(num_dev):
            others = [q for q in range(num_dev) if q != p]
            work = sum(busy[q] for q in others)
            reach = sum(busy[q] * bandwidth[p][q] for q in others)
            near = math.log2(max(reach / (work * fastest), 2.0**-10)) if work > 0 else 0.0
            moved = sum(b for u, b in pred[v] if placement[u] != p and (u, p) not in copies)
            feats.append(
                [
                    symlog((est[p] - min(est)) * k),
                    symlog((eft[p] - min(eft)) * k),
                    symlog((ready[p] - min(ready)) * k),
                    symlog((bound[p] - min(bound)) * k),
                    symlog(max(0.0, eft[p] - makespan) * k),
                    symlog((eft[p] - eft[anchor[v]]) * k),
                    math.log2(comp[v][p] / min(comp[v])),
                    moved / in_bytes if in_bytes > 0 else 0.0,
                    max(-1.0, (memory[p] - resident[p] - params[v]) / memory[p]),
                    symlog((busy[p] - mean_busy) * k),
                    rank[v] / scale,
                    step / n,
                    float(p == best),
                    float(p == anchor[v]),
                    near,
                ]
            )
        steps.append(feats)
        logits = []
        for p in range(num_dev):
            hidden = head.pre[v] + np.asarray(feats[p]) @ head.w_feat + head.b1
            bonus = head.anchor_weight * float(p == anchor[v])
            logits.append(float(np.maximum(hidden, 0.0) @ head.w2 + head.b2) + bonus)
        top = max(logits)
        weights = [math.exp(x - top) for x in logits]
        target, acc, p = uniforms[step] * sum(weights), 0.0, num_dev - 1
        for q in range(num_dev):
            acc += weights[q]
            if acc > target:
                p = q
                break
        arrival(v, p, True)
        placement[v] = p
        finish[v] = est[p] + comp[v][p]
        bisect.insort(intervals[p], (est[p], finish[v]))
        busy[p] += comp[v][p]
        resident[p] += params[v]
        makespan = max(makespan, finish[v])
        for w in succ[v]:
            waiting[w] -= 1
            if waiting[w] == 0:
                ready_ops.add(w)
    return placement, steps


def random_head(n: int, rng: np.random.Generator, hidden: int = 5) -> HeadParams:
    return HeadParams(
        rng.normal(size=(n, hidden)),
        rng.normal(size=(NUM_FEATURES, hidden)),
        rng.normal(size=hidden),
        rng.normal(size=hidden),
        0.3,
        1.5,
    )


class SeqRng:
    """A stand-in Generator whose ``random(n)`` returns fixed uniforms."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def random(self, n: int) -> np.ndarray:
        return self.values[:n]


# ---------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("name", ["gnmt-tiny", "random-sp-100-s0", "random-layered-100-s0"])
def test_sampled_episode_matches_twin(name: str) -> None:
    graph, cluster = get_graph(name), get_cluster("v100-nvlink-4")
    rng = np.random.default_rng(1)
    anchor = PLACERS["metis"](graph, cluster)
    head = random_head(graph.num_ops, rng)
    uniforms = rng.random(graph.num_ops)
    ep = decode(step_graph(graph, cluster, anchor), "sample", head, rng=SeqRng(uniforms))  # type: ignore[arg-type]
    placement, steps = twin(graph, cluster, anchor, head, uniforms)
    assert ep.placement.tolist() == placement
    assert ep.feats.shape == (graph.num_ops, cluster.num_devices, len(SCHEDULE_FEATURES))
    np.testing.assert_allclose(ep.feats, np.asarray(steps, dtype=np.float32), rtol=1e-5, atol=1e-5)
    assert ep.masks.all()


@pytest.mark.parametrize("placer", ["metis", "m-etf", "split", "round-robin"])
def test_anchor_mode_returns_the_anchor(placer: str) -> None:
    graph, cluster = get_graph("txl-tiny"), get_cluster("v100-nvlink-4")
    anchor = PLACERS[placer](graph, cluster)
    ep = decode(step_graph(graph, cluster, anchor), "anchor")
    assert (ep.placement == anchor).all()
    # the anchor feature marks exactly the anchor's device at every step
    assert (ep.feats[:, :, ANCHOR_FEATURE].argmax(axis=1) == anchor[ep.ops]).all()
    assert (ep.feats[:, :, ANCHOR_FEATURE].sum(axis=1) == 1).all()


def test_min_eft_head_is_heft_lc() -> None:
    """A head that scores the ``is_min_eft`` feature picks HEFT's device: the contention-aware
    HEFT placement exactly."""
    graph, cluster = get_graph("gnmt-tiny"), get_cluster("v100-nvlink-4")
    n = graph.num_ops
    w_feat = np.zeros((NUM_FEATURES, 1))
    w_feat[SCHEDULE_FEATURES.index("is_min_eft"), 0] = 1.0
    head = HeadParams(np.zeros((n, 1)), w_feat, np.zeros(1), np.ones(1), 0.0)
    ep = decode(step_graph(graph, cluster), "greedy", head)
    assert (ep.placement == heft_contention(graph, cluster)).all()
    assert ep.makespan > 0


def test_linear_head_scores_theta_dot_features() -> None:
    """``HeadParams.linear``: greedy picks, at every step, the allowed device of highest
    ``theta . feat``; a unit weight on ``anchor`` decodes the anchor."""
    graph, cluster = get_graph("gnmt-tiny"), get_cluster("v100-nvlink-4")
    anchor = PLACERS["metis"](graph, cluster)
    sg = step_graph(graph, cluster, anchor)
    theta = np.random.default_rng(3).normal(size=NUM_FEATURES)
    ep = decode(sg, "greedy", HeadParams.linear(theta, graph.num_ops))
    scores = np.where(ep.masks, ep.feats.astype(np.float64) @ theta, -np.inf)
    np.testing.assert_array_equal(ep.actions, scores.argmax(axis=1))
    unit = np.eye(NUM_FEATURES)[ANCHOR_FEATURE]
    assert (decode(sg, "greedy", HeadParams.linear(unit, graph.num_ops)).placement == anchor).all()
    with pytest.raises(ValueError, match="weights"):
        HeadParams.linear(np.ones(3), graph.num_ops)


def test_near_tells_idle_devices_apart_by_their_links_to_the_work() -> None:
    """``near``: with work only on GPU 0 of the DGX-1 quad, GPU 3 (two NVLinks to GPU 0) is at
    the fastest link (0), GPUs 1 and 2 (one NVLink) at half of it (-1); GPU 0 itself has no
    work elsewhere (0). On all-PCIe GPUs every device is at 0."""
    graph = get_graph("random-layered-100-s0")
    near = SCHEDULE_FEATURES.index("near")
    for preset, expected in (("v100-nvlink-4", [0.0, -1.0, -1.0, 0.0]), ("v100-pcie-4", [0.0] * 4)):
        cluster = get_cluster(preset)
        ep = decode(step_graph(graph, cluster), "given", given=np.zeros(graph.num_ops, np.int64))
        np.testing.assert_allclose(ep.feats[5, :, near], expected)


def test_given_mode_replays_a_placement_and_orders_topologically() -> None:
    graph, cluster = get_graph("random-layered-100-s0"), get_cluster("v100-nvlink-4")
    given = np.random.default_rng(0).integers(0, cluster.num_devices, graph.num_ops)
    ep = decode(step_graph(graph, cluster), "given", given=given)
    assert (ep.placement == given).all()
    position = np.empty(graph.num_ops, dtype=np.int64)
    position[ep.ops] = np.arange(graph.num_ops)
    assert (position[graph.edge_src] < position[graph.edge_dst]).all()


def test_memory_mask_keeps_parameters_within_memory() -> None:
    graph = get_graph("rnnlm-tiny")
    cluster = get_cluster("v100-nvlink-4")
    params = float(graph.param_bytes.sum())
    data = cluster.to_dict()
    for device in data["devices"]:
        device["memory"] = params / 3  # every device holds a third of the parameters
    small = Cluster.from_dict(data)
    head = HeadParams.zeros(graph.num_ops)  # greedy: lowest allowed device
    ep = decode(step_graph(graph, small), "greedy", head)
    resident = np.bincount(ep.placement, weights=graph.param_bytes, minlength=4)
    assert (resident <= params / 3 + graph.param_bytes.max()).all()
    assert not ep.masks.all()  # some device was refused


def test_bad_inputs() -> None:
    graph, cluster = get_graph("txl-tiny"), get_cluster("v100-nvlink-4")
    sg = step_graph(graph, cluster)
    with pytest.raises(ValueError, match="unknown decode mode"):
        decode(sg, "best")
    with pytest.raises(ValueError, match="needs rng"):
        decode(sg, "sample")
    with pytest.raises(ValueError, match="anchor must be"):
        step_graph(graph, cluster, np.full(graph.num_ops, 9))
    with pytest.raises(ValueError, match="head has pre"):
        decode(sg, "greedy", HeadParams.zeros(graph.num_ops + 1))


@pytest.mark.parametrize(
    ("preset", "named"),
    [("doppler-4", "contention: none, send: per-consumer"), ("accel-host", "route: via-host")],
)
def test_a_link_model_it_does_not_price_is_refused(preset: str, named: str) -> None:
    graph = get_graph("txl-tiny")
    with pytest.raises(ValueError, match=f"cannot price {named} of cluster '{preset}'"):
        step_graph(graph, get_cluster(preset))
    step_graph(graph, get_cluster(preset), contention=False)  # no queue: every edge pays its cost


def head_argmax(head: HeadParams, op: int, feat: np.ndarray, mask: np.ndarray) -> int:
    """The head's greedy device, written out in numpy (ties: the lower device)."""
    hidden = np.maximum(head.pre[op] + feat.astype(np.float64) @ head.w_feat + head.b1, 0.0)
    logits = hidden @ head.w2 + head.b2 + head.anchor_weight * feat[:, ANCHOR_FEATURE]
    logits = np.where(mask, logits, -np.inf)
    return int(np.argmax(logits))


def test_lookahead_branches_are_forced_then_greedy_episodes() -> None:
    """Each branch places the step's op on its device, keeps every earlier step, then follows the
    head's argmax; its makespan is the replayed placement's; the branch of the episode's own
    device is the episode."""
    graph, cluster = get_graph("random-sp-100-s0"), get_cluster("v100-nvlink-4")
    rng = np.random.default_rng(3)
    sg = step_graph(graph, cluster, PLACERS["metis"](graph, cluster))
    head = random_head(graph.num_ops, rng)
    episode = decode(sg, "greedy", head)
    steps = np.array([0, 7, 40, graph.num_ops - 1])
    makespans, branches = lookahead(sg, head, episode.actions, steps)
    assert makespans.shape == (4, cluster.num_devices)
    for j, k in enumerate(steps):
        own = episode.actions[k]
        assert makespans[j, own] == pytest.approx(episode.makespan)
        assert (branches[j, own] == episode.placement).all()
        for d in range(cluster.num_devices):
            branch = branches[j, d]
            replay = decode(sg, "given", given=branch)
            assert replay.makespan == pytest.approx(makespans[j, d])
            assert (replay.ops == episode.ops).all()  # the order does not depend on devices
            assert (branch[episode.ops[:k]] == episode.placement[episode.ops[:k]]).all()
            assert branch[episode.ops[k]] == d
            for later in range(k + 1, graph.num_ops):
                op = replay.ops[later]
                expected = head_argmax(head, op, replay.feats[later], replay.masks[later])
                assert replay.actions[later] == expected


def test_lookahead_marks_barred_devices_and_checks_steps() -> None:
    graph, cluster = get_graph("txl-tiny"), get_cluster("v100-nvlink-4")
    data = cluster.to_dict()
    for device in data["devices"]:
        device["memory"] = float(graph.param_bytes.sum()) / 3
    sg = step_graph(graph, Cluster.from_dict(data))
    head = HeadParams.zeros(graph.num_ops)
    episode = decode(sg, "greedy", head)
    barred = np.flatnonzero(~episode.masks.all(axis=1))
    assert len(barred)
    makespans, branches = lookahead(sg, head, episode.actions, barred[:3])
    for j, k in enumerate(barred[:3]):
        off = ~episode.masks[k]
        assert np.isinf(makespans[j, off]).all() and (branches[j, off] == -1).all()
        assert np.isfinite(makespans[j, ~off]).all()
    with pytest.raises(ValueError, match="increasing"):
        lookahead(sg, head, episode.actions, np.array([5, 2]))
    with pytest.raises(ValueError, match="increasing"):
        lookahead(sg, head, episode.actions, np.array([graph.num_ops]))
