from __future__ import annotations

import bisect
import dataclasses

import numpy as np
import pytest

from graphopt.baselines._costs import link_arrays, op_times
from graphopt.baselines.heft import (
    DEFAULT_MAX_GAPS,
    heft,
    heft_contention,
    list_inputs,
    upward_rank,
)
from graphopt.decoders.placement import (
    AFFINITY_UNIT,
    SHIFT_UNIT,
    PlacementInputs,
    colocation_groups,
    decode_placement,
)
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, get_cluster
from graphopt.workloads import resolve_graphs


# ---------------------------------------------------------------------------------- readable twin
def decode_reference(
    graph: CompGraph,
    cluster: Cluster,
    inputs: PlacementInputs,
    contention: bool,
    memory: bool,
    colocation: bool,
) -> list[int]:
    """The decoder's rules in plain Python: take the ready op of highest shifted rank (ties by
    index), keep it on its anchor unless released, else score every allowed device by
    ``EFT - affinity`` with HEFT's bounded insertion search."""
    n, num_dev = graph.num_ops, cluster.num_devices
    comp = op_times(graph, cluster).tolist()
    latency, bandwidth = (a.tolist() for a in link_arrays(cluster))
    rank = upward_rank(graph, cluster).tolist()
    scale = max(rank) if n else 0.0
    shift = [0.0] * n if inputs.shift is None else list(inputs.shift)
    key = [rank[i] + shift[i] * SHIFT_UNIT * scale for i in range(n)]
    affinity = np.zeros((n, num_dev)) if inputs.affinity is None else inputs.affinity
    bias = [[affinity[i][d] * AFFINITY_UNIT * scale for d in range(num_dev)] for i in range(n)]
    anchored = inputs.anchor is not None
    free = [not anchored or (inputs.gate is not None and inputs.gate[i] > 0) for i in range(n)]
    group = colocation_groups(graph)[0].tolist() if colocation else [-1] * n
    group_dev: dict[int, int] = {}
    params = graph.param_bytes.tolist()
    resident = [0.0] * num_dev
    pred: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for s, d, b in sorted(
        zip(
            graph.edge_src.tolist(), graph.edge_dst.tolist(), graph.edge_bytes.tolist(), strict=True
        )
    ):
        pred[d].append((s, b))
    waiting = [len(p) for p in pred]
    succ: list[list[int]] = [[] for _ in range(n)]
    for s, d in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(), strict=True):
        succ[s].append(d)
    ready_ops = [i for i in range(n) if waiting[i] == 0]
    busy: list[list[tuple[float, float]]] = [[] for _ in range(num_dev)]
    proc, finish = [-1] * n, [0.0] * n
    link_free = {(q, p): 0.0 for q in range(num_dev) for p in range(num_dev)}
    sent: dict[tuple[int, int], float] = {}

    def data_ready(v: int, p: int, book: bool) -> float:
        queue = {q: link_free[q, p] for q in range(num_dev)}
        ready = 0.0
        for u, data in pred[v]:
            q, arrival = proc[u], finish[u]
            if q != p:
                cost = latency[q][p] + data / bandwidth[q][p]
                if not contention:
                    arrival += cost
                elif (u, p) in sent:
                    arrival = sent[u, p]
                else:
                    arrival = max(arrival, queue[q]) + cost
                    queue[q] = arrival
                    if book:
                        sent[u, p] = arrival
            ready = max(ready, arrival)
        if book:
            link_free.update({(q, p): t for q, t in queue.items()})
        return ready

    def slot(p: int, ready: float, w: float) -> tuple[float, int]:
        starts = [s for s, _ in busy[p]]
        j = bisect.bisect_left(starts, ready)
        for k in range(j, min(len(starts), j + DEFAULT_MAX_GAPS)):
            begin = max(ready, busy[p][k - 1][1]) if k > 0 else ready
            if begin + w <= starts[k]:
                return begin, k
        return (max(ready, busy[p][-1][1]) if busy[p] else ready), len(starts)

    while ready_ops:
        v = min(ready_ops, key=lambda i: (-key[i], i))
        ready_ops.remove(v)
        if not free[v]:
            devices = [int(inputs.anchor[v])]  # type: ignore[index]
        elif group[v] >= 0 and group[v] in group_dev:
            devices = [group_dev[group[v]]]
        else:
            mem = [d.memory for d in cluster.devices]
            devices = [
                p for p in range(num_dev) if not memory or resident[p] + params[v] <= mem[p]
            ] or [int(np.argmin(resident))]
        best = None
        for p in devices:
            begin, k = slot(p, data_ready(v, p, book=False), comp[v][p])
            score = begin + comp[v][p] - bias[v][p]
            if best is None or score < best[0]:
                best = (score, p, begin, k)
        assert best is not None
        _, p, begin, k = best
        if contention:
            data_ready(v, p, book=True)
        busy[p].insert(k, (begin, begin + comp[v][p]))
        proc[v], finish[v] = p, begin + comp[v][p]
        resident[p] += params[v]
        if group[v] >= 0:
            group_dev.setdefault(group[v], p)
        for w in succ[v]:
            waiting[w] -= 1
            if waiting[w] == 0:
                ready_ops.append(w)
    return proc


