from __future__ import annotations

import numpy as np
import pytest
from helpers_baselines import line_cluster, training_graph

from graphopt.baselines.contiguous import (
    activation_fraction,
    build_chain,
    device_order,
    min_max_split,
    placement_of,
    stages_to_groups,
)
from graphopt.graph import CompGraph, Op


def test_chain_of_a_training_graph():
    g = training_graph()  # blocks l0 = {fwd0, bwd0}, p0, l1 = {fwd1, bwd1}
    chain = build_chain(g, line_cluster(1e12, 2e12))
    assert chain.work.tolist() == [[3.0, 1.5], [2.0, 1.0], [3.0, 1.5]]
    assert chain.params.tolist() == [5.0, 0.0, 0.0]
    assert chain.outputs.tolist() == [10.0, 0.0, 0.0]
    assert chain.group.tolist() == [0, 1, 2, 2, 0]
    # The block DAG orders l0 and p0 before l1; the gradient edge l1 -> l0 is not in it.
    assert sorted(zip(chain.dag_src.tolist(), chain.dag_dst.tolist(), strict=True)) == [
        (0, 2),
        (1, 2),
    ]
    # l0 -> l1: fwd0 sends once to l1, its largest edge there (5); p0 -> l1: 2; l1 -> l0: 6.
    edges = sorted(
        zip(
            chain.edge_src.tolist(), chain.edge_dst.tolist(), chain.edge_bytes.tolist(), strict=True
        )
    )
    assert edges == [(0, 2, 5.0), (1, 2, 2.0), (2, 0, 6.0)]
    assert device_order(chain).tolist() == [1, 0]  # the faster device first
    assert placement_of(chain, np.array([1, 0, 1])).tolist() == [1, 0, 1, 1, 1]


def test_chain_merges_groups_beyond_the_limit():
    ops = [Op(f"o{i}", "X", flops=1e12 * (1 + i % 3)) for i in range(10)]
    edges = [(f"o{i}", f"o{i + 1}", 1.0) for i in range(9)]
    chain = build_chain(CompGraph.build("g", ops, edges), line_cluster(1e12), max_groups=4)
    assert chain.num_groups <= 4
    assert np.all(np.diff(chain.group) >= 0)  # runs of consecutive ops
    assert np.all(chain.dag_src < chain.dag_dst)
    assert sorted(zip(chain.dag_src.tolist(), chain.dag_dst.tolist(), strict=True)) == [
        (k, k + 1) for k in range(chain.num_groups - 1)
    ]
    assert chain.work.sum() == pytest.approx(19.0)  # 1 + 2 + 3 + 1 + ... + 1 s


def test_activation_fraction():
    chain = build_chain(training_graph(), line_cluster(1e12))  # params 5, outputs 10
    assert activation_fraction(chain, 15.0) == 1.0
    assert activation_fraction(chain, 10.0) == 0.5
    assert activation_fraction(chain, 6.0) == 0.0625
    assert activation_fraction(chain, 4.0) == 0.0


def test_min_max_split_by_hand():
    # Groups of 1, 1, 1, 3 s on two equal devices: one stage costs 6; the best cut is 3 | 3.
    work = np.array([[1.0, 1.0, 1.0, 3.0]] * 2)
    charge, capacity = np.zeros(4), np.full(2, 1.0)
    objective, bounds = min_max_split(work, charge, capacity)
    assert (objective, bounds.tolist()) == (3.0, [0, 3, 4])
    # A stage costs 2 more for each cut it touches (interval table): 3 + 2 | 3 + 2 = 5 still wins.
    g = 4
    interval = np.zeros((g + 1, g + 1))
    for i in range(g + 1):
        for j in range(i + 1, g + 1):
            interval[i, j] = 2.0 * ((i > 0) + (j < g))
    assert min_max_split(work, charge, capacity, interval=interval)[0] == 5.0
    # A boundary of 7 into the second stage: one stage (6) is better.
    boundary = np.zeros((2, g + 1))
    boundary[1] = 7.0
    objective, bounds = min_max_split(work, charge, capacity, boundary=boundary)
    assert (objective, bounds.tolist()) == (6.0, [0, 4])
    # Memory: each group charges 1 and a device holds 2: two stages of two groups.
    objective, bounds = min_max_split(work, np.ones(4), np.full(2, 2.0))
    assert (objective, bounds.tolist()) == (4.0, [0, 2, 4])
    # Nothing fits: no split.
    objective, bounds = min_max_split(work, np.full(4, 3.0), np.full(2, 2.0))
    assert objective == float("inf") and bounds.size == 0
    assert stages_to_groups(np.array([0, 2, 4]), np.array([5, 7]), 4).tolist() == [5, 5, 7, 7]
