"""Diffs of two decisions: moves, priorities, kernels split and merged, step times."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphopt.decisions.diff import diff_records
from graphopt.decisions.format import record_of
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster
from graphopt.sim import simulate
from graphopt.typing import Decision

CLUSTER = get_cluster("v100-nvlink-2")


def chain(name: str = "g") -> CompGraph:
    """``a -> b -> c -> d``, all elementwise (any fusion of one device is legal)."""
    ops = [Op(n, "Relu", bytes_accessed=1e6, output_bytes=1e6) for n in "abcd"]
    return CompGraph.build(name, ops, [("a", "b", 1e6), ("b", "c", 1e6), ("c", "d", 1e6)])


def record(graph, placement=None, priority=None, fusion=None, cluster=CLUSTER):
    d = Decision(*(None if v is None else np.array(v) for v in (placement, priority, fusion)))
    return record_of(graph, cluster, d, measurement=simulate(graph, cluster, d))


def test_moves_priorities_and_kernels():
    g = chain()
    a = record(g, [0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 1, 0])  # kernels [a b] [c d]
    b = record(g, [0, 0, 0, 0], [0, 2, 0, 1], [0, 1, 0, 0])  # kernel [b c]
    diff = diff_records(a, b)
    assert diff.moved == [] and diff.reprioritised == [("b", 0, 2), ("d", 0, 1)]
    assert diff.split == [[("a",), ("b",)], [("c",), ("d",)]]
    assert diff.merged == [[("b",), ("c",)]]
    assert diff.step_time_a == a.step_time and diff.step_time_b == b.step_time
    assert diff.step_time_delta == b.step_time - a.step_time
    assert not diff.same and diff_records(a, a).same
    moved = diff_records(record(g, [0, 0, 0, 0]), record(g, [0, 1, 1, 0]))
    assert moved.moved == [("b", 0, 1), ("c", 0, 1)]
    assert moved.to_dict()["moved"][0] == {"op": "b", "a": "gpu0", "b": "gpu1"}


def test_an_array_left_out_is_its_default():
    g = chain()
    diff = diff_records(record(g), record(g, [0, 0, 1, 0], None, [1, 0, 0, 0]))
    assert diff.moved == [("c", 0, 1)] and diff.merged == [[("a",), ("b",)]]


def test_step_times_of_other_clusters_are_not_compared():
    g = chain()
    four = get_cluster("v100-nvlink-4")
    diff = diff_records(record(g), record(g, cluster=four))
    assert diff.step_time_delta is None
    assert diff.to_dict()["step_time_note"].startswith("the decisions are for different clusters")
    same = diff_records(record(g), record(g), step_times=(1.0, 0.5))
    assert same.step_time_delta == -0.5 and "step_time_note" not in same.to_dict()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), None])
def test_a_step_time_that_is_not_a_number_is_null_with_its_reason(bad):
    """Never NaN or Infinity in the JSON form (#40: ``decision diff --json`` printed NaN)."""
    g = chain()
    diff = diff_records(record(g), record(g), step_times=(1.0, bad))
    data = diff.to_dict()
    assert data["step_time_b"] is None and data["step_time_delta"] is None
    assert data["step_time_note"] == (
        "the step time of B is unknown (not saved, or an invalid decision)"
    )
    json.dumps(data, allow_nan=False)


def test_decisions_of_different_graphs_are_refused():
    with pytest.raises(ValueError, match="different graphs: 'g' .* and 'h'"):
        diff_records(record(chain()), record(chain("h")))