def graphs() -> list[CompGraph]:
    return resolve_graphs("suite:tiny")


@pytest.mark.parametrize("contention", [False, True])
def test_zero_inputs_reproduce_heft_exactly(contention):
    for graph in graphs():
        for preset in ("v100-nvlink-2", "v100-pcie-4", "hetero-cpu-2gpu"):
            cluster = get_cluster(preset)
            expected = (heft_contention if contention else heft)(graph, cluster)
            got = decode_placement(graph, cluster, contention=contention)
            np.testing.assert_array_equal(got, expected)
            zeros = PlacementInputs(
                shift=np.zeros(graph.num_ops),
                affinity=np.zeros((graph.num_ops, cluster.num_devices)),
            )
            got = decode_placement(graph, cluster, zeros, contention=contention)
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    "options",
    [
        {"route": "via-host", "host": "cpu0"},
        {"send": "per-consumer"},
        {"contention": "none"},
        {"route": "via-host", "host": "cpu0", "send": "per-consumer", "contention": "none"},
    ],
)
def test_zero_inputs_reproduce_heft_lc_under_every_link_option(options):
    """The decoder prices transfers under the cluster's link model as ``heft-lc`` does, so with
    zero inputs it is ``heft-lc`` under any option, not the default model's schedule."""
    cluster = dataclasses.replace(get_cluster("hetero-cpu-2gpu"), **options)
    differs = 0
    for graph in graphs():
        expected = heft_contention(graph, cluster)
        np.testing.assert_array_equal(decode_placement(graph, cluster, contention=True), expected)
        default = heft_contention(graph, get_cluster("hetero-cpu-2gpu"))
        differs += int(not np.array_equal(expected, default))
    assert differs > 0  # the option changes heft-lc's placement of some graph


def test_zero_gates_reproduce_the_anchor_whatever_the_other_inputs():
    rng = np.random.default_rng(0)
    cluster = get_cluster("v100-nvlink-4")
    for graph in graphs():
        n = graph.num_ops
        anchor = rng.integers(0, 4, n)
        inputs = PlacementInputs(
            shift=rng.normal(size=n),
            affinity=rng.normal(size=(n, 4)),
            gate=-np.abs(rng.normal(size=n)),
            anchor=anchor,
        )
        np.testing.assert_array_equal(decode_placement(graph, cluster, inputs), anchor)


@pytest.mark.parametrize("contention", [False, True])
@pytest.mark.parametrize("memory", [False, True])
def test_fast_decoder_agrees_with_readable_twin(contention, memory):
    rng = np.random.default_rng(1)
    for k, graph in enumerate(graphs()):
        cluster = get_cluster(("v100-nvlink-2", "v100-pcie-4", "hetero-cpu-2gpu")[k % 3])
        n, d = graph.num_ops, cluster.num_devices
        anchored = k % 2 == 0
        inputs = PlacementInputs(
            shift=rng.normal(size=n) * 2,
            affinity=rng.normal(size=(n, d)) * 3,
            gate=rng.normal(size=n) if anchored else None,
            anchor=rng.integers(0, d, n) if anchored else None,
        )
        colocation = k % 3 == 1
        fast = decode_placement(
            graph, cluster, inputs, contention=contention, memory=memory, colocation=colocation
        )
        twin = decode_reference(graph, cluster, inputs, contention, memory, colocation)
        assert fast.tolist() == twin


