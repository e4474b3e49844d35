"""The analytic schedule estimates: the insertion schedule, the append-only one, the
out-of-memory rule of parameters, and the estimate as a cost model."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.costmodel.features import DecisionFeaturizer
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster
from graphopt.sim.estimate import EstimateCostModel, PlacementEstimate
from graphopt.typing import CostModel, Decision
from graphopt.workloads import get_graph


@pytest.fixture(scope="module")
def setting():
    return get_graph("random-layered-200-s3"), get_cluster("v100-nvlink-4")


def test_estimate_is_the_insertion_schedule_and_refuses_overfull_devices(setting):
    graph, cluster = setting
    rng = np.random.default_rng(0)
    places = rng.integers(0, cluster.num_devices, (5, graph.num_ops))
    est = PlacementEstimate(graph, cluster)(places)
    expected = DecisionFeaturizer(graph, cluster).insertion_schedule(places)
    np.testing.assert_array_equal(est, expected)
    per_op = 0.4 * float(cluster.memory.min())  # two ops fit on a device, three do not
    ops = [Op(f"op{i}", "matmul", flops=1e9, param_bytes=per_op) for i in range(8)]
    chain = CompGraph.build("heavy", ops, [(f"op{i}", f"op{i + 1}", 1e6) for i in range(7)])
    tight = PlacementEstimate(chain, cluster)
    spread = np.arange(8) % cluster.num_devices
    crowded = np.zeros(8, dtype=np.int64)
    out = tight(np.stack([spread, crowded]))
    assert np.isfinite(out[0]) and np.isinf(out[1])


def test_window_zero_appends_where_the_insertion_schedule_fills_a_gap():
    cluster = get_cluster("v100-nvlink-4")
    ops = [Op("a", "matmul", flops=1e12), Op("b", "matmul", flops=1e9), Op("d", "add", flops=1e9)]
    graph = CompGraph.build("gap", ops, [("a", "b", 1e3)])
    place = np.array([[1, 0, 0]])  # b waits for a on device 0; d could run meanwhile
    insert = PlacementEstimate(graph, cluster)(place)[0]
    append = PlacementEstimate(graph, cluster, window=0)(place)[0]
    alone = PlacementEstimate(graph, cluster)(np.array([[1, 0, 2]]))[0]
    assert insert == pytest.approx(alone)  # d hides in the gap before b
    assert append > insert  # appended after b instead
    with pytest.raises(ValueError, match="window must be >= 0"):
        PlacementEstimate(graph, cluster, window=-1)


def test_estimate_cost_model(setting):
    graph, cluster = setting
    model = EstimateCostModel()
    assert isinstance(model, CostModel)
    place = np.arange(graph.num_ops) % cluster.num_devices
    m = model.evaluate(graph, cluster, Decision(placement=place))
    assert m.valid and m.step_time == PlacementEstimate(graph, cluster)(place[None])[0]
    single = model.evaluate(graph, cluster, Decision())
    assert single.step_time == PlacementEstimate(graph, cluster)(np.zeros((1, graph.num_ops)))[0]
    per_op = 0.6 * float(cluster.memory.min())
    heavy = CompGraph.build(
        "heavy", [Op(f"op{i}", "matmul", flops=1e9, param_bytes=per_op) for i in range(2)], []
    )
    oom = model.evaluate(heavy, cluster, Decision())
    assert not oom.valid and "out of memory" in oom.reason
