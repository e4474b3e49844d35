"""The move-gain model: its inputs describe the placement given, it scores every move on any
device count, and its checkpoints are data that only a move-gain model's loader accepts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from graphopt.baselines.placement import PLACERS
from graphopt.decoders.event_step import FEATURES, event_graph
from graphopt.errors import InvalidArgument
from graphopt.hardware import get_cluster
from graphopt.nn.move_gain import (
    NUM_OP_INPUTS,
    MoveGainNet,
    load_move_net,
    move_inputs,
    ranked_moves,
    save_move_net,
)
from graphopt.sim.simulator import PreparedGraph
from graphopt.workloads import get_graph

GRAPH = "random-sp-200-s0"


@pytest.mark.parametrize("cluster_name", ["v100-nvlink-2", "v100-nvlink-4", "hetero-cpu-2gpu"])
def test_inputs_describe_the_placement_and_every_move_is_scored(cluster_name):
    graph, cluster = get_graph(GRAPH), get_cluster(cluster_name)
    placement = PLACERS["m-etf"](graph, cluster)
    inputs = move_inputs(graph, cluster, placement)
    n, d = graph.num_ops, cluster.num_devices
    assert inputs.feats.shape == (n, d, len(FEATURES)) and inputs.x.shape == (n, NUM_OP_INPUTS)
    assert np.array_equal(inputs.own, placement)
    # the anchor feature marks each op's own device: the decode is of this placement
    anchor = inputs.feats[..., FEATURES.index("anchor")]
    assert np.array_equal(anchor.argmax(axis=1), placement)
    assert inputs.edges.shape == (2, graph.num_edges)
    torch.manual_seed(0)
    net = MoveGainNet(width=16, layers=2).eval()  # one network for every device count
    with torch.no_grad():
        scores = net(inputs)
    assert scores.shape == (n, d) and torch.isfinite(scores).all()
    moves, predicted = ranked_moves(net, inputs)
    assert len(moves) == int(inputs.masks.sum()) - int(inputs.masks[np.arange(n), placement].sum())
    assert (moves[:, 1] != placement[moves[:, 0]]).all()  # never the op's own device
    assert inputs.masks[moves[:, 0], moves[:, 1]].all()  # never a device it may not use
    assert (np.diff(predicted) <= 0).all()  # highest predicted gain first
    assert np.allclose(predicted, scores.numpy()[moves[:, 0], moves[:, 1]], atol=1e-6)


def test_inputs_from_a_reused_event_graph_are_those_built_afresh():
    """A search ranks many placements of one graph on one event graph and prepared graph."""
    graph, cluster = get_graph(GRAPH), get_cluster("v100-nvlink-4")
    base = event_graph(graph, cluster, PLACERS["heft"](graph, cluster))  # another anchor
    prepared = PreparedGraph(graph, cluster)
    for placer in ("m-etf", "m-topo"):
        placement = PLACERS[placer](graph, cluster)
        fresh = move_inputs(graph, cluster, placement)
        reused = move_inputs(graph, cluster, placement, base=base, prepared=prepared)
        for field in ("feats", "masks", "own", "x", "edges"):
            assert np.array_equal(getattr(fresh, field), getattr(reused, field)), field


def test_a_saved_model_loads_with_the_same_weights_and_scores(tmp_path: Path):
    graph, cluster = get_graph(GRAPH), get_cluster("v100-nvlink-4")
    inputs = move_inputs(graph, cluster, PLACERS["heft"](graph, cluster))
    torch.manual_seed(1)
    net = MoveGainNet(width=16, layers=1)
    net.set_scaling(inputs.x)
    save_move_net(net, tmp_path / "m.pt", "a test")
    loaded, trained_on = load_move_net(tmp_path / "m.pt")
    assert trained_on == "a test" and (loaded.width, loaded.layers) == (16, 1)
    with torch.no_grad():
        assert torch.equal(net.eval()(inputs), loaded(inputs))


def test_files_that_are_not_a_move_gain_model_are_refused_in_one_line(tmp_path: Path):
    torch.save({"weights": torch.zeros(3)}, tmp_path / "policy.pt")  # another checkpoint
    (tmp_path / "junk.pt").write_bytes(b"\x00not a checkpoint")
    net = MoveGainNet(width=8, layers=1)
    save_move_net(net, tmp_path / "old.pt", "")
    data = torch.load(tmp_path / "old.pt", weights_only=True)
    data["inputs"] = data["inputs"][:-1]  # a model of other inputs
    torch.save(data, tmp_path / "old.pt")
    for name, says in [
        ("missing.pt", "no such move-gain model"),
        ("policy.pt", "not a move-gain model"),
        ("junk.pt", "not a readable checkpoint"),
        ("old.pt", "another version or other inputs"),
    ]:
        with pytest.raises(InvalidArgument, match=says) as e:
            load_move_net(tmp_path / name)
        assert "\n" not in str(e.value)


def test_the_builtin_model_loads_and_scores():
    net, trained_on = load_move_net("builtin")
    assert "suite:train-gen" in trained_on
    graph, cluster = get_graph(GRAPH), get_cluster("v100-nvlink-8")
    inputs = move_inputs(graph, cluster, PLACERS["heft"](graph, cluster))
    moves, predicted = ranked_moves(net, inputs)
    assert len(moves) > 0 and np.isfinite(predicted).all()
