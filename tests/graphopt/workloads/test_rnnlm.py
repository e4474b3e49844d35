"""Tests of graphopt.workloads.rnnlm."""

from __future__ import annotations

import pytest

from graphopt.workloads.rnnlm import rnnlm, rnnlm_param_count

from ._helpers import assert_valid_training_graph, forward_mask


def test_parameters_counted_once_in_the_unrolled_rnn() -> None:
    g = rnnlm(3, hidden=32, batch=4, vocab=50, num_steps=6)
    assert_valid_training_graph(g)
    assert g.param_bytes.sum() == 4 * rnnlm_param_count(3, 32, 50)
    assert g.metadata["params"] == rnnlm_param_count(3, 32, 50)
    # analytic: embedding + 3 LSTM layers + softmax weights and bias
    assert rnnlm_param_count(3, 32, 50) == 50 * 32 + 3 * 4 * 32 * (32 + 32 + 1) + 32 * 50 + 50


def test_structure_scales_with_layers_and_steps() -> None:
    small = rnnlm(2, hidden=16, batch=2, vocab=20, num_steps=3)
    deeper = rnnlm(4, hidden=16, batch=2, vocab=20, num_steps=3)
    longer = rnnlm(2, hidden=16, batch=2, vocab=20, num_steps=6)
    assert small.num_ops < deeper.num_ops and small.num_ops < longer.num_ops
    assert sum(t == "SparseSoftmaxCrossEntropyWithLogits" for t in longer.op_types) == 6
    assert sum(t == "ScatterSub" for t in small.op_types) == 1  # sparse embedding update


def test_default_flops_by_hand() -> None:
    g = rnnlm(2, num_steps=2)
    fwd = forward_mask(g)
    matmul = [i for i, t in enumerate(g.op_types) if t == "MatMul" and fwd[i]]
    lstm = 2 * 2 * (2 * 64 * 4096 * 8192)  # 2 steps x 2 layers, [64, 2H] x [2H, 4H]
    softmax = 2 * (2 * 64 * 2048 * 40_000)
    assert g.flops[matmul].sum() == lstm + softmax


def test_bad_sizes() -> None:
    with pytest.raises(ValueError, match="num_steps must be a positive integer"):
        rnnlm(2, num_steps=0)
