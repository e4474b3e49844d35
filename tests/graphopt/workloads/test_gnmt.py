"""Tests of graphopt.workloads.gnmt."""

from __future__ import annotations

import pytest

from graphopt.workloads import get_graph
from graphopt.workloads.gnmt import gnmt, gnmt_param_count

from ._helpers import assert_valid_training_graph


def test_small_gnmt_structure_and_parameters() -> None:
    g = gnmt(4, hidden=16, batch=2, vocab=30, src_len=3, tgt_len=4)
    assert_valid_training_graph(g)
    assert g.param_bytes.sum() == 4 * gnmt_param_count(4, 16, 30)
    names = set(g.op_names)
    assert {"encoder/layer_0/fw/t0/MatMul", "encoder/layer_0/bw/t2/MatMul"} <= names
    # residual connections from the third layer on, in encoder and decoder
    assert "encoder/layer_2/t1/residual" in names and "encoder/layer_1/t1/residual" not in names
    assert "decoder/layer_3/t1/residual" in names and "decoder/layer_1/t1/residual" not in names
    # one attention per target step, its context feeds every decoder layer
    assert sum(n.endswith("/attention/t3/Softmax") for n in names) == 1
    ctx = g.index["decoder/attention/t2/Squeeze"]
    readers = {g.op_names[d] for s, d in zip(g.edge_src, g.edge_dst, strict=True) if s == ctx}
    assert readers == {f"decoder/layer_{k}/t2/ConcatV2" for k in range(4)}


def test_needs_two_layers() -> None:
    with pytest.raises(ValueError, match="num_layers >= 2"):
        gnmt(1)


@pytest.mark.expensive  # seconds to build; the structure: test_small_gnmt_structure_and_parameters
def test_gnmt8_is_the_80k_graph() -> None:
    g = gnmt(8, name="gnmt-8-test")  # its build time: bench/bench_sim.py, not a test
    assert g.num_ops >= 80_000
    assert_valid_training_graph(g)
    assert g.param_bytes.sum() == 4 * gnmt_param_count(8, 1024, 32_000)


@pytest.mark.expensive
@pytest.mark.parametrize(
    ("name", "low", "high"), [("gnmt-2", 20_000, 35_000), ("gnmt-4", 35_000, 55_000)]
)
def test_gnmt_sizes(name: str, low: int, high: int) -> None:
    g = get_graph(name)
    assert low <= g.num_ops <= high
    assert_valid_training_graph(g)
