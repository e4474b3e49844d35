"""Tests of graphopt.importers.torch: FLOPs against FlopCounterMode, bytes, views, parameters,
layers, training graphs and the errors of models torch.export cannot capture."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from graphopt.graph import CompGraph
from graphopt.hardware import get_cluster
from graphopt.importers.torch import LOSS_LAYER, from_torch, reference_flops
from graphopt.sim import simulate

torch.set_num_threads(1)

F32 = 4


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.norm = nn.LayerNorm(32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.norm(self.fc1(x))))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn(self.conv(x)))
        return self.head(y.mean(dim=(2, 3)))


class TiedLM(nn.Module):
    """Embedding and output projection share one weight."""

    def __init__(self, vocab: int = 50, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.proj(self.embed(ids))))


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return self.fc(x)
        return x


class Cond(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda x: self.b(self.a(x)), lambda x: self.a(x), (x,))


def meta(build):
    with torch.device("meta"):
        return build()


def check_valid(graph: CompGraph) -> None:
    assert graph.num_ops > 0
    assert CompGraph.from_json_dict(graph.to_json_dict()).fingerprint == graph.fingerprint
    m = simulate(graph, get_cluster("v100-nvlink-4"))
    assert (m.valid or "out of memory" in m.reason) and m.step_time > 0


# ---------------------------------------------------------------------------- forward graphs
def test_mlp_forward_matches_flop_counter_and_folds_views() -> None:
    model, x = meta(lambda: (MLP(), torch.randn(8, 16)))
    graph = from_torch(model, (x,), name="mlp")
    check_valid(graph)
    assert graph.flops.sum() == reference_flops(model, (x,)) == 2 * 8 * (16 * 32 + 32 * 10)
    # Views (the weights' transposes) and getitem are folded: only kernels remain.
    assert graph.op_types == ("addmm", "native_layer_norm", "relu", "addmm")
    assert graph.op_classes == ("contraction", "reduction", "elementwise", "contraction")
    assert graph.metadata["unknown_op_types"] == []
    assert graph.layer == ("fc1", "norm", "", "fc2")
    assert graph.metadata["training"] is False and graph.metadata["forward_ops"] == 4


def test_bytes_and_parameters_of_a_linear_layer() -> None:
    model, x = meta(lambda: (MLP(), torch.randn(8, 16)))
    graph = from_torch(model, (x,), name="mlp")
    fc1 = graph.index["addmm"]
    weights = (16 * 32 + 32) * F32
    out = 8 * 32 * F32
    assert graph.param_bytes[fc1] == weights
    assert graph.output_bytes[fc1] == out
    assert graph.bytes_accessed[fc1] == 8 * 16 * F32 + weights + out  # input + weights + output
    # layer norm writes its output and its mean and rstd (one float per row each)
    norm = graph.index["native_layer_norm"]
    assert graph.output_bytes[norm] == out + 2 * 8 * F32
    # each parameter counted once, on the op that reads it
    total = sum(p.numel() * F32 for p in model.parameters())
    assert graph.param_bytes.sum() == total == graph.metadata["state_bytes"]
    # edges carry what the consumer reads from the producer
    pairs = zip(graph.edge_src.tolist(), graph.edge_dst.tolist(), strict=True)
    edges = dict(zip(pairs, graph.edge_bytes.tolist(), strict=True))
    assert edges[(fc1, norm)] == out


def test_tied_weights_are_counted_once_and_embedding_reads_rows() -> None:
    model, ids = meta(lambda: (TiedLM(), torch.zeros(2, 3, dtype=torch.long)))
    graph = from_torch(model, (ids,), name="tied")
    unique = sum(p.numel() * F32 for p in model.parameters())  # parameters() dedups ties
    assert graph.param_bytes.sum() == unique
    assert graph.metadata["unattributed_state_bytes"] == 0
    emb = graph.op_types.index("embedding")
    table = 50 * 8 * F32
    assert graph.param_bytes[emb] == table  # first reader of the shared table
    rows = 2 * 3 * 8 * F32
    assert graph.bytes_accessed[emb] == rows + 2 * 3 * 8 + rows  # rows read + ids + rows written
    assert graph.flops.sum() == reference_flops(model, (ids,))


def test_convnet_forward_layers_and_flops() -> None:
    model, x = meta(lambda: (ConvNet(), torch.randn(2, 3, 8, 8)))
    graph = from_torch(model, (x,), name="conv")
    check_valid(graph)
    assert graph.flops.sum() == reference_flops(model, (x,))
    conv = graph.op_types.index("convolution")
    assert graph.layer[conv] == "conv"
    assert graph.flops[conv] == 2 * 2 * 4 * 8 * 8 * 3 * 3 * 3


def test_model_is_left_untouched() -> None:
    model, x = meta(lambda: (ConvNet(), torch.randn(2, 3, 8, 8)))
    model.train()
    before = {name: p for name, p in model.named_parameters()}
    from_torch(model, (x,), name="conv")
    from_torch(model, (x,), name="conv", training=True)
    assert all(p is before[name] for name, p in model.named_parameters())
    assert all(p.device.type == "meta" for p in model.parameters())
    assert model.training and model.bn.training


def test_real_cpu_model_imports_without_running() -> None:
    model = MLP()  # real weights: only their shapes are used
    graph = from_torch(model, torch.randn(8, 16), name="mlp")
    assert graph.flops.sum() == reference_flops(model, torch.randn(8, 16))


def test_torch_cond_costs_its_dearer_branch() -> None:
    model, x = meta(lambda: (Cond(), torch.randn(4, 8)))
    graph = from_torch(model, (x,), name="cond")
    check_valid(graph)
    cond = graph.op_types.index("cond")
    assert graph.flops[cond] == 2 * (2 * 4 * 8 * 8) == reference_flops(model, (x,))
    assert graph.param_bytes[cond] == 2 * (8 * 8 + 8) * F32


# ---------------------------------------------------------------------------- training graphs
def test_training_graph_is_torch_joint_graph() -> None:
    model, x = meta(lambda: (ConvNet(), torch.randn(2, 3, 8, 8)))
    forward = from_torch(model, (x,), name="conv")
    graph = from_torch(model, (x,), name="conv", training=True)
    check_valid(graph)
    assert graph.num_ops > forward.num_ops
    assert graph.flops.sum() == reference_flops(model, (x,), training=True)
    assert graph.metadata["training"] is True
    assert 0 < graph.metadata["forward_ops"] < graph.num_ops
    # the backward ops carry the layer of the forward op they differentiate
    backward = graph.op_types.index("convolution_backward")
    assert graph.layer[backward] == "conv"
    assert {"conv", "bn", "head"} <= set(graph.layer)
    assert graph.param_bytes.sum() == graph.metadata["state_bytes"]


def test_training_with_loss_fn_and_targets() -> None:
    model, x, y = meta(lambda: (MLP(), torch.randn(8, 16), torch.zeros(8, dtype=torch.long)))
    kwargs = {"loss_fn": F.cross_entropy, "loss_inputs": (y,)}
    graph = from_torch(model, (x,), name="mlp", training=True, **kwargs)
    check_valid(graph)
    assert graph.flops.sum() == reference_flops(model, (x,), training=True, **kwargs)
    # forward 2 matmuls, backward: grad of input and weight for fc2, weight only for fc1
    assert sorted(t for t in graph.op_types if t in ("mm", "addmm")) == ["addmm"] * 2 + ["mm"] * 3
    assert LOSS_LAYER in graph.layer and "_log_softmax" in graph.op_types


def test_training_rejects_a_non_scalar_loss() -> None:
    model, x = meta(lambda: (MLP(), torch.randn(8, 16)))
    with pytest.raises(ValueError, match="scalar"):
        from_torch(model, (x,), name="mlp", training=True, loss_fn=lambda out: out * 2)


def test_loss_fn_needs_training() -> None:
    model, x = meta(lambda: (MLP(), torch.randn(8, 16)))
    with pytest.raises(ValueError, match="training=True"):
        from_torch(model, (x,), name="mlp", loss_fn=F.cross_entropy)


def test_not_a_module() -> None:
    with pytest.raises(ValueError, match="torch.nn.Module"):
        from_torch(lambda x: x, (torch.randn(2),), name="f")


# ---------------------------------------------------------------------------- capture errors
def test_data_dependent_branch_names_the_construct_and_a_fix() -> None:
    model, x = meta(lambda: (Branchy(), torch.randn(2, 4)))
    with pytest.raises(ValueError) as info:
        from_torch(model, (x,), name="branchy")
    message = str(info.value)
    assert "torch.export cannot capture 'branchy'" in message
    assert "if x.sum() > 0:" in message and "test_torch_importer.py" in message
    assert "data-dependent" in message and "torch.cond" in message
    assert info.value.__cause__ is not None


def test_data_dependent_branch_in_training() -> None:
    model, x = meta(lambda: (Branchy(), torch.randn(2, 4)))
    with pytest.raises(ValueError, match="if x.sum"):
        from_torch(model, (x,), name="branchy", training=True)


def test_cpu_only_namespaces_restrict_ops_to_the_cpu() -> None:
    """quantized:: ops have CPU kernels only; every other op may run anywhere."""
    from graphopt.importers.torch import allowed_kinds

    types = ["mm", "quantized.linear", "relu", "quantized.conv2d", "prims.iota"]
    assert allowed_kinds(types) == [(), ("CPU",), (), ("CPU",), ()]
    # an imported float model restricts nothing: no allowed column, fingerprint as before
    g = from_torch(torch.nn.Linear(4, 2), (torch.randn(1, 4),), name="lin")
    assert g.allowed == () and "allowed" not in g.to_json_dict()["ops"]
