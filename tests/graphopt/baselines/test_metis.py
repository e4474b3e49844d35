from __future__ import annotations

import itertools
import os

import numpy as np
from helpers_baselines import tiny_cases

from graphopt.baselines._costs import op_times
from graphopt.baselines.metis import _undirected_csr, metis, part_weights
from graphopt.baselines.placement import round_robin
from graphopt.hardware import get_cluster
from graphopt.workloads import get_graph


def cut_bytes(graph, placement) -> float:
    return float(graph.edge_bytes[placement[graph.edge_src] != placement[graph.edge_dst]].sum())


def work_share(graph, cluster, placement) -> np.ndarray:
    mean_time = op_times(graph, cluster).mean(axis=1)
    return (
        np.bincount(placement, weights=mean_time, minlength=cluster.num_devices) / mean_time.sum()
    )


def test_undirected_csr_merges_parallel_edges_and_drops_self_loops():
    src = np.array([0, 1, 1, 2], dtype=np.int64)
    dst = np.array([1, 0, 2, 2], dtype=np.int64)
    weight = np.array([2, 3, 4, 9], dtype=np.int64)
    xadj, adjncy, merged = _undirected_csr(3, src, dst, weight)
    assert xadj.tolist() == [0, 1, 3, 4]
    assert adjncy.tolist() == [1, 0, 2, 1]
    assert merged.tolist() == [5, 5, 4, 4]  # 0-1 given twice (2 + 3), symmetric


def test_balanced_with_small_cut_on_a_homogeneous_cluster():
    graph, cluster = get_graph("gnmt-tiny"), get_cluster("v100-nvlink-4")
    placement = metis(graph, cluster)
    np.testing.assert_allclose(work_share(graph, cluster, placement), 0.25, atol=0.02)
    assert cut_bytes(graph, placement) < 0.05 * cut_bytes(graph, round_robin(graph, cluster))


def test_heterogeneous_cluster_gets_shares_proportional_to_speed():
    graph, cluster = get_graph("gnmt-tiny"), get_cluster("hetero-cpu-2gpu")
    target = part_weights(op_times(graph, cluster))
    assert abs(target.sum() - 1.0) < 1e-12 and target[0] < 0.5 * target[1]  # the CPU is much slower
    share = work_share(graph, cluster, metis(graph, cluster))
    np.testing.assert_allclose(share, target, atol=0.03)


def test_parts_are_mapped_to_devices_over_the_cheapest_links():
    """No relabelling of the (equal-speed) devices moves the cut bytes onto faster links."""
    graph, cluster = get_graph("txl-tiny"), get_cluster("v100-nvlink-8")
    placement = metis(graph, cluster)
    inv_bw = 1.0 / cluster.bandwidth

    def cost(perm: np.ndarray) -> float:
        a, b = perm[placement[graph.edge_src]], perm[placement[graph.edge_dst]]
        return float((graph.edge_bytes * inv_bw[a, b]).sum())

    best = cost(np.arange(8))
    for perm in itertools.islice(itertools.permutations(range(8)), 0, None, 7):
        assert best <= cost(np.array(perm)) * (1 + 1e-12)


def test_deterministic_valid_and_trivial_cases():
    for graph, cluster in tiny_cases():
        placement = metis(graph, cluster)
        assert placement.dtype == np.int64 and placement.shape == (graph.num_ops,)
        assert placement.min() >= 0 and placement.max() < cluster.num_devices
        assert np.array_equal(placement, metis(graph, cluster))
    graph = get_graph("txl-tiny")
    assert metis(graph, get_cluster("v100-nvlink-2")).max() == 1
    single = get_cluster("v100-nvlink-2")
    from graphopt.hardware import Cluster

    one = Cluster("one", single.devices[:1], bandwidth=np.ones((1, 1)), latency=np.zeros((1, 1)))
    assert metis(graph, one).tolist() == [0] * graph.num_ops


def test_metis_prints_nothing(capfd):
    """METIS's C notes (``***Cannot bisect a graph with 0 vertices!``, ``***You are trying to
    partition a graph into too many parts!``) stay off the terminal: with no more ops than devices
    METIS is not called, and otherwise its notes are dropped (this graph made it print them)."""
    from graphopt.graph import CompGraph, Op
    from graphopt.workloads import series_parallel_dag

    cluster = get_cluster("v100-nvlink-8")
    graph = series_parallel_dag(9, 0)
    placement = metis(graph, cluster)
    assert placement.shape == (9,) and placement.min() >= 0 and placement.max() < 8
    ops = [Op(f"o{i}", "MatMul", flops=1e9 * (i + 1)) for i in range(3)]
    chain = CompGraph.build("chain", ops, [("o0", "o1", 1e6), ("o1", "o2", 1e6)])
    assert len(set(metis(chain, cluster).tolist())) == 3  # a device per op: a balanced partition
    hetero = get_cluster("hetero-cpu-2gpu")  # device 0 is the CPU: the two ops go to the GPUs
    assert sorted(metis(CompGraph.build("pair", ops[:2], []), hetero).tolist()) == [1, 2]
    assert capfd.readouterr() == ("", "")


def test_other_output_during_metis_still_reaches_the_terminal(capfd):
    from graphopt.baselines.metis import _metis_notes_dropped

    with _metis_notes_dropped():
        os.write(1, b"\t***Cannot bisect a graph with 0 vertices!\nkept\n")
    assert capfd.readouterr() == ("kept\n", "")
