from __future__ import annotations

import numpy as np
import pytest
from helpers_baselines import chain_of, line_cluster, training_graph

from graphopt.baselines.contiguous import build_chain
from graphopt.baselines.pipedream_planner import boundary_times, cut_bytes, pipedream_planner
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster


def test_cut_bytes_and_boundary_times_by_hand():
    # Group edges 0 -> 2 (5 bytes), 1 -> 2 (2), and the gradient 2 -> 0 (6).
    chain = build_chain(training_graph(), line_cluster(1e12))
    forward, backward = cut_bytes(chain)
    assert forward.tolist() == [0.0, 5.0, 7.0, 0.0]
    assert backward.tolist() == [0.0, 6.0, 6.0, 0.0]
    # Forward over 0 -> 1 (1 byte/s, 0.25 s), gradients back over 1 -> 0 (2 bytes/s, 0.5 s).
    base = line_cluster(1e12, 1e12)
    c = Cluster(
        "asym",
        base.devices,
        np.array([[np.inf, 1.0], [2.0, np.inf]]),
        np.array([[0.0, 0.25], [0.5, 0.0]]),
    )
    times = boundary_times(chain, c, np.array([0, 1]))
    assert times[0].tolist() == [0.0] * 4
    assert times[1].tolist() == [0.0, 0.25 + 5.0 + 0.5 + 3.0, 0.25 + 7.0 + 0.5 + 3.0, 0.0]


@pytest.mark.parametrize(
    ("nbytes", "expected"),
    [
        # A cut costs 0.5 s: stages 3 | 3, slowest 3.
        (0.5, [0, 0, 0, 1]),
        # A cut costs 4 s: max(3, 4, 3) = 4 still beats one stage (6); Tarnawski's max-load, which
        # adds transfers to compute, keeps one stage here (test_tarnawski).
        (4.0, [0, 0, 0, 1]),
        # A cut costs 7 s: one stage.
        (7.0, [0, 0, 0, 0]),
    ],
)
def test_pipedream_planner_by_hand(nbytes, expected):
    assert pipedream_planner(chain_of(nbytes), line_cluster(1e12, 1e12)).tolist() == expected


def test_stages_go_to_the_fastest_devices_first():
    # Device 1 is twice as fast: on it alone the chain takes 3 s; adding device 0 for the last
    # op (3 s there) cannot do better, so the fewer stages win and device 0 stays idle.
    assert pipedream_planner(chain_of(0.0), line_cluster(1e12, 2e12)).tolist() == [1, 1, 1, 1]


def test_empty_graph():
    empty = CompGraph.build("empty", [], [])
    assert pipedream_planner(empty, line_cluster(1e12)).tolist() == []
