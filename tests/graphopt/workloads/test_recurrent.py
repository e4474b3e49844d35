"""Tests of graphopt.workloads.recurrent: the LSTM cell and unrolled layers."""

from __future__ import annotations

import collections

from graphopt.workloads import ops
from graphopt.workloads.backward import add_backward
from graphopt.workloads.builder import GraphBuilder
from graphopt.workloads.recurrent import lstm_layer, lstm_param_count, stacked_lstm


def test_lstm_cell_ops_and_flops() -> None:
    b = GraphBuilder("cell")
    xs = [ops.placeholder(b, (8, 32), "x")]
    lstm_layer(b, xs, 64, scope="lstm")
    g = b.build()
    step = [t for n, t in zip(g.op_names, g.op_types, strict=True) if n.startswith("lstm/t0/")]
    assert len(step) == 14
    assert collections.Counter(step) == {
        "ConcatV2": 1,
        "MatMul": 1,
        "BiasAdd": 1,
        "Split": 1,
        "AddV2": 2,
        "Sigmoid": 3,
        "Tanh": 2,
        "Mul": 3,
    }
    assert g.flops[g.index["lstm/t0/MatMul"]] == 2 * 8 * (32 + 64) * 4 * 64
    assert g.param_bytes.sum() == 4 * lstm_param_count(32, 64)


def test_unrolled_weights_counted_once_and_steps_grouped() -> None:
    b = GraphBuilder("unrolled")
    xs = [ops.placeholder(b, (4, 16), f"x{t}") for t in range(5)]
    out = stacked_lstm(b, xs, 16, 2, scope="rnn", residual_from=1)
    loss = ops.reduce(b, "Mean", ops.add_n(b, out), (0, 1))
    add_backward(b, loss)
    g = b.build()
    assert g.param_bytes.sum() == 4 * 2 * lstm_param_count(16, 16)
    assert g.colocation[g.index["rnn/layer_1/t3/MatMul"]] == "rnn/layer_1/t3"
    assert g.colocation[g.index["rnn/layer_1/kernel"]] == "rnn/layer_1/t0"
    assert g.layer[g.index["rnn/layer_1/t3/MatMul"]] == "rnn/layer_1"
    assert "rnn/layer_1/t2/residual" in g.index and "rnn/layer_0/t2/residual" not in g.index
    # one update per weight; the 5 per-step gradients are accumulated as they arrive
    kernel_updates = [n for n in g.op_names if n.startswith("train/update_rnn/layer_0/kernel")]
    assert len(kernel_updates) == 1
    acc = [n for n in g.op_names if n.startswith("gradients/rnn/layer_0/kernel/accumulate")]
    assert len(acc) == 4 and "gradients/rnn/layer_0/kernel/AddN" not in g.index
