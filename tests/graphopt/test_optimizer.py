"""graphopt.optimizer: the best decision in a budget of calls or seconds, never worse than the best
heuristic, reported as it goes, and the ``graphopt.optimize`` front door."""

from __future__ import annotations

import math

import numpy as np
import pytest

import graphopt
from graphopt import optimizer
from graphopt.baselines.staged import best_heuristic
from graphopt.errors import InvalidArgument
from graphopt.hardware import get_cluster
from graphopt.optimizer import MAX_CALLS, Optimized, Progress, check_budget, optimize_graph
from graphopt.sim import Simulator
from graphopt.typing import Decision
from graphopt.workloads import get_graph

GRAPH = get_graph("wavenet-tiny")
CLUSTER = get_cluster("v100-nvlink-4")


class FakeClock:
    """A clock that moves ``tick`` seconds each time it is read: time budgets without wall time."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


@pytest.mark.parametrize("task", ["placement", "scheduling"])
def test_annealing_rounds_fit_the_time_left(task, monkeypatch) -> None:
    """Where a call takes long (a large graph), an annealing round is cut to the calls the time
    left allows instead of overrunning the budget by a whole round."""
    clock = FakeClock(0.001)  # the decoder search's steps: a millisecond a clock reading
    real = optimizer.simulated_annealing

    def slow(graph, cluster, task, budget, seed, **kwargs):  # noqa: ANN001, ANN202
        clock.now += 0.05 * budget  # 50 ms a call
        return real(graph, cluster, task, budget, seed, **kwargs)

    monkeypatch.setattr(optimizer, "simulated_annealing", slow)
    result = optimize_graph(GRAPH, CLUSTER, task=task, seconds=2.0, clock=clock)
    assert result.calls >= 2
    assert result.seconds <= 2.0 + 0.05  # at most one call past the budget


def _replayed(result: Optimized) -> float:
    return Simulator().evaluate(GRAPH, CLUSTER, result.decision).step_time


def test_a_call_budget_is_spent_exactly_and_the_result_replays():
    reports: list[Progress] = []
    result = optimize_graph(GRAPH, CLUSTER, calls=48, seed=1, on_progress=reports.append)
    _, heuristic, name = best_heuristic(GRAPH, CLUSTER, "placement", Simulator())
    assert result.method == "decoder-search+annealing"
    assert result.start == name == result.best_heuristic
    done = [r.calls for r in reports]  # after every decoder call, every round of annealing
    assert result.calls == 48 and done[-1] == 48 and len(done) > 30
    assert all(a < b for a, b in zip(done, done[1:], strict=False))
    assert result.heuristic_measurement.step_time == heuristic.step_time
    assert result.measurement.step_time <= heuristic.step_time
    assert _replayed(result) == result.measurement.step_time
    times = [r.measurement.step_time for r in reports]
    assert all(a >= b for a, b in zip(times, times[1:], strict=False))  # the best so far
    assert reports[-1].decision is result.decision or reports[-1].measurement == result.measurement
    assert {h.method for h in result.heuristics} >= {"heft", "metis", "single"}
    again = optimize_graph(GRAPH, CLUSTER, calls=48, seed=1)
    assert again.measurement.step_time == result.measurement.step_time  # seeded


def test_a_time_budget_stops_the_search_when_it_is_spent():
    clock = FakeClock(0.01)  # every reading of the clock is 10 ms later
    result = optimize_graph(GRAPH, CLUSTER, seconds=0.5, clock=clock)
    assert result.calls >= 1 and result.seconds <= 0.5 + 0.05
    assert result.measurement.step_time <= result.heuristic_measurement.step_time


def test_no_time_left_after_the_heuristics_still_returns_the_start():
    result = optimize_graph(GRAPH, CLUSTER, seconds=1e-6)
    assert result.calls == 1
    assert result.measurement.step_time == result.heuristic_measurement.step_time


def test_a_faster_start_is_used_and_a_slower_one_is_not():
    found = optimize_graph(GRAPH, CLUSTER, calls=64, seed=0)
    assert found.measurement.step_time < found.heuristic_measurement.step_time  # room found
    again = optimize_graph(
        GRAPH,
        CLUSTER,
        calls=2,
        start=Decision(placement=found.decision.placement),
        start_name="run",
    )
    assert again.start == "run" and again.measurement.step_time <= found.measurement.step_time
    slow = optimize_graph(
        GRAPH, CLUSTER, calls=2, start=Decision(placement=np.zeros(GRAPH.num_ops, dtype=np.int64))
    )
    assert slow.start == found.start  # one device is slower than the best heuristic
    with pytest.raises(InvalidArgument, match="start has a placement of shape"):
        optimize_graph(
            GRAPH, CLUSTER, calls=2, start=Decision(placement=np.zeros(3, dtype=np.int64))
        )


def test_scheduling_anneals_in_rounds():
    reports: list[Progress] = []
    result = optimize_graph(
        GRAPH, CLUSTER, task="scheduling", calls=150, on_progress=reports.append
    )
    assert result.method == "annealing" and result.calls == 150
    assert [r.calls for r in reports] == [64, 128, 150]
    assert result.measurement.step_time <= result.heuristic_measurement.step_time
    assert _replayed(result) == result.measurement.step_time
    # the placement is the best heuristic's
    assert np.array_equal(result.decision.placement, result.heuristic_decision.placement)


def test_joint_runs_the_joint_decoder_search_then_annealing():
    reports: list[Progress] = []
    result = optimize_graph(
        GRAPH, CLUSTER, task="joint", calls=150, seed=2, on_progress=reports.append
    )
    _, heuristic, name = best_heuristic(GRAPH, CLUSTER, "joint", Simulator())
    assert result.method == "decoder-search+annealing" and result.calls == 150
    assert result.start == name == result.best_heuristic  # heft+heft-rank+greedy: it fuses
    done = [r.calls for r in reports]
    assert done[-1] == 150 and all(a < b for a, b in zip(done, done[1:], strict=False))
    assert len(done) > 100  # a report after every decoder call
    assert result.heuristic_measurement.step_time == heuristic.step_time
    assert result.measurement.step_time < heuristic.step_time  # it found something
    assert _replayed(result) == result.measurement.step_time
    d = result.decision
    assert d.placement is not None and d.priority is not None and d.fusion is not None
    assert d.fusion.any()
    again = optimize_graph(GRAPH, CLUSTER, task="joint", calls=150, seed=2)
    assert again.measurement.step_time == result.measurement.step_time  # seeded


def test_annealing_under_a_time_budget_stops():
    result = optimize_graph(GRAPH, CLUSTER, task="fusion", seconds=0.5, clock=FakeClock(0.01))
    assert result.method == "annealing" and result.calls >= 64 and result.seconds < 1.0


@pytest.mark.parametrize(
    ("seconds", "calls", "says"),
    [
        (None, None, "give exactly one budget: seconds"),
        (1.0, 8, "give exactly one budget"),
        (0.0, None, "seconds must be a number of seconds in (0,"),
        (-1.0, None, "got -1.0"),
        (math.nan, None, "got nan"),
        (math.inf, None, "got inf"),
        (None, 0, "calls must be in 1.."),
        (None, MAX_CALLS + 1, "calls must be in 1.."),
        (None, 2.5, "calls must be an integer"),
        (None, True, "calls must be an integer"),
    ],
)
def test_bad_budgets_are_refused_naming_the_argument(seconds, calls, says):
    with pytest.raises(InvalidArgument) as e:
        check_budget(seconds, calls)
    assert says in str(e.value)
    with pytest.raises(InvalidArgument):
        optimize_graph(GRAPH, CLUSTER, seconds=seconds, calls=calls)


def test_prescreening_spends_the_calls_and_is_refused_out_of_range_or_off_placement():
    result = optimize_graph(GRAPH, CLUSTER, calls=32, seed=1, prescreen=4)
    assert result.calls == 32 and _replayed(result) == result.measurement.step_time
    assert result.measurement.step_time <= result.heuristic_measurement.step_time
    for bad, says in ((0, "prescreen must be an integer in 1..64"), (True, "got True")):
        with pytest.raises(InvalidArgument, match=says):
            optimize_graph(GRAPH, CLUSTER, calls=8, prescreen=bad)
    with pytest.raises(InvalidArgument, match="not to scheduling"):
        optimize_graph(GRAPH, CLUSTER, task="scheduling", calls=8, prescreen=2)


def test_bad_graphs_clusters_and_tasks_are_refused():
    with pytest.raises(ValueError, match="unknown"):
        optimize_graph("no-such-graph", CLUSTER, calls=1)
    with pytest.raises(ValueError, match="unknown cluster preset"):
        optimize_graph(GRAPH, "v100x3", calls=1)
    with pytest.raises(InvalidArgument, match="graph must name one graph"):
        optimize_graph("wavenet-tiny,txl-tiny", CLUSTER, calls=1)
    with pytest.raises(ValueError, match="unknown task 'placement-edit'"):
        optimize_graph(GRAPH, CLUSTER, task="placement-edit", calls=1)


def test_the_front_door_returns_a_decision_and_its_measurement():
    decision, measurement = graphopt.optimize("wavenet-tiny", "v100-nvlink-4", calls=16)
    assert isinstance(decision, Decision) and decision.placement is not None
    assert Simulator().evaluate(GRAPH, CLUSTER, decision).step_time == measurement.step_time


def test_a_start_with_unplaced_ops_takes_the_best_heuristic_devices_there() -> None:
    """A start placement's ``-1`` entries (ops a decision of another version of the model does
    not name) take the best heuristic's devices, as they are or renumbered to agree with the
    start, whichever is faster; the result keeps the given start's measurement whether or not
    the search started from it."""
    graph, cluster = get_graph("txl-tiny"), get_cluster("v100-nvlink-4")
    heuristic = optimize_graph(graph, cluster, calls=1, seed=0).heuristic_decision.placement
    start = np.array([3, 2, 1, 0])[heuristic]  # the heuristic's placement, renumbered
    start[1::2] = -1
    plain, renumbered = optimizer.filled_placements(start, heuristic, cluster)
    assert (plain == np.where(start < 0, heuristic, start)).all()
    assert (renumbered == np.array([3, 2, 1, 0])[heuristic]).all()  # the numbering undone
    result = optimize_graph(
        graph, cluster, calls=2, seed=0, start=Decision(placement=start), start_name="partial"
    )
    assert result.given is not None
    name, given = result.given
    sim = Simulator()
    times = [
        sim.evaluate(graph, cluster, Decision(placement=p)).step_time for p in (plain, renumbered)
    ]
    assert name == "partial" and given.step_time == pytest.approx(min(times))
    assert optimize_graph(graph, cluster, calls=1, seed=0).given is None
