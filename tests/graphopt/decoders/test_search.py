from __future__ import annotations

import numpy as np
import pytest

from envs.reference import reference_decision
from graphopt.decoders.decision import DecoderSettings, channels, decode
from graphopt.decoders.search import decoder_search
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.workloads import resolve_graphs

CLUSTER = get_cluster("v100-nvlink-4")
SIM = Simulator()


def _evaluate(graph):
    ref = reference_decision(graph, CLUSTER, "placement", SIM)
    settings = DecoderSettings()

    def evaluate(outputs):
        decision = decode("placement", graph, CLUSTER, outputs, ref.decision, ref.name, settings)
        return decision, SIM.evaluate(graph, CLUSTER, decision)

    return ref, evaluate


def test_search_is_never_worse_than_its_start_and_is_reproducible():
    graph = resolve_graphs("wavenet-tiny")[0]
    ref, evaluate = _evaluate(graph)
    start = np.zeros((len(channels("placement", 4)), graph.num_ops))
    first = decoder_search(evaluate, start, 64, seed=3)
    assert first.calls == 64 and len(first.trace) == 64
    assert first.measurement.step_time <= ref.measurement.step_time
    assert all(a >= b for a, b in zip(first.trace, first.trace[1:], strict=False))
    again = decoder_search(evaluate, start, 64, seed=3)
    assert again.measurement.step_time == first.measurement.step_time
    replay = evaluate(first.outputs)[1]
    assert replay.step_time == first.measurement.step_time


def test_bad_arguments_are_refused():
    graph = resolve_graphs("txl-tiny")[0]
    _, evaluate = _evaluate(graph)
    with pytest.raises(ValueError, match="budget must be >= 1"):
        decoder_search(evaluate, np.zeros((6, graph.num_ops)), 0)
    with pytest.raises(ValueError, match="start must be"):
        decoder_search(evaluate, np.zeros(6), 4)


def test_window_moves_beat_the_heuristic_and_respect_the_channels():
    graph = resolve_graphs("wavenet-2")[0]  # metis is its best heuristic; the decoder finds more
    ref, evaluate = _evaluate(graph)
    start = np.zeros((len(channels("placement", 4)), graph.num_ops))
    found = decoder_search(evaluate, start, 256, seed=0, affinity=[2, 3, 4, 5])
    assert found.measurement.step_time < ref.measurement.step_time * 0.97
    assert set(np.unique(found.outputs[0])) == {0.0}  # the shift channel is never moved


def test_search_without_a_gate_moves_the_other_channels():
    graph = resolve_graphs("txl-tiny")[0]
    calls = []

    def evaluate(outputs):
        calls.append(outputs.copy())
        return evaluate_placement(outputs)

    _, evaluate_placement = _evaluate(graph)
    decoder_search(evaluate, np.zeros((6, graph.num_ops)), 8, seed=1, gate_channel=None)
    assert any(np.abs(c[1]).sum() > 0 for c in calls[1:])


class _Clock:
    """Moves 10 ms each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.01
        return self.now


def test_a_time_budget_ends_the_search_and_reports_every_call():
    graph = resolve_graphs("txl-tiny")[0]
    _, evaluate = _evaluate(graph)
    start = np.zeros((len(channels("placement", 4)), graph.num_ops))
    seen = []
    found = decoder_search(
        evaluate, start, seconds=0.2, clock=_Clock(), on_step=lambda k, d, m: seen.append((k, m))
    )
    assert 1 < found.calls <= 21 and len(found.trace) == found.calls
    assert [k for k, _ in seen] == list(range(1, found.calls + 1))
    assert seen[-1][1].step_time == found.measurement.step_time
    capped = decoder_search(evaluate, start, 3, seconds=1e6, seed=3)  # calls run out first
    assert capped.calls == 3
    same = decoder_search(evaluate, start, 3, seed=3)
    assert same.measurement.step_time == capped.measurement.step_time
    with pytest.raises(ValueError, match="give a budget of calls, of seconds"):
        decoder_search(evaluate, start)
    with pytest.raises(ValueError, match="seconds must be a positive finite number"):
        decoder_search(evaluate, start, seconds=float("nan"))


def test_the_placement_search_starts_from_its_anchor_and_keeps_its_other_arrays():
    from graphopt.decoders.search import search_placements
    from graphopt.typing import Decision

    graph = resolve_graphs("wavenet-tiny")[0]
    ref = reference_decision(graph, CLUSTER, "placement", SIM)
    one = search_placements(graph, CLUSTER, ref.decision, 1, cost_model=SIM)
    assert one.calls == 1 and np.array_equal(one.decision.placement, ref.decision.placement)
    assert one.measurement.step_time == ref.measurement.step_time
    priority = np.arange(graph.num_ops) % 3
    anchor = Decision(placement=ref.decision.placement, priority=priority)
    found = search_placements(graph, CLUSTER, anchor, 32, seed=2)
    assert found.calls == 32 and np.array_equal(found.decision.priority, priority)
    assert SIM.evaluate(graph, CLUSTER, found.decision).step_time == found.measurement.step_time


class _Counting:
    """A cost model that counts its calls and the placements it priced."""

    def __init__(self) -> None:
        self.placements: list[np.ndarray] = []

    def evaluate(self, graph, cluster, decision):
        self.placements.append(np.asarray(decision.placement).copy())
        return SIM.evaluate(graph, cluster, decision)


def test_prescreening_prices_one_move_a_call_the_one_the_estimate_ranks_first(monkeypatch):
    import graphopt.decoders.search as search
    from graphopt.sim.estimate import PlacementEstimate

    ranked: list[np.ndarray] = []  # the placement the estimate ranks first, per step

    class Recording(PlacementEstimate):
        def __call__(self, placements):
            times = super().__call__(placements)
            assert len(placements) == 6
            ranked.append(np.asarray(placements)[int(np.argmin(times))].copy())
            return times

    graph = resolve_graphs("wavenet-tiny")[0]
    ref = reference_decision(graph, CLUSTER, "placement", SIM)
    plain = search.search_placements(graph, CLUSTER, ref.decision, 24, seed=5)
    same = search.search_placements(graph, CLUSTER, ref.decision, 24, seed=5, prescreen=1)
    assert np.array_equal(plain.outputs, same.outputs)  # prescreen=1: the plain search
    monkeypatch.setattr(search, "PlacementEstimate", Recording)
    counting = _Counting()
    found = search.search_placements(
        graph, CLUSTER, ref.decision, 24, seed=5, prescreen=6, cost_model=counting
    )
    assert found.calls == 24 and len(counting.placements) == 24  # one cost-model call a step
    assert len(ranked) == 23  # every step after the start pre-screens six moves
    for priced, best in zip(counting.placements[1:], ranked, strict=True):
        assert np.array_equal(priced, best)
    assert found.measurement.step_time <= ref.measurement.step_time
    assert SIM.evaluate(graph, CLUSTER, found.decision).step_time == found.measurement.step_time


def test_prescreen_out_of_range_is_refused():
    from graphopt.decoders.search import MAX_PRESCREEN, search_placements

    graph = resolve_graphs("txl-tiny")[0]
    ref = reference_decision(graph, CLUSTER, "placement", SIM)
    for bad in (0, MAX_PRESCREEN + 1, True, 2.5):
        with pytest.raises(ValueError, match="prescreen must be an integer in 1..64"):
            search_placements(graph, CLUSTER, ref.decision, 4, prescreen=bad)
