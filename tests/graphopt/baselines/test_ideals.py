from __future__ import annotations

import itertools

import numpy as np
import pytest

from graphopt.baselines.contiguous import min_max_split
from graphopt.baselines.ideals import Ideals, ideal_split
from graphopt.baselines.tarnawski import interval_transfers
from graphopt.typing import FloatArray, IntArray


def ideal_sets(ideals: Ideals) -> list[set[int]]:
    return [set(ideals.members(i).tolist()) for i in range(len(ideals))]


def test_ideals_of_a_diamond():
    # 0 -> 1, 0 -> 2, 1 -> 3, 2 -> 3: {}, {0}, {0,1}, {0,2}, {0,1,2}, everything.
    ideals = Ideals(4, np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3]))
    assert ideal_sets(ideals) == [set(), {0}, {0, 1}, {0, 2}, {0, 1, 2}, {0, 1, 2, 3}]
    # {0, 1, 2} has two immediate sub-ideals: without 1 and without 2.
    k = 4
    links = set(
        zip(
            ideals.link_sub[ideals.link_ptr[k] : ideals.link_ptr[k + 1]].tolist(),
            ideals.link_block[ideals.link_ptr[k] : ideals.link_ptr[k + 1]].tolist(),
            strict=True,
        )
    )
    assert links == {(2, 2), (3, 1)}


def test_too_many_ideals_is_one_line():
    # 20 independent blocks have 2**20 ideals.
    empty = np.zeros(0, dtype=np.int64)
    with pytest.raises(ValueError, match=r"more than 1,000 ideals") as info:
        Ideals(20, empty, empty, limit=1000)
    assert "\n" not in str(info.value)


def test_too_many_pairs_is_one_line():
    # A chain of 30 blocks: 31 ideals, 496 pairs J ⊆ I.
    src, dst = np.arange(29), np.arange(1, 30)
    ideals = Ideals(30, src, dst)
    args = (np.ones((30, 2)), np.zeros(30), np.ones(2), src, dst, np.zeros(29))
    assert np.isfinite(ideal_split(ideals, *args, max_pairs=496)[0])
    with pytest.raises(ValueError, match=r"more than 100 pairs of nested ideals") as info:
        ideal_split(ideals, *args, max_pairs=100)
    assert "\n" not in str(info.value)


def max_load_of(
    stage: IntArray, work: FloatArray, src: IntArray, dst: IntArray, cost: FloatArray
) -> float:
    """The slow twin: max over devices of their blocks' work plus the cost of every edge with
    one end on the device."""
    loads = []
    for k in range(work.shape[1]):
        on = stage == k
        if not on.any():
            continue
        cut = float(cost[on[src] != on[dst]].sum())
        loads.append(float(work[on, k].sum()) + cut)
    return max(loads)


def exhaustive(
    num_blocks: int,
    src: IntArray,
    dst: IntArray,
    work: FloatArray,
    charge: FloatArray,
    capacity: FloatArray,
    costed: tuple[IntArray, IntArray, FloatArray],
) -> float:
    """The least max-load over every contiguous assignment (device order along the DAG edges
    ``src -> dst``; ``costed`` the edges that cost transfers)."""
    best = float("inf")
    for stage in itertools.product(range(work.shape[1]), repeat=num_blocks):
        s = np.array(stage)
        if np.any(s[src] > s[dst]):
            continue
        held = np.bincount(s, weights=charge, minlength=work.shape[1])
        if np.any(held > capacity):
            continue
        best = min(best, max_load_of(s, work, *costed))
    return best


def random_dag(rng: np.random.Generator, num_blocks: int, density: float):
    pairs = [(a, b) for a in range(num_blocks) for b in range(a + 1, num_blocks)]
    keep = rng.random(len(pairs)) < density
    src = np.array([p[0] for p, k in zip(pairs, keep, strict=True) if k], dtype=np.int64)
    dst = np.array([p[1] for p, k in zip(pairs, keep, strict=True) if k], dtype=np.int64)
    return src, dst


@pytest.mark.parametrize("seed", range(12))
def test_dp_equals_exhaustive_search(seed):
    rng = np.random.default_rng(seed)
    num_dev = 2 if seed % 2 else 3
    num_blocks = int(rng.integers(4, 14 if num_dev == 2 else 10))
    src, dst = random_dag(rng, num_blocks, float(rng.uniform(0.15, 0.6)))
    work = rng.uniform(0.5, 2.0, (num_blocks, num_dev))
    charge = rng.uniform(0.0, 1.0, num_blocks)
    capacity = np.full(num_dev, float(charge.sum()) * float(rng.uniform(0.4, 1.2)))
    # Costed edges: the DAG's own and a few the other way (gradients).
    back = rng.random(len(src)) < 0.3
    esrc, edst = np.concatenate((src, dst[back])), np.concatenate((dst, src[back]))
    cost = rng.uniform(0.0, 1.0, len(esrc))
    ideals = Ideals(num_blocks, src, dst)
    objective, stage = ideal_split(ideals, work, charge, capacity, esrc, edst, cost)
    expected = exhaustive(num_blocks, src, dst, work, charge, capacity, (esrc, edst, cost))
    assert objective == pytest.approx(expected, rel=1e-12)
    if np.isfinite(expected):
        assert np.all(stage[src] <= stage[dst])  # a chain of ideals
        assert max_load_of(stage, work, esrc, edst, cost) == pytest.approx(objective, rel=1e-12)
        assert np.all(np.bincount(stage, weights=charge, minlength=num_dev) <= capacity)


def subset_sums(values: FloatArray) -> FloatArray:
    """``(2**B,)``: entry ``m`` is the sum of ``values[b]`` over the bits ``b`` of ``m``."""
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate((sums, sums + v))
    return sums


