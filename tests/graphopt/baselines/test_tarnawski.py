from __future__ import annotations

import numpy as np
import pytest
from cachetools import LRUCache
from helpers_baselines import (
    chain_of,
    line_cluster,
    random_cluster,
    small_random_graphs,
    training_graph,
)

from graphopt.baselines.contiguous import build_chain
from graphopt.baselines.tarnawski import (
    _accelerators,
    fill,
    interval_transfers,
    latency_greedy,
    max_load_dp,
)
from graphopt.graph import CompGraph, Op
from graphopt.hardware import Cluster, Device

ACC = 1e12  # FLOP/s of an accelerator: an op of 1e12 FLOPs takes 1 s


def cpu_and_two_accelerators(memory: float) -> Cluster:
    """A slow CPU (device 0, all the memory) and two accelerators of ``memory`` bytes."""
    devices = (
        Device("cpu", "CPU", ACC / 10, 1e12, 1e12, 0.0),
        Device("a0", "acc", ACC, 1e12, memory, 0.0),
        Device("a1", "acc", ACC, 1e12, memory, 0.0),
    )
    return Cluster("cpu+2", devices, np.full((3, 3), 1e9), np.zeros((3, 3)))


def line(params: list[float], edges: bool = True) -> CompGraph:
    ops = [Op(f"o{i}", "X", flops=1e12, param_bytes=p) for i, p in enumerate(params)]
    links = [(f"o{i}", f"o{i + 1}", 1.0) for i in range(len(params) - 1)] if edges else []
    return CompGraph.build("line", ops, links)


def fill_of(graph: CompGraph, memory: float) -> list[int]:
    c = cpu_and_two_accelerators(memory)
    chain = build_chain(graph, c)
    order, cpu = _accelerators(c)
    assert (order.tolist(), cpu) == ([1, 2], 0)
    capacity = np.full(2, memory)
    return fill(chain, chain.params, order, capacity, cpu).tolist()


def test_memory_fill_is_the_papers_greedy():
    # Ops of 4 bytes, accelerators of 10: two ops fit each, the fifth spills to the CPU.
    assert fill_of(line([4, 4, 4, 4, 4]), 10.0) == [1, 1, 2, 2, 0]
    # A block too large for an empty accelerator goes to the CPU without using one up.
    assert fill_of(line([4, 4, 12, 4, 4]), 10.0) == [1, 1, 0, 2, 2]


def test_latency_greedy_is_the_papers_member_alone():
    c = cpu_and_two_accelerators(1e9)
    # Everything fits the first accelerator: the paper's greedy puts it all there, never on the
    # slow CPU, and does not spread independent ops (which the simulator would prefer).
    assert latency_greedy(line([0] * 5), c).tolist() == [1] * 5
    assert latency_greedy(line([0] * 4, edges=False), c).tolist() == [1] * 4
    # Blocks of 4 bytes on accelerators of 10: two per accelerator, the rest on the CPU.
    assert latency_greedy(line([4] * 5), cpu_and_two_accelerators(10.0)).tolist() == [
        1,
        1,
        2,
        2,
        0,
    ]


def test_latency_greedy_fills_blocks_in_topological_order():
    # w and y share a colour class, tying an early weight to a late consumer: {w, x, y} is one
    # block of 12 bytes, z another of 4. On accelerators of 12 bytes: the block on the first,
    # z on the second; never x apart from w and y.
    ops = [
        Op("w", "X", flops=1e12, param_bytes=4, colocation="A"),
        Op("x", "X", flops=1e12, param_bytes=4),
        Op("y", "X", flops=1e12, param_bytes=4, colocation="A"),
        Op("z", "X", flops=1e12, param_bytes=4),
    ]
    edges = [("w", "x", 1.0), ("x", "y", 1.0), ("y", "z", 1.0)]
    g = CompGraph.build("tied", ops, edges)
    assert latency_greedy(g, cpu_and_two_accelerators(12.0)).tolist() == [1, 1, 1, 2]
    # On accelerators of 10 bytes the block fits none: it goes to the CPU, z to an accelerator.
    assert latency_greedy(g, cpu_and_two_accelerators(10.0)).tolist() == [0, 0, 0, 1]


