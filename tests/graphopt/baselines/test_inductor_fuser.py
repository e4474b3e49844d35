"""Tests of the "inductor" fuser: Inductor's kernels as fusion bits, and their legality under the
fusion rules on every model of the zoo."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.baselines.inductor import (
    drop_illegal,
    groups_to_bits,
    inductor_bits,
    inductor_fusion,
    zoo_spec,
)
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster
from graphopt.sim import simulate
from graphopt.sim.fusion_rules import RULE_HEROES, FusionRules
from graphopt.typing import Decision

MESSAGE = r"the inductor fuser needs a graph imported from PyTorch \(torch:NAME\); 't' was not"


def _graph(metadata: dict | None = None) -> CompGraph:
    """a -> b -> c, b -> d, x -> c (elementwise ops)."""
    ops = [Op(name, "Add", flops=1e6, bytes_accessed=2e6, output_bytes=1e6) for name in "abcdx"]
    edges = [("a", "b", 1e6), ("b", "c", 1e6), ("b", "d", 1e6), ("x", "c", 1e6)]
    return CompGraph.build("t", ops, edges, metadata=metadata)


def _bits(graph: CompGraph, bits: np.ndarray) -> dict[str, int]:
    return dict(zip(graph.op_names, bits.tolist(), strict=True))


def test_non_pytorch_graph_is_refused() -> None:
    graph, cluster = _graph(), get_cluster("v100-nvlink-4")
    with pytest.raises(ValueError, match=MESSAGE):
        inductor_fusion(graph, cluster, Decision())
    # imported from PyTorch, but not from the zoo: nothing to rebuild the model from
    with pytest.raises(ValueError, match=MESSAGE):
        inductor_fusion(_graph({"source": "torch.export"}), cluster, Decision())


def test_zoo_spec_from_metadata() -> None:
    meta = {"source": "torch.export", "zoo": "resnet", "zoo_args": {"depth": 18}, "training": True}
    spec, training = zoo_spec(_graph(meta))
    assert spec == "torch:resnet?depth=18" and training
    with pytest.raises(ValueError, match="unknown zoo model"):
        zoo_spec(_graph({**meta, "zoo": "nope"}))


def test_groups_to_bits_sets_only_bits_inside_one_group() -> None:
    g = _graph()
    # {a, b, c}: b also feeds d outside the group, so b -> c is not expressed
    bits, stats = groups_to_bits(g, [["a", "b", "c"], ["d"], ["x"]])
    assert _bits(g, bits) == {"a": 1, "b": 0, "c": 0, "d": 0, "x": 0}
    assert stats == {
        "intra_group_edges": 2,
        "expressed_edges": 1,
        "unexpressed_edges": 1,
        "missing_ops": 0,
    }
    bits, _ = groups_to_bits(g, [["a", "b", "c", "d", "x"]])
    assert _bits(g, bits) == {"a": 1, "b": 1, "c": 0, "d": 0, "x": 1}
    # rule 2c: a and b on different devices
    device = {"a": 0, "b": 1, "c": 1, "d": 1, "x": 1}
    placement = np.array([device[name] for name in g.op_names])
    bits, stats = groups_to_bits(g, [["a", "b", "c", "d", "x"]], Decision(placement=placement))
    assert _bits(g, bits) == {"a": 0, "b": 1, "c": 0, "d": 0, "x": 1}
    assert stats["unexpressed_edges"] == 1
    # names the graph does not hold are counted, not fatal
    _, stats = groups_to_bits(g, [["a", "b", "zz"]])
    assert stats["missing_ops"] == 1


def test_drop_illegal_splits_the_offending_kernel() -> None:
    ops = [
        Op("s1", "MatMul", flops=1e6, bytes_accessed=2e6, output_bytes=1e3),
        Op("add", "Add", flops=1e3, bytes_accessed=2e3, output_bytes=1e3),
        Op("s2", "Sum", flops=1e3, bytes_accessed=1e3, output_bytes=4),
        Op("m", "Mul", flops=1e3, bytes_accessed=2e3, output_bytes=1e3),
        Op("r", "Relu", flops=1e3, bytes_accessed=2e3, output_bytes=1e3),
    ]
    edges = [("s1", "add", 1e3), ("add", "s2", 1e3), ("m", "r", 1e3)]
    g = CompGraph.build("t", ops, edges)
    bits = np.array([1 if name in ("s1", "add", "m") else 0 for name in g.op_names])
    legal, found = drop_illegal(g, bits)
    assert [rule for rule, _, _ in found] == [RULE_HEROES]
    assert _bits(g, legal) == {"s1": 0, "add": 0, "s2": 0, "m": 1, "r": 0}
    assert FusionRules(g).violation(np.zeros(g.num_ops, np.int64), legal)[0] == 0


# ---------------------------------------------------------------------------- the zoo
ZOO_SMALL = {
    "lstm": "layers=1&hidden=32&vocab=64&seq=4&batch=16",
    "transformer": "layers=1&d_model=32&heads=2&ff=64&vocab=64&seq=16&batch=2",
    "resnet": "depth=18&width=8&image=96&batch=4&classes=10",
    "inception": "blocks=1&width=8&image=75&batch=4&classes=10",
    "wavenet": "layers=3&stacks=1&residual=8&skip=16&classes=16&seq=64&batch=2",
}
"""Small sizes whose reductions still have more than 8 elements (Inductor unrolls smaller ones
into pointwise code)."""


def _zoo_graph(name: str, training: bool) -> CompGraph:
    from graphopt.workloads import resolve_graphs

    mode = "" if training else "&mode=forward"
    return resolve_graphs(f"torch:{name}?{ZOO_SMALL[name]}{mode}")[0]


@pytest.mark.expensive
@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("name", sorted(ZOO_SMALL))
def test_inductor_fusions_are_legal(name: str, training: bool) -> None:
    """Every fusion Inductor makes on the zoo models is legal under rule 2 (where one was not,
    the rule was wrong: reductions sharing a kernel, batch norm in eval mode, max-pool backward)."""
    graph = _zoo_graph(name, training)
    bits, stats = inductor_bits(graph)
    assert stats["missing_ops"] == 0
    assert stats["match_rate"] > 0.9, stats
    assert stats["fused_groups"] > 0
    rules = FusionRules(graph)
    zeros = np.zeros(graph.num_ops, dtype=np.int64)
    rule, a, b = rules.violation(zeros, bits)
    assert rule == 0, rules.describe(rule, a, b)
    measured = simulate(graph, get_cluster("v100-nvlink-4"), Decision(fusion=bits))
    assert measured.valid, measured.reason


@pytest.mark.expensive
def test_fuser_on_a_zoo_graph() -> None:
    graph = _zoo_graph("resnet", training=True)
    cluster = get_cluster("v100-nvlink-4")
    zeros = np.zeros(graph.num_ops, dtype=np.int64)
    bits = inductor_fusion(graph, cluster, Decision(placement=zeros))
    assert bits.dtype == np.int64 and bits.shape == (graph.num_ops,) and bits.sum() > 0
    legal = inductor_fusion(graph, cluster, Decision(placement=zeros), legal_only=True)
    assert np.all(legal <= bits)
    none = simulate(graph, cluster, Decision(placement=zeros)).step_time
    fused = simulate(graph, cluster, Decision(placement=zeros, fusion=legal))
    assert fused.valid and fused.step_time < none
    # ops on two devices: no bit joins them (rule 2c)
    split = (np.arange(graph.num_ops) >= graph.num_ops // 2).astype(np.int64)
    bits2 = inductor_fusion(graph, cluster, Decision(placement=split))
    src, dst = graph.edge_src, graph.edge_dst
    assert not np.any(bits2[src] & (split[src] != split[dst]))
