"""The engine's array bundles: shapes and dtypes as documented, and the ``succ_to_pred`` builder."""

from __future__ import annotations

import numpy as np
from conftest import make_graph, unit_cluster

from graphopt.sim import PreparedGraph, engine
from graphopt.sim.arrays import CoreResult, GraphArrays, Workspace, succ_to_pred


def test_workspace_allocate_shapes_and_dtypes() -> None:
    n, e = 5, 7
    ws = Workspace.allocate(n, e)
    expected = {
        "op_int": ((7, n + 1), np.int32),
        "op_key": ((2, n + 1), np.int64),
        "op_float": ((4, n + 1), np.float64),
        "edge_int": ((10, e + 1), np.int32),
        "edge_float": ((7, e + 1), np.float64),
        "edge_pair": ((2, e + 1, 2), np.int32),
        "op_rec": ((n + 1, 4), np.int32),
        "slot_int": ((n + e + 2, 2), np.int32),
        "slot_float": ((n + e + 2,), np.float64),
    }
    assert set(Workspace._fields) == set(expected)
    for name, (shape, dtype) in expected.items():
        arr = getattr(ws, name)
        assert arr.shape == shape, name
        assert arr.dtype == dtype, name


def test_workspace_allocate_room_for_routed_transfers() -> None:
    # routed through a host, a decision may make two transfers per edge: the per-transfer rows
    # and the memory slots grow, the per-edge pairs do not
    n, e = 5, 7
    ws = Workspace.allocate(n, e, 2 * e)
    assert ws.edge_int.shape == (10, 2 * e + 1) and ws.edge_float.shape == (7, 2 * e + 1)
    assert ws.edge_pair.shape == (2, e + 1, 2)
    assert ws.slot_int.shape == (n + 2 * e + 2, 2) and ws.slot_float.shape == (n + 2 * e + 2,)


def test_workspace_allocate_empty_graph() -> None:
    ws = Workspace.allocate(0, 0)
    assert ws.op_int.shape == (7, 1)
    assert ws.slot_float.shape == (2,)


def test_succ_to_pred_inverts_the_permutation() -> None:
    pred_edge_ids = np.array([2, 0, 3, 1])
    pos = succ_to_pred(pred_edge_ids)
    assert pos.dtype == np.int32
    np.testing.assert_array_equal(pos[pred_edge_ids], np.arange(4))
    assert succ_to_pred(np.array([], dtype=np.int64)).shape == (0,)


def test_prepared_graph_arrays_match_the_documented_layout() -> None:
    graph = make_graph(
        [("a", 2, 1, 1, 0), ("b", 1, 1, 1, 0), ("c", 1, 1, 1, 0)],
        [("a", "b", 1.0), ("a", "c", 2.0), ("b", "c", 3.0)],
    )
    cluster = unit_cluster(2)
    g = PreparedGraph(graph, cluster).engine_arrays
    assert isinstance(g, GraphArrays)
    n, e, d = 3, 3, 2
    c = int(g.dev_class.max()) + 1
    for name in ("succ_ptr", "pred_ptr"):
        assert getattr(g, name).shape == (n + 1,) and getattr(g, name).dtype == np.int32
    for name in ("succ_dst", "succ_to_pred"):
        assert getattr(g, name).shape == (e,) and getattr(g, name).dtype == np.int32
    assert g.edge_bytes.shape == (e,) and g.edge_bytes.dtype == np.float64
    for name in ("flops", "nbytes", "out_bytes", "param_bytes"):
        assert getattr(g, name).shape == (n,) and getattr(g, name).dtype == np.float64
    for name in ("op_time", "op_meas"):
        assert getattr(g, name).shape == (n, c) and getattr(g, name).dtype == np.float64
    assert g.dev_class.shape == (d,) and g.dev_class.dtype == np.int64
    for name in ("peak", "bw", "launch", "capacity"):
        assert getattr(g, name).shape == (d,) and getattr(g, name).dtype == np.float64
    for name in ("link_bw", "link_lat"):
        assert getattr(g, name).shape == (d, d) and getattr(g, name).dtype == np.float64
    # the default model options, as scalars
    assert (g.contention, g.host, g.per_consumer, g.charge_copies) == (True, -1, False, True)


def test_simulate_core_returns_core_result_fields_in_order() -> None:
    graph = make_graph(
        [("a", 2, 1, 1, 0), ("b", 1, 1, 1, 0), ("c", 1, 1, 1, 0)],
        [("a", "b", 1.0), ("a", "c", 2.0), ("b", "c", 3.0)],
    )
    prepared = PreparedGraph(graph, unit_cluster(2))
    placement = np.array([0, 1, 0])
    zeros = np.zeros(3, dtype=np.int64)
    out = CoreResult(
        *engine.simulate_core(
            tuple(prepared.engine_arrays), placement, zeros, zeros, tuple(prepared.workspace())
        )
    )
    assert out.status == engine.STATUS_OK and out.culprit == -1
    assert out.busy.shape == (2,) and out.peak_mem.shape == (2,)
    assert out.kernel_of.dtype == np.int32 and out.kernel_of.shape == (3,)
    assert out.k_start.dtype == np.float64 and out.k_start.shape == (3,)
    # a -> b crosses 0 -> 1 and b -> c crosses back: two transfers
    assert out.t_op.dtype == np.int32 and out.t_op.shape == (2,)
    np.testing.assert_array_equal(out.t_src, [0, 1])
    np.testing.assert_array_equal(out.t_dst, [1, 0])
    assert out.step == out.k_end.max()
