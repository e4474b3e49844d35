"""A saved placement of a torch-imported graph applied to the model's FX graph, on CPU
pseudo-devices: the same outputs as the unmodified model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphopt.decisions.files import DecisionDir
from graphopt.decisions.format import read_record
from graphopt.hardware import get_cluster
from graphopt.importers.torch import from_torch
from graphopt.importers.torch_apply import (
    TRANSFER,
    apply_placement,
    default_devices,
    export_torch,
    traced_module,
)
from graphopt.sim import simulate
from graphopt.typing import Decision

DEVICES = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(8, 32)
        self.down = torch.nn.Linear(32, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.up(x))
        y = self.norm(self.down(h) + x)
        return y.softmax(-1) + torch.ones(8) + self.up.bias[:8]


@pytest.fixture(scope="module")
def model_and_input():
    torch.manual_seed(0)
    return Block(), torch.randn(4, 8)


def test_an_exported_placement_runs_across_pseudo_devices_as_the_model(tmp_path, model_and_input):
    model, x = model_and_input
    graph = from_torch(model, (x,), name="block")
    cluster = get_cluster("v100-nvlink-4")
    placement = np.arange(graph.num_ops) % cluster.num_devices  # every edge crosses devices
    decision = Decision(placement=placement)
    saved = DecisionDir(tmp_path)
    name = saved.save(graph, cluster, "round-robin", decision, simulate(graph, cluster, decision))
    saved.write_index()

    exported = export_torch(read_record(tmp_path / name), DEVICES)
    assert exported["placement"] == {
        op: DEVICES[int(d)] for op, d in zip(graph.op_names, placement, strict=True)
    }
    gm = traced_module(model, (x,))
    assert set(exported["placement"]) <= {n.name for n in gm.graph.nodes}  # op names: FX nodes
    with torch.no_grad():
        expected = model(x)
        placed = apply_placement(gm, exported["placement"], output_device="cpu:0")
        got = placed(x)
    assert torch.equal(got, expected)
    transfers = [n for n in placed.graph.nodes if n.meta.get(TRANSFER)]
    assert len(transfers) >= graph.num_edges  # each cross-device edge, the input, the output
    assert all(n.target == "to" for n in transfers)


def test_fusion_is_exported_as_groups_of_fx_node_names(tmp_path, model_and_input):
    model, x = model_and_input
    graph = from_torch(model, (x,), name="block")
    cluster = get_cluster("v100-nvlink-4")
    fusion = np.zeros(graph.num_ops, dtype=np.int64)
    fusion[graph.index["addmm"]] = 1  # the first linear with its relu
    decision = Decision(fusion=fusion)
    saved = DecisionDir(tmp_path)
    name = saved.save(graph, cluster, "f", decision)
    saved.write_index()
    exported = export_torch(read_record(tmp_path / name))
    assert exported["fusion"] == [["addmm", "relu"]]
    assert exported["placement"] is None and exported["devices"] == default_devices(4)


def test_bad_device_lists_and_node_names_are_refused(tmp_path, model_and_input):
    model, x = model_and_input
    graph = from_torch(model, (x,), name="block")
    cluster = get_cluster("v100-nvlink-2")
    decision = Decision(placement=np.zeros(graph.num_ops, dtype=np.int64))
    saved = DecisionDir(tmp_path)
    name = saved.save(graph, cluster, "m", decision)
    saved.write_index()
    with pytest.raises(ValueError, match="give one torch device per device of cluster"):
        export_torch(read_record(tmp_path / name), ["cpu"])
    with pytest.raises(ValueError, match="names node 'nope'"):
        apply_placement(traced_module(model, (x,)), {"nope": "cpu"})
