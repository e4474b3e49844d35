"""Fitting the per-op model: what it trains on and what it refuses (its predictions are tested
in tests/graphopt/test_op_model.py)."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.costmodel.op_fit import fit_op_model, measured_devices, op_rows
from graphopt.graph import CompGraph, Op
from graphopt.hardware import Device

DEVICE = Device("cpu0", "k", 1e11, 2e10, 1e10, 1e-6)


def graph(n_ops: int, family: str, measured: bool = True) -> CompGraph:
    ops = [
        Op(f"r{k}", "relu", bytes_accessed=8e3 * (k + 1), output_bytes=4e3 * (k + 1),
           measured={"k": 1e-6 * (k + 2)} if measured else {})
        for k in range(n_ops)
    ]  # fmt: skip
    ops.append(Op("x", "Placeholder", measured={"k": 1.0}))  # a source op: never trained on
    return CompGraph.build(family, ops, [], metadata={"zoo": family})


def test_rows_skip_sources_and_unmeasured():
    g = graph(5, "a")
    rows = op_rows([g, graph(3, "b", measured=False)], [DEVICE], {"relu": 0}, {})
    assert len(rows.seconds) == 5 and set(rows.family) == {"a"}
    assert np.all(rows.x[:, 0] == 0)
    assert rows.base == pytest.approx(np.maximum(8e3 * np.arange(1, 6) / 2e10, 1e-9) + 1e-6)


def test_refusals():
    other = Device("gpu0", "other", 1e12, 1e11, 1e10, 1e-6)
    with pytest.raises(ValueError, match="no graph has measured times for the device kind"):
        measured_devices([graph(5, "a")], [other])
    with pytest.raises(ValueError, match="only 5 measured op"):
        fit_op_model([graph(5, "a")], [DEVICE])
    with pytest.raises(ValueError, match="rounds must be an integer in 1..10000"):
        fit_op_model([graph(30, "a")], [DEVICE], rounds=0)


def test_fit_is_deterministic_and_keeps_measured_types_only():
    graphs = [graph(30, "a"), graph(25, "b")]
    one, two = (fit_op_model(graphs, [DEVICE], rounds=20) for _ in range(2))
    assert one.booster_text == two.booster_text
    assert one.types == ("relu",) and one.kinds == ("k",)
    assert one.metadata["families"] == ["a", "b"] and one.metadata["ops"] == 55
