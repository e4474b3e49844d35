from __future__ import annotations

import numpy as np
import pytest

from graphopt.encoding import (
    GRAPH_FEATURES,
    MAX_EDGES,
    MAX_OPS,
    NUM_OP_TYPES,
    OP_FEATURES,
    check_sizes,
    encode,
    observation_bytes,
    observation_space,
    op_type_id,
)
from graphopt.hardware import get_cluster
from graphopt.workloads import get_graph


def test_encoding_shapes_padding_and_values():
    graph = get_graph("gnmt-tiny")
    cluster = get_cluster("v100-nvlink-4")
    n, e = graph.num_ops, graph.num_edges
    enc = encode(graph, cluster, max_ops=n + 7, max_edges=e + 5)
    obs = enc.observation
    assert observation_space(n + 7, e + 5).contains(obs)
    assert obs["op_features"].shape == (n + 7, len(OP_FEATURES))
    assert obs["graph_features"].shape == (len(GRAPH_FEATURES),)
    # real values never equal the padding values
    assert (obs["op_features"][:n] >= 0).all() and (obs["op_features"][n:] == -1).all()
    assert (obs["op_type"][:n] >= 1).all() and (obs["op_type"][n:] == 0).all()
    assert obs["op_mask"].sum() == n and obs["counts"].tolist() == [n, e]
    assert (obs["edge_index"][:, :e] >= 0).all() and (obs["edge_index"][:, e:] == -1).all()
    np.testing.assert_array_equal(obs["edge_index"][0, :e], graph.edge_src)
    assert obs["device_mask"].sum() == 4
    # position feature runs 0..1 in topological order
    assert obs["op_features"][0, 8] == 0.0 and obs["op_features"][n - 1, 8] == pytest.approx(1.0)
    assert not obs["op_features"].flags.writeable


def test_op_type_ids_are_stable():
    assert op_type_id("MatMul") == op_type_id("MatMul")
    assert 1 <= op_type_id("Conv2D") < NUM_OP_TYPES


def test_too_large_graph_is_a_clear_error():
    graph = get_graph("gnmt-tiny")
    with pytest.raises(
        ValueError,
        match=rf"has {graph.num_ops:,} ops but max_ops is 10; pass max_ops >= {graph.num_ops}",
    ):
        encode(graph, get_cluster("v100-nvlink-2"), max_ops=10, max_edges=10_000)
    with pytest.raises(ValueError, match="edges but max_edges is 3"):
        encode(graph, get_cluster("v100-nvlink-2"), max_ops=10_000, max_edges=3)


def test_observation_memory_is_as_documented():
    # 61 bytes per op slot and 20 per edge slot, plus the small fixed arrays
    fixed = observation_bytes(0, 0)
    assert observation_bytes(1000, 0) - fixed == 61_000
    assert observation_bytes(0, 1000) - fixed == 20_000
    assert observation_bytes(20_000, 80_000) < 3_000_000


def test_sizes_beyond_the_bounds_are_refused_before_any_array():
    check_sizes(MAX_OPS, MAX_EDGES)
    with pytest.raises(ValueError, match=r"max_ops 1,000,000,000 is outside 0\.\.1,048,576"):
        observation_space(10**9, 4)
    with pytest.raises(ValueError, match=r"max_edges 4,000,000,000 is outside 0\.\.8,388,608"):
        observation_space(1000, 4 * 10**9)
    graph, cluster = get_graph("txl-tiny"), get_cluster("v100-nvlink-2")
    with pytest.raises(ValueError, match="max_ops 2,000,000 is outside"):
        encode(graph, cluster, 2 * 10**6, 4)
