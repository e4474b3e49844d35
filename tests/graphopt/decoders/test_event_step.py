from __future__ import annotations

import numpy as np
import pytest

from graphopt.baselines._costs import op_times
from graphopt.baselines.placement import PLACERS
from graphopt.decoders.event_step import (
    ANCHOR,
    FEATURES,
    NUM_EVENT_FEATURES,
    EventHead,
    decode_events,
    event_graph,
)
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.workloads import get_graph

GRAPHS = ("wavenet-tiny", "pipedream:resnet50", "random-sp-200-s0")


@pytest.mark.parametrize("cluster_name", ["v100-nvlink-4", "v100-pcie-4", "v100-nvlink-2"])
@pytest.mark.parametrize("graph_name", GRAPHS)
def test_a_given_placement_takes_exactly_its_simulated_step_time(graph_name, cluster_name):
    """The twin of the event loop is the simulator itself: same placement, same step time."""
    graph, cluster = get_graph(graph_name), get_cluster(cluster_name)
    eg = event_graph(graph, cluster)
    rng = np.random.default_rng(1)
    placements = rng.integers(0, cluster.num_devices, (6, graph.num_ops))
    placements[0] = 0
    placements[1] = PLACERS["heft"](graph, cluster)
    simulated = Simulator().prepare(graph, cluster).evaluate_batch(placements).step_time
    decoded = [decode_events(eg, given=p) for p in placements]
    for episode, p, step in zip(decoded, placements, simulated, strict=True):
        assert episode.makespan == pytest.approx(step, rel=1e-12)
        assert np.array_equal(episode.placement, p)


@pytest.mark.parametrize("graph_name", GRAPHS)
def test_a_rule_decodes_a_placement_whose_makespan_the_simulator_confirms(graph_name):
    graph, cluster = get_graph(graph_name), get_cluster("v100-nvlink-4")
    anchor = PLACERS["m-etf"](graph, cluster)
    eg = event_graph(graph, cluster, anchor)
    theta = np.zeros(NUM_EVENT_FEATURES)
    theta[FEATURES.index("eft")] = -1.0
    theta[FEATURES.index("bytes")] = -0.5
    episode = decode_events(eg, theta=theta, record=True)
    step = Simulator().prepare(graph, cluster).evaluate_batch(episode.placement[None]).step_time[0]
    assert episode.makespan == pytest.approx(step, rel=1e-12)
    # every op decided exactly once; sources first, every other op when one of its producers
    # (decided before it) finishes
    n = graph.num_ops
    assert sorted(episode.ops.tolist()) == list(range(n))
    when = np.empty(n, dtype=np.int64)
    when[episode.ops] = np.arange(n)
    first_producer = np.full(n, n)
    np.minimum.at(first_producer, graph.edge_dst, when[graph.edge_src])
    has_input = np.bincount(graph.edge_dst, minlength=n) > 0
    assert (first_producer[has_input] < when[has_input]).all()
    assert when[~has_input].max() < (~has_input).sum()


def test_the_anchor_rule_is_the_anchor_placement_and_the_features_are_normalised():
    graph, cluster = get_graph("pipedream:resnet50"), get_cluster("v100-nvlink-4")
    anchor = PLACERS["heft"](graph, cluster)
    theta = np.zeros(NUM_EVENT_FEATURES)
    theta[ANCHOR] = 1.0
    episode = decode_events(event_graph(graph, cluster, anchor), theta=theta, record=True)
    assert np.array_equal(episode.placement, anchor)
    feats = episode.feats
    assert np.array_equal(
        feats[np.arange(graph.num_ops), :, ANCHOR].argmax(axis=1), anchor[episode.ops]
    )
    assert (feats[..., ANCHOR].sum(axis=1) == 1).all()
    for name in ("eft", "arrival", "backlog", "pending", "load", "speed"):
        f = feats[..., FEATURES.index(name)]
        assert (f >= 0).all()
        assert np.allclose(f.min(axis=1), 0.0)  # relative to the best device
    moved = feats[..., FEATURES.index("bytes")]
    assert ((moved >= 0) & (moved <= 1)).all()
    # the anchor's own schedule: slack and wait the same for every device, some op critical
    slack, wait = feats[..., FEATURES.index("slack")], feats[..., FEATURES.index("wait")]
    assert (slack >= 0).all() and (wait >= 0).all()
    assert (slack == slack[:, :1]).all() and (wait == wait[:, :1]).all()
    assert (slack[:, 0] == 0).any()
    idle = feats[..., FEATURES.index("idle")]
    assert ((idle >= 0) & (idle <= 1)).all()
    # while v runs on its anchor device, that device is busy: idle there is less than 1
    runs = op_times(graph, cluster)[episode.ops, anchor[episode.ops]] > 0
    assert runs.sum() > graph.num_ops // 2
    assert (idle[np.arange(graph.num_ops), anchor[episode.ops]][runs] < 1).all()


