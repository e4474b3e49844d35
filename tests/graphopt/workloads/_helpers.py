"""Checks shared by the workload tests."""

from __future__ import annotations

import numpy as np

from graphopt.graph import CompGraph

SINK_TYPES = {
    "Mean",
    "StopGradient",
    "ApplyGradientDescent",
    "ScatterSub",
    "ApplyAdam",
    "SparseApplyAdam",
    "ApplyMomentum",
    "SparseApplyMomentum",
}


def assert_valid_training_graph(g: CompGraph) -> None:
    """A well-formed training graph: topologically ordered edges, finite nonnegative costs, every
    op's ``bytes_accessed`` covering what it reads over its edges plus what it writes (except the
    row-sparse gather and embedding updates, and reshapes, which alias their input), and every
    sink a loss, an update or a cached output."""
    assert g.num_ops > 0
    assert np.all(g.edge_src < g.edge_dst)
    for arr in (g.flops, g.bytes_accessed, g.output_bytes, g.param_bytes, g.edge_bytes):
        assert np.all(np.isfinite(arr)) and np.all(arr >= 0)
    assert g.param_bytes.sum() > 0
    reads = np.bincount(g.edge_dst, weights=g.edge_bytes, minlength=g.num_ops)
    sparse = np.array(
        [
            t in ("GatherV2", "ScatterSub", "Reshape", "ExpandDims", "Squeeze")
            or t.startswith("SparseApply")
            for t in g.op_types
        ]
    )
    dense_ok = g.bytes_accessed + 1e-6 >= reads + g.output_bytes
    assert np.all(dense_ok | sparse)
    out_deg = np.bincount(g.edge_src, minlength=g.num_ops)
    sink_types = {g.op_types[i] for i in np.flatnonzero(out_deg == 0)}
    assert sink_types <= SINK_TYPES, sink_types - SINK_TYPES
    # every trainable variable the loss reads has exactly one update op
    variables = [i for i, t in enumerate(g.op_types) if t == "VariableV2"]
    updates = [i for i, n in enumerate(g.op_names) if n.startswith("train/update_")]
    assert 0 < len(updates) <= len(variables)


def forward_mask(g: CompGraph) -> np.ndarray:
    """Ops of the forward pass (not gradients, not updates)."""
    return np.array(
        [not (n.startswith("gradients/") or n.startswith("train/")) for n in g.op_names]
    )
