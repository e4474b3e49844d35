"""Tests of graphopt.importers.inductor: Inductor's kernels read after fusion (no code generation)
and mapped to the op names of the graph :func:`from_torch` imports."""

from __future__ import annotations

import pytest
import torch

from graphopt.importers.inductor import InductorGroups, inductor_groups, zoo_inductor_groups
from graphopt.importers.torch import from_torch


class Block(torch.nn.Module):
    """Linear -> GELU -> Linear -> + residual -> LayerNorm."""

    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(d, 4 * d)
        self.l2 = torch.nn.Linear(4 * d, d)
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(self.l2(torch.nn.functional.gelu(self.l1(x))) + x)


def _block() -> tuple[torch.nn.Module, torch.Tensor]:
    with torch.device("meta"):
        return Block(), torch.zeros(16, 32)


@pytest.mark.expensive  # Inductor lowers the block: seconds (CI runs it)
def test_block_forward_groups() -> None:
    model, x = _block()
    found = inductor_groups(model, x)
    graph = from_torch(model, x, name="block")
    assert found.op_names == list(graph.op_names)
    assert found.graphs == ["forward"]
    assert found.match_rate == 1.0 and not found.unmatched_ops and not found.unmatched_origins
    # matmuls stay library calls; the residual add is computed inside LayerNorm's kernel
    assert found.groups == [["addmm"], ["gelu"], ["addmm_1"], ["add", "native_layer_norm"]]
    assert found.reductions[-1] == ["native_layer_norm"]
    assert found.summary()["fused_groups"] == 1
    assert 0 < found.seconds < 120


def test_block_training_groups_stay_in_their_half() -> None:
    model, x = _block()
    found = inductor_groups(model, x, training=True)
    graph = from_torch(model, x, name="block", training=True)
    assert found.op_names == list(graph.op_names)
    assert found.graphs == ["forward", "backward"]
    assert found.match_rate == 1.0
    index = {name: i for i, name in enumerate(graph.op_names)}
    forward_ops = graph.metadata["forward_ops"]
    grouped = [name for group in found.groups for name in group]
    assert sorted(grouped) == sorted(graph.op_names)  # every op in exactly one group
    for group in found.groups:
        halves = {index[name] < forward_ops for name in group}
        assert len(halves) == 1, f"group {group} spans forward and backward"
    for matmul in ("addmm", "addmm_1", "mm", "mm_1", "mm_2"):
        assert [matmul] in found.groups
    # GELU's backward (erf, exp, muls, adds) is one kernel
    assert any({"erf", "exp"} <= set(group) and len(group) > 5 for group in found.groups)
    for group, reduced in zip(found.groups, found.reductions, strict=True):
        assert set(reduced) <= set(group)


def test_summary_counts() -> None:
    found = InductorGroups(
        groups=[["a", "b"], ["c"]],
        reductions=[["b"], []],
        op_names=["a", "b", "c", "d"],
        kernels=3,
        unmatched_ops=["d"],
    )
    assert found.match_rate == 0.75
    assert found.fused_groups == [["a", "b"]]
    summary = found.summary()
    assert summary["ops"] == 4 and summary["fused_groups"] == 1 and summary["unmatched_ops"] == 1


def test_bad_spec_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown zoo model"):
        zoo_inductor_groups("torch:nope")


@pytest.mark.expensive
def test_zoo_model_matches_its_graph() -> None:
    from graphopt.importers.zoo import build_zoo

    spec = "torch:wavenet?layers=3&stacks=1&residual=8&skip=16&classes=16&seq=64&batch=2"
    for training in (False, True):
        found = zoo_inductor_groups(spec, training=training)
        graph = build_zoo(spec, training=training)
        assert found.op_names == list(graph.op_names)
        assert found.match_rate > 0.9
        assert found.fused_groups