@pytest.mark.parametrize("seed", range(4))
def test_dp_on_twenty_blocks_equals_exhaustive_search(seed):
    # Two devices, 20 blocks: every one of the 2**20 subsets is tried as the first device's set,
    # vectorised; the downward-closed ones (no DAG edge enters them from outside) are the
    # contiguous splits. Independent of the enumeration of ideals, which it checks too.
    rng = np.random.default_rng(100 + seed)
    num_blocks = 20
    src, dst = random_dag(rng, num_blocks, 0.25)
    work = rng.uniform(0.5, 2.0, (num_blocks, 2))
    cost = rng.uniform(0.0, 1.0, len(src))
    charge = rng.uniform(0.0, 1.0, num_blocks)
    capacity = np.full(2, float(charge.sum()) * 0.7)  # neither device holds everything
    ideals = Ideals(num_blocks, src, dst)
    objective, stage = ideal_split(ideals, work, charge, capacity, src, dst, cost)
    mask = np.arange(2**num_blocks, dtype=np.int64)
    bit = [(mask >> b) & 1 for b in range(num_blocks)]
    closed = np.ones(len(mask), dtype=bool)
    cut = np.zeros(len(mask))
    for a, b, w in zip(src.tolist(), dst.tolist(), cost.tolist(), strict=True):
        closed &= bit[b] <= bit[a]
        cut += w * (bit[a] != bit[b])
    assert len(ideals) == int(closed.sum())
    first_charge = subset_sums(charge)
    fits = (first_charge <= capacity[0]) & (charge.sum() - first_charge <= capacity[1])
    first = subset_sums(work[:, 0]) + cut
    second = (work[:, 1].sum() - subset_sums(work[:, 1])) + cut
    best = float(np.maximum(first, second)[closed & fits].min())  # no cut when a side is empty
    assert objective == pytest.approx(best, rel=1e-12)
    assert np.all(stage[src] <= stage[dst])
    assert max_load_of(stage, work, src, dst, cost) == pytest.approx(objective, rel=1e-12)
    assert np.all(np.bincount(stage, weights=charge, minlength=2) <= capacity)
    assert objective <= prefix_split(src, dst, work, charge, capacity, cost) + 1e-12


def prefix_split(src, dst, work, charge, capacity, cost) -> float:
    """The max-load of the prefix-only DP (the blocks' own order) on the same costs."""

    class Chain:  # what interval_transfers reads
        edge_src, edge_dst, num_groups = src, dst, len(charge)

    objective, _ = min_max_split(
        np.ascontiguousarray(work.T), charge, capacity, interval=interval_transfers(Chain, cost)
    )
    return objective


@pytest.mark.parametrize("seed", range(6))
def test_dp_is_never_above_the_prefix_split(seed):
    rng = np.random.default_rng(200 + seed)
    num_blocks, num_dev = 16, 3
    src, dst = random_dag(rng, num_blocks, 0.2)
    work = rng.uniform(0.5, 2.0, (num_blocks, num_dev))
    cost = rng.uniform(0.0, 2.0, len(src))
    charge, capacity = rng.uniform(0, 1, num_blocks), np.full(num_dev, 7.0)
    objective, _ = ideal_split(Ideals(num_blocks, src, dst), work, charge, capacity, src, dst, cost)
    assert objective <= prefix_split(src, dst, work, charge, capacity, cost) + 1e-12


def test_chain_by_hand():
    # A chain 0 -> 1 -> 2 -> 3 of 1, 1, 1, 3 s on two equal devices, each edge 0.5 s: 3 + 0.5 |
    # 0.5 + 3 = 3.5 beats one device (6) and the other cuts.
    src, dst = np.array([0, 1, 2]), np.array([1, 2, 3])
    work = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [3.0, 3.0]])
    ideals = Ideals(4, src, dst)
    assert len(ideals) == 5  # the prefixes
    objective, stage = ideal_split(ideals, work, np.zeros(4), np.ones(2), src, dst, np.full(3, 0.5))
    assert (objective, stage.tolist()) == (3.5, [0, 0, 0, 1])
    # Edges of 4 s: one device (6) beats every cut (3 + 4); the second device stays idle.
    objective, stage = ideal_split(ideals, work, np.zeros(4), np.ones(2), src, dst, np.full(3, 4.0))
    assert (objective, stage.tolist()) == (6.0, [0, 0, 0, 0])


def test_diamond_by_hand():
    # a -> b, a -> c, b -> d, c -> d (blocks 0..3), edges free; a and d take 1 s anywhere, b takes
    # 4 s on device 0 and 2 s on device 1, c the other way round. The prefixes of the order
    # a, b, c, d give at best {a, b} | {c, d} = 5 | 5; the ideal {a, c} gives 3 | 3.
    src, dst = np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3])
    work = np.array([[1.0, 1.0], [4.0, 2.0], [2.0, 4.0], [1.0, 1.0]])
    ideals = Ideals(4, src, dst)
    free = np.zeros(4)
    objective, stage = ideal_split(ideals, work, np.zeros(4), np.ones(2), src, dst, free)
    assert (objective, stage.tolist()) == (3.0, [0, 1, 0, 1])
    prefix, bounds = min_max_split(np.ascontiguousarray(work.T), np.zeros(4), np.ones(2))
    assert (prefix, bounds.tolist()) == (5.0, [0, 2, 4])
    # An edge a -> b of 1 s is cut by {a, c} | {b, d} but not by the prefix {a, b}: 4 | 4 still
    # wins.
    cost = np.array([1.0, 0.0, 0.0, 0.0])
    assert ideal_split(ideals, work, np.zeros(4), np.ones(2), src, dst, cost)[0] == 4.0