def test_the_first_decisions_see_an_idle_cluster():
    graph, cluster = get_graph("wavenet-tiny"), get_cluster("v100-pcie-4")
    episode = decode_events(
        event_graph(graph, cluster), given=np.zeros(graph.num_ops, np.int64), record=True
    )
    first = episode.feats[0]
    for name in ("arrival", "backlog", "pending", "load", "bytes"):  # nothing placed, moved
        assert (first[:, FEATURES.index(name)] == 0).all()


def test_bad_input_is_refused_with_what_was_wrong():
    graph = get_graph("wavenet-tiny")
    with pytest.raises(ValueError, match="route: via-host"):
        event_graph(graph, get_cluster("accel-host"))
    eg = event_graph(graph, get_cluster("v100-nvlink-4"))
    with pytest.raises(ValueError, match="exactly one of head"):
        decode_events(eg)
    with pytest.raises(ValueError, match="exactly one of head"):
        decode_events(eg, theta=np.zeros(NUM_EVENT_FEATURES), given=np.zeros(graph.num_ops))
    with pytest.raises(ValueError, match="weights"):
        decode_events(eg, theta=np.zeros(3))
    with pytest.raises(ValueError, match="device indices"):
        decode_events(eg, given=np.full(graph.num_ops, 9))
    with pytest.raises(ValueError, match="anchor"):
        event_graph(graph, get_cluster("v100-nvlink-4"), np.zeros(3, np.int64))


def test_a_hidden_layer_that_passes_the_features_through_decodes_as_the_linear_rule():
    graph, cluster = get_graph("random-sp-200-s0"), get_cluster("v100-nvlink-4")
    eg = event_graph(graph, cluster, PLACERS["heft"](graph, cluster))
    theta = np.linspace(-1.0, 1.0, NUM_EVENT_FEATURES)
    eye = np.eye(NUM_EVENT_FEATURES)
    hidden = EventHead(
        np.zeros(NUM_EVENT_FEATURES),
        np.concatenate([eye, -eye], axis=1),
        np.zeros(2 * NUM_EVENT_FEATURES),
        np.concatenate([theta, -theta]),  # relu(f) - relu(-f) = f
    )
    linear = decode_events(eg, theta=theta)
    assert np.array_equal(decode_events(eg, hidden).placement, linear.placement)
    with pytest.raises(ValueError, match="head weights"):
        decode_events(eg, EventHead(theta, np.zeros((3, 2)), np.zeros(2), np.zeros(2)))


def test_affinity_points_at_the_devices_of_the_consumers():
    graph, cluster = get_graph("pipedream:resnet50"), get_cluster("v100-nvlink-4")
    anchor = PLACERS["m-etf"](graph, cluster)
    episode = decode_events(
        event_graph(graph, cluster, anchor), theta=np.eye(NUM_EVENT_FEATURES)[ANCHOR], record=True
    )
    affinity = episode.feats[..., FEATURES.index("affinity")]
    assert ((affinity >= 0) & (affinity <= 1)).all()
    succ_ptr, succ_dst = graph.successors_csr
    for k in range(0, graph.num_ops, 7):
        v = episode.ops[k]
        consumers = succ_dst[succ_ptr[v] : succ_ptr[v + 1]]
        if len(consumers) == 0:
            assert (affinity[k] == 0).all()
            continue
        # each consumer is decided on, or anchored to, a device whose affinity is positive
        for w in consumers:
            if graph.edge_bytes[succ_ptr[v] + list(consumers).index(w)] > 0:
                assert affinity[k, anchor[w]] > 0
