"""Op classes: every source's op types classified, unknown ones opaque, the core ATen set covered."""

from __future__ import annotations

import pytest

from graphopt.op_classes import OP_CLASSES, OP_TYPE_CLASSES, check_class, classify
from graphopt.workloads import resolve_graphs


@pytest.mark.parametrize(
    ("op_type", "expected"),
    [
        ("MatMul", "contraction"),
        ("Conv2DBackpropFilter", "contraction"),
        ("Relu", "elementwise"),
        ("FusedBatchNormV3", "reduction"),
        ("Transpose", "data_movement"),
        ("VariableV2", "source"),
        ("aten.add.Tensor", "elementwise"),
        ("convolution_backward", "contraction"),
        ("native_layer_norm", "reduction"),
        ("view", "data_movement"),
        ("Conv2d", "opaque"),  # a PipeDream layer: measured, several kernels already
        ("ReLUBackward", "elementwise"),
        ("my_custom_op", "opaque"),
    ],
)
def test_classify(op_type: str, expected: str) -> None:
    assert classify(op_type) == expected


def test_every_table_entry_is_a_class() -> None:
    assert set(OP_TYPE_CLASSES.values()) <= set(OP_CLASSES)
    with pytest.raises(ValueError, match="unknown op class 'fused'"):
        check_class("fused", "here")


def test_built_in_workloads_have_no_opaque_compute() -> None:
    """Every op type of the built-in families is known: opaque would silently forbid fusion."""
    unknown = {
        t for g in resolve_graphs("suite:default") for t in g.op_types if t not in OP_TYPE_CLASSES
    }
    assert not unknown


def test_core_aten_op_set_is_covered() -> None:
    torch = pytest.importorskip("torch")
    core = set()
    for full in torch._C._dispatch_get_all_op_names():  # every registered op, loaded or not
        if not full.startswith("aten::"):
            continue
        name, _, overload = full.removeprefix("aten::").partition(".")
        try:
            op = getattr(getattr(torch.ops.aten, name), overload or "default")
        except (AttributeError, RuntimeError):
            continue
        if torch.Tag.core in op.tags:
            core.add(name)
    assert len(core) > 100
    assert sorted(core - set(OP_TYPE_CLASSES)) == []