def test_interval_transfers_by_hand():
    # Group edges 0 -> 2 (5 bytes), 1 -> 2 (2), 2 -> 0 (6), each costing its bytes.
    chain = build_chain(training_graph(), line_cluster(1e12))
    table = interval_transfers(chain, chain.edge_bytes)
    assert table[0, 1] == 11.0  # group 0: out 5, in 6
    assert table[1, 2] == 2.0
    assert table[2, 3] == 13.0
    assert table[0, 2] == 11.0 + 2.0  # groups 0-1: 0 -> 2, 1 -> 2, 2 -> 0
    assert table[1, 3] == 11.0  # groups 1-2: 0 -> 2, 2 -> 0
    assert table[0, 3] == 0.0


@pytest.mark.parametrize(
    ("nbytes", "expected"),
    [
        # Edge cost 0.5 s (1 byte/s, no latency): 3 + 0.5 | 0.5 + 3 = 3.5 beats one stage (6) and
        # the cut after o1 (2.5 | 4.5).
        (0.5, [0, 0, 0, 1]),
        # Edge cost 4 s: the best cut costs 3 + 4 = 7 > 6, so one stage.
        (4.0, [0, 0, 0, 0]),
    ],
)
def test_max_load_dp_by_hand(nbytes, expected):
    assert max_load_dp(chain_of(nbytes), line_cluster(1e12, 1e12)).tolist() == expected


def test_max_load_dp_keeps_each_pairs_result_and_refusal(monkeypatch):
    import graphopt.baselines.tarnawski as tarnawski

    runs = []
    dp = tarnawski._max_load_dp
    monkeypatch.setattr(tarnawski, "_max_load_dp", lambda g, c: runs.append(g.name) or dp(g, c))
    monkeypatch.setattr(tarnawski, "_DP_CACHE", LRUCache(maxsize=tarnawski._DP_CACHE_SIZE))
    cluster = line_cluster(1e12, 1e12)
    first = max_load_dp(chain_of(0.5), cluster)
    first[:] = 3  # the caller's copy: the kept result is not changed
    assert max_load_dp(chain_of(0.5), cluster).tolist() == [0, 0, 0, 1] and len(runs) == 1
    assert max_load_dp(chain_of(4.0), cluster).tolist() == [0, 0, 0, 0] and len(runs) == 2
    small = line_cluster(1e12, 1e12, memory=12.0)
    for _ in range(2):  # a refusal is kept too, and raised again with its message
        with pytest.raises(ValueError, match="fit no contiguous"):
            max_load_dp(line([8.0] * 3), small)
    assert len(runs) == 3
    # the colocation groups are not in the graph's fingerprint but shape the blocks: not reused
    assert max_load_dp(diamond([3, 2, 2, 2], [0, 0, 0, 0]), cluster).tolist() == [0, 1, 1, 1]
    free = max_load_dp(diamond([3, 2, 2, 2], [0, 0, 0, 0], colour=""), cluster)
    assert free[1] != free[2] and len(runs) == 5


def test_max_load_dp_relaxes_activations_and_refuses_parameters_that_do_not_fit():
    # Outputs of 10 bytes per op on devices of 12: only a quarter of them fits; still placed.
    ops = [Op(f"o{i}", "X", flops=1e12, output_bytes=10.0) for i in range(4)]
    g = CompGraph.build("acts", ops, [(f"o{i}", f"o{i + 1}", 0.0) for i in range(3)])
    assert max_load_dp(g, line_cluster(1e12, 1e12, memory=12.0)).shape == (4,)
    heavy = line([20.0] * 2)  # one op alone fits no device: named
    with pytest.raises(ValueError, match=r"op 'o0' of line must run on one device, .* fit no"):
        max_load_dp(heavy, line_cluster(1e12, 1e12, memory=12.0))
    three = line([8.0] * 3)  # each fits, but two on one device do not: three blocks, two devices
    with pytest.raises(ValueError, match=r"parameters of line \(24 bytes\) fit no contiguous"):
        max_load_dp(three, line_cluster(1e12, 1e12, memory=12.0))


