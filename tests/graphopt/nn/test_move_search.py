"""The first-improvement search over single-op moves: never worse than its start, within its
calls, and it tries the moves in the order it is given."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphopt.baselines.placement import PLACERS
from graphopt.hardware import get_cluster
from graphopt.nn.move_gain import MoveGainNet, MoveInputs
from graphopt.nn.move_search import move_search
from graphopt.sim.simulator import PreparedGraph
from graphopt.train.move_gain import move_gains
from graphopt.workloads import get_graph

GRAPH, CLUSTER = "random-sp-200-s0", "v100-nvlink-4"


class Oracle(MoveGainNet):
    """Scores every move by its true gain (the simulator's), so the first move the search keeps
    must be the best single move."""

    def __init__(self, graph, cluster) -> None:
        super().__init__(width=4, layers=1)
        self.prepared = PreparedGraph(graph, cluster)

    def forward(self, inputs: MoveInputs) -> torch.Tensor:
        ops = np.flatnonzero(inputs.masks.sum(axis=1) >= 2)
        gains = move_gains(self.prepared, inputs, ops)
        return torch.as_tensor(np.nan_to_num(gains, nan=-1e9), dtype=torch.float32)


def _best_single_move(graph, cluster, placement) -> float:
    """The least step time of any single move of ``placement`` (simulated)."""
    n, d = graph.num_ops, cluster.num_devices
    rows = np.repeat(placement[None], n * d, axis=0)
    rows[np.arange(n * d), np.repeat(np.arange(n), d)] = np.tile(np.arange(d), n)
    times = PreparedGraph(graph, cluster).evaluate_batch(rows)
    return float(np.where(times.valid, times.step_time, np.inf).min())


@pytest.mark.parametrize("ordered", [False, True])
def test_never_worse_than_the_start_and_within_the_calls(ordered):
    graph, cluster = get_graph(GRAPH), get_cluster(CLUSTER)
    start = PLACERS["heft"](graph, cluster)
    prepared = PreparedGraph(graph, cluster)
    start_time = float(prepared.evaluate_batch(start[None]).step_time[0])
    net = MoveGainNet(width=8, layers=1).eval() if ordered else None
    result = move_search(graph, cluster, net, start, 40, seed=3)
    assert result.calls <= 40 and len(result.history) == result.calls
    assert result.step_time <= start_time and (np.diff(result.history) <= 0).all()
    again = float(prepared.evaluate_batch(result.placement[None]).step_time[0])
    assert again == result.step_time  # the placement returned is the one priced
    assert result.kept == int((np.diff([start_time, *result.history]) < 0).sum())


def test_the_moves_are_tried_in_the_models_order():
    graph, cluster = get_graph(GRAPH), get_cluster(CLUSTER)
    start = PLACERS["heft"](graph, cluster)
    prepared = PreparedGraph(graph, cluster)
    start_time = float(prepared.evaluate_batch(start[None]).step_time[0])
    kept = []
    result = move_search(
        graph,
        cluster,
        Oracle(graph, cluster),
        start,
        1,
        start_time=start_time,
        on_improve=lambda p, t, calls: kept.append(t),
    )
    # one call: the best single move of the start, found first
    n, d = graph.num_ops, cluster.num_devices
    rows = np.repeat(start[None], n * d, axis=0)
    rows[np.arange(n * d), np.repeat(np.arange(n), d)] = np.tile(np.arange(d), n)
    times = prepared.evaluate_batch(rows)
    best = float(np.where(times.valid, times.step_time, np.inf).min())
    assert best < start_time  # there is a move that pays on this graph
    assert result.calls == 1 and kept == [best] and result.step_time == best


def test_with_calls_to_spare_it_stops_at_a_local_optimum_of_single_moves():
    graph, cluster = get_graph("random-sp-100-s0"), get_cluster("v100-nvlink-2")
    start = PLACERS["heft"](graph, cluster)
    result = move_search(graph, cluster, None, start, 10**6, seed=0)
    assert result.calls < 10**6 and result.kept > 0
    assert _best_single_move(graph, cluster, result.placement) >= result.step_time


def test_under_a_deadline_a_costly_ranking_is_kept_for_several_moves(monkeypatch):
    """With calls as the budget, every kept move is followed by a ranking; under a deadline a
    ranking that costs more than the calls since the last one waits, and the search still ends
    at a local optimum of single moves."""
    import graphopt.nn.move_search as ms

    graph, cluster = get_graph("random-sp-100-s0"), get_cluster("v100-nvlink-2")
    start = PLACERS["heft"](graph, cluster)
    now, rankings = [0.0], []

    def ranking(*args, **kwargs):  # each ranking takes 100 "seconds", the calls none
        now[0] += 100.0
        rankings.append(1)
        return real(*args, **kwargs)

    real = ms.move_inputs
    monkeypatch.setattr(ms, "move_inputs", ranking)
    by_calls = move_search(graph, cluster, None, start, 10**6, seed=0, clock=lambda: now[0])
    assert len(rankings) > by_calls.kept > 0  # the first ranking, one per kept move, the passes
    rankings.clear()
    timed = move_search(
        graph, cluster, None, start, 10**6, seed=0, deadline=1e12, clock=lambda: now[0]
    )
    assert 0 < len(rankings) < timed.kept  # a ranking per pass only: the calls cost nothing
    assert _best_single_move(graph, cluster, timed.placement) >= timed.step_time


def test_as_optimizes_last_phase_it_spends_the_calls_and_the_result_replays():
    from graphopt.errors import InvalidArgument
    from graphopt.nn.move_search import move_phase
    from graphopt.optimizer import optimize_graph, phases
    from graphopt.sim import Simulator
    from graphopt.typing import Decision

    assert phases("placement", moves=True)[-2:] == [("moves", 0.5, 1.0), ("annealing", 1.0, 1.0)]
    graph, cluster = get_graph("wavenet-tiny"), get_cluster(CLUSTER)
    reports = []
    result = optimize_graph(
        graph, cluster, calls=64, seed=1, moves=move_phase(None, seed=0), on_progress=reports.append
    )
    assert result.method == "decoder-search+annealing+learned-moves" and result.calls == 64
    assert [r.calls for r in reports][-1] <= 64
    assert result.measurement.step_time <= result.heuristic_measurement.step_time
    replay = Simulator().evaluate(graph, cluster, Decision(placement=result.decision.placement))
    assert replay.step_time == result.measurement.step_time
    with pytest.raises(InvalidArgument, match="task joint"):
        optimize_graph(graph, cluster, task="joint", calls=8, moves=move_phase(None))


def test_the_front_door_takes_a_learned_move_model(tmp_path):
    """``graphopt.optimize(moves=...)`` as ``graphopt optimize --moves``: the built-in model or a
    file, refused in one line when it is not one."""
    import graphopt
    from graphopt.errors import InvalidArgument
    from graphopt.sim import Simulator
    from graphopt.typing import Decision

    graph, cluster = get_graph("wavenet-tiny"), get_cluster(CLUSTER)
    decision, measurement = graphopt.optimize(graph, cluster, calls=48, moves="builtin")
    replay = Simulator().evaluate(graph, cluster, Decision(placement=decision.placement))
    assert replay.step_time == measurement.step_time
    heuristic = PreparedGraph(graph, cluster).evaluate_batch(PLACERS["heft"](graph, cluster)[None])
    assert measurement.step_time <= float(heuristic.step_time[0])  # never worse than a heuristic
    with pytest.raises(InvalidArgument, match="none.pt"):
        graphopt.optimize(graph, cluster, calls=8, moves=str(tmp_path / "none.pt"))
    with pytest.raises(InvalidArgument, match="cannot read route: via-host"):
        graphopt.optimize(graph, "accel-host", calls=8, moves="builtin")
