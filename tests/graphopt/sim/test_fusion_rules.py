"""The fusion rules 2a-2d on hand-made kernels, and the static fusion mask."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster
from graphopt.sim import simulate
from graphopt.sim.fusion_rules import FusionRules, fusion_mask
from graphopt.typing import Decision


def chain(*types: str) -> CompGraph:
    ops = [
        Op(f"{t.lower()}{i}", t, flops=1e6, bytes_accessed=1e6, output_bytes=1e5)
        for i, t in enumerate(types)
    ]
    edges = [(ops[i].name, ops[i + 1].name, 1e5) for i in range(len(ops) - 1)]
    return CompGraph.build("chain", ops, edges)


def reason(graph: CompGraph, fusion: list[int], placement: list[int] | None = None) -> str:
    cluster = get_cluster("v100-nvlink-2")
    place = np.zeros(graph.num_ops, np.int64) if placement is None else np.array(placement)
    m = simulate(graph, cluster, Decision(placement=place, fusion=np.array(fusion)))
    return "" if m.valid else m.reason


def test_matmul_with_its_elementwise_epilogue_is_legal() -> None:
    g = chain("MatMul", "BiasAdd", "Relu")
    assert reason(g, [1, 1, 0]) == ""


@pytest.mark.parametrize(
    ("types", "fusion", "rule"),
    [
        (("Placeholder", "Relu"), [1, 0], "rule 2a"),  # a source never fuses
        (("Relu", "Send"), [1, 0], "rule 2a"),  # an opaque (unknown) op never fuses
        (("MatMul", "MatMul"), [1, 0], "rule 2b"),  # two contractions
        (("MatMul", "Relu", "Sum"), [1, 1, 0], "rule 2b"),  # a contraction and a reduction
        (("MatMul", "Transpose"), [1, 0], "rule 2b"),  # data movement beside a contraction
    ],
)
def test_each_rule_names_the_ops(types: tuple[str, ...], fusion: list[int], rule: str) -> None:
    g = chain(*types)
    text = reason(g, fusion)
    assert rule in text and (repr(g.op_names[0]) in text or repr(g.op_names[-1]) in text)


def test_fusion_never_crosses_devices() -> None:
    g = chain("Relu", "Tanh")
    assert reason(g, [1, 0], [0, 0]) == ""
    text = reason(g, [1, 0], [0, 1])
    assert "rule 2c" in text and "'relu0'" in text


def test_kernel_inputs_and_outputs_are_bounded() -> None:
    """100 inputs into one AddN, fused with its Relu: 100 inputs + 1 output > 96."""
    ops = [Op(f"x{i}", "Relu", output_bytes=1.0) for i in range(100)]
    ops += [Op("sum", "AddN"), Op("out", "Relu")]
    edges = [(f"x{i}", "sum", 1.0) for i in range(100)] + [("sum", "out", 1.0)]
    g = CompGraph.build("wide", ops, edges)
    fusion = np.zeros(g.num_ops, np.int64)
    fusion[g.index["sum"]] = 1
    assert "rule 2d" in reason(g, fusion.tolist()) and "101 inputs plus outputs" in reason(
        g, fusion.tolist()
    )
    assert FusionRules(g, max_io=101).violation(np.zeros(g.num_ops, np.int64), fusion)[0] == 0


def test_mask_blocks_the_bits_that_are_illegal_alone() -> None:
    g = chain("Placeholder", "MatMul", "BiasAdd", "MatMul", "Transpose", "Relu", "Sum")
    mask = dict(zip(g.op_names, fusion_mask(g).tolist(), strict=True))
    assert mask == {
        "placeholder0": 0,  # a source
        "matmul1": 1,  # into its elementwise epilogue
        "biasadd2": 1,  # elementwise into a contraction: its prologue
        "matmul3": 0,  # data movement after a contraction
        "transpose4": 1,
        "relu5": 1,
        "sum6": 0,  # no consumer
    }
    # any single unmasked bit alone is legal on one device
    for i in np.flatnonzero(fusion_mask(g)):
        bits = np.zeros(g.num_ops, np.int64)
        bits[i] = 1
        assert reason(g, bits.tolist()) == ""


def test_reductions_may_share_a_kernel() -> None:
    """A layer norm's mean and variance are one kernel in Inductor; a contraction never joins."""
    g = chain("Mean", "Sub", "Mean", "Relu")
    assert reason(g, [1, 1, 1, 0]) == ""
    assert "rule 2b" in reason(chain("Mean", "Relu", "MatMul"), [1, 1, 0])