def test_max_load_dp_refuses_a_graph_beyond_the_bound_of_ideals():
    # 17 independent ops: 2**17 ideals, over the bound of 60,000.
    g = line([0.0] * 17, edges=False)
    with pytest.raises(ValueError, match=r"max-load DP on line: .* more than 60,000 ideals") as e:
        max_load_dp(g, line_cluster(1e12, 1e12))
    assert "\n" not in str(e.value)


def test_the_registry_returns_the_papers_own_member():
    """PLACERS runs the two algorithms as the paper does: no sub-cluster chosen by the simulator
    (a heterogeneous CPU + accelerators cluster, where the sub-clusters' splits differ)."""
    from graphopt.baselines.placement import PLACERS

    for k, graph in enumerate(small_random_graphs(6, low=12, high=30)):
        cluster = random_cluster(3, seed=70 + k)
        for name, placer in (("tarnawski-greedy", latency_greedy), ("tarnawski-dp", max_load_dp)):
            assert np.array_equal(PLACERS[name](graph, cluster), placer(graph, cluster)), name


def diamond(flops: list[float], params: list[float], colour: str = "B") -> CompGraph:
    """a -> b, a -> c, b -> d, c -> d; b and c in the colour class ``colour`` ("" for none), so
    that the block DAG is the chain {a} -> {b, c} -> {d}. Edges carry no bytes."""
    names = ["a", "b", "c", "d"]
    ops = [
        Op(n, "X", flops=f * 1e12, param_bytes=p, colocation=colour if n in "bc" else "")
        for n, f, p in zip(names, flops, params, strict=True)
    ]
    edges = [("a", "b", 0.0), ("a", "c", 0.0), ("b", "d", 0.0), ("c", "d", 0.0)]
    return CompGraph.build("diamond", ops, edges)


def test_latency_greedy_on_a_diamond_with_a_colour_class_across_it():
    # Blocks {a} (4 bytes), {b, c} (8), {d} (4) on accelerators of 10: a fills the first; the
    # class does not fit beside it, so it opens the second; d fits neither and goes to the CPU.
    g = diamond([1, 1, 1, 1], [4, 4, 4, 4])
    assert latency_greedy(g, cpu_and_two_accelerators(10.0)).tolist() == [1, 2, 2, 0]
    # Without the class, the fill of single ops puts a and b on the first accelerator, c and d
    # on the second: b and c apart.
    assert latency_greedy(
        diamond([1, 1, 1, 1], [4, 4, 4, 4], colour=""), cpu_and_two_accelerators(10.0)
    ).tolist() == [1, 1, 2, 2]
    # Accelerators of 7: the class fits none and goes whole to the CPU; a and d each fill one.
    assert latency_greedy(g, cpu_and_two_accelerators(7.0)).tolist() == [1, 0, 0, 2]


def test_max_load_dp_on_a_diamond_with_a_colour_class_across_it():
    # a, b, c, d take 3, 2, 2, 2 s on either of two equal devices, edges free. Blocks {a} (3),
    # {b, c} (4), {d} (2): the contiguous splits are {a} | {b, c, d} = 3 | 6, {a, b, c} | {d} =
    # 7 | 2 and one device, 9: the DP takes the first, max-load 6.
    g = diamond([3, 2, 2, 2], [0, 0, 0, 0])
    assert max_load_dp(g, line_cluster(1e12, 1e12)).tolist() == [0, 1, 1, 1]
    # Without the class, the ideal {a, b} gives 5 | 4: b and c apart.
    free = max_load_dp(diamond([3, 2, 2, 2], [0, 0, 0, 0], colour=""), line_cluster(1e12, 1e12))
    assert free[1] != free[2] and sorted(free.tolist()) == [0, 0, 1, 1]
    # Memory: devices of 6 bytes, the class 8: no split fits, one line naming the class.
    heavy = diamond([3, 2, 2, 2], [1, 4, 4, 1])
    with pytest.raises(ValueError, match=r"colour class 'B'") as e:
        max_load_dp(heavy, line_cluster(1e12, 1e12, memory=6.0))
    assert "\n" not in str(e.value)
