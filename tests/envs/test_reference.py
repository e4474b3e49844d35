"""The reference decisions' in-process cache (envs/reference.py)."""

from __future__ import annotations

from envs import reference as ref_module
from envs.reference import reference_decision
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.workloads import get_graph

GRAPH = get_graph("wavenet-tiny")
CLUSTER = get_cluster("v100-nvlink-4")


class _Priced:
    """A cost model other than the simulator (it prices as the simulator does)."""

    def __init__(self) -> None:
        self.sim = Simulator()

    def evaluate(self, graph, cluster, decision):  # noqa: ANN001, ANN201
        return self.sim.evaluate(graph, cluster, decision)


def test_every_simulator_shares_a_reference_and_other_cost_models_do_not(monkeypatch) -> None:
    calls = []
    real = ref_module.best_heuristic

    def counted(graph, cluster, task, cost_model):  # noqa: ANN001, ANN202
        calls.append(cost_model)
        return real(graph, cluster, task, cost_model)

    monkeypatch.setattr(ref_module, "best_heuristic", counted)
    monkeypatch.setattr(ref_module, "_CACHE", {})
    first = reference_decision(GRAPH, CLUSTER, "placement", Simulator())
    again = reference_decision(GRAPH, CLUSTER, "placement", Simulator())  # a new simulator
    assert again is first and len(calls) == 1
    other = _Priced()
    theirs = reference_decision(GRAPH, CLUSTER, "placement", other)
    assert len(calls) == 2 and theirs.measurement.step_time == first.measurement.step_time
    assert reference_decision(GRAPH, CLUSTER, "placement", other) is theirs and len(calls) == 2
    reference_decision(GRAPH, CLUSTER, "scheduling", Simulator())  # another task: its own
    assert len(calls) == 3
    reference_decision(GRAPH, get_cluster("v100-nvlink-2"), "placement", Simulator())
    assert len(calls) == 4