def test_affinity_and_release_move_ops():
    graph = resolve_graphs("gnmt-tiny")[0]
    cluster = get_cluster("v100-nvlink-4")
    n = graph.num_ops
    pull = np.full((n, 4), -1e3)
    pull[:, 2] = 1e3  # an overwhelming affinity for device 2
    placed = decode_placement(graph, cluster, PlacementInputs(affinity=np.clip(pull, -8, 8) * 1e3))
    assert (placed == 2).all()
    anchor = np.zeros(n, dtype=np.int64)
    gate = np.full(n, -1.0)
    gate[:5] = 1.0
    released = decode_placement(
        graph, cluster, PlacementInputs(affinity=pull, gate=gate, anchor=anchor)
    )
    assert (released[5:] == 0).all() and (released[:5] == 2).all()


def test_colocation_keeps_groups_together():
    graph = resolve_graphs("gnmt-tiny")[0]
    cluster = get_cluster("v100-nvlink-4")
    placed = decode_placement(graph, cluster, colocation=True)
    group, count = colocation_groups(graph)
    assert count > 0
    for g in range(count):
        assert len(set(placed[group == g].tolist())) == 1


def test_given_groups_and_prologue_decode_as_colocation_and_a_fresh_prologue_do():
    graph = resolve_graphs("gnmt-tiny")[0]
    cluster = get_cluster("v100-nvlink-4")
    rng = np.random.default_rng(5)
    n = graph.num_ops
    inputs = PlacementInputs(
        shift=rng.normal(size=n), gate=rng.normal(size=n), anchor=rng.integers(0, 4, n)
    )
    by_flag = decode_placement(graph, cluster, inputs, contention=True, colocation=True)
    given = decode_placement(
        graph,
        cluster,
        inputs,
        contention=True,
        groups=colocation_groups(graph),
        prologue=list_inputs(graph, cluster),
    )
    np.testing.assert_array_equal(given, by_flag)
    with pytest.raises(ValueError, match="give groups or colocation=True, not both"):
        decode_placement(graph, cluster, groups=colocation_groups(graph), colocation=True)
    with pytest.raises(ValueError, match="groups must be"):
        decode_placement(graph, cluster, groups=(np.full(n, 3, dtype=np.int64), 2))


@pytest.mark.parametrize(
    ("inputs", "match"),
    [
        (PlacementInputs(shift=np.zeros(3)), "shift has shape"),
        (PlacementInputs(affinity=np.zeros((5, 4))), "affinity has shape"),
        (PlacementInputs(anchor=np.full(227, 9)), "anchor must be"),
    ],
)
def test_bad_inputs_are_explained(inputs, match):
    graph = resolve_graphs("txl-tiny")[0]
    with pytest.raises(ValueError, match=match):
        decode_placement(graph, get_cluster("v100-nvlink-4"), inputs)


def test_non_finite_input_names_the_op():
    graph = resolve_graphs("txl-tiny")[0]
    shift = np.zeros(graph.num_ops)
    shift[7] = np.nan
    with pytest.raises(ValueError, match=f"op {graph.op_names[7]!r} \\(index 7\\)"):
        decode_placement(graph, get_cluster("v100-nvlink-4"), PlacementInputs(shift=shift))


def test_decode_is_deterministic():
    graph = resolve_graphs("wavenet-tiny")[0]
    cluster = get_cluster("v100-nvlink-4")
    rng = np.random.default_rng(3)
    inputs = PlacementInputs(shift=rng.normal(size=graph.num_ops))
    first = decode_placement(graph, cluster, inputs)
    np.testing.assert_array_equal(first, decode_placement(graph, cluster, inputs))


def test_with_no_room_anywhere_an_op_goes_to_the_least_loaded_device_as_in_the_twin():
    graph = resolve_graphs("txl-tiny")[0]
    data = get_cluster("v100-nvlink-4").to_dict()
    for device in data["devices"]:
        device["memory"] = float(graph.param_bytes.sum()) / 8  # every device fills up early
    cluster = Cluster.from_dict(data)
    rng = np.random.default_rng(5)
    inputs = PlacementInputs(shift=rng.normal(size=graph.num_ops))
    fast = decode_placement(graph, cluster, inputs, memory=True)
    assert fast.tolist() == decode_reference(graph, cluster, inputs, False, True, False)
    assert len(set(fast.tolist())) == 4  # the overflow is spread by resident parameters
