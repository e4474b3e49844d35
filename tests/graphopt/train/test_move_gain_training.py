"""Training the move-gain model: the labels are the simulator's gains, and fitting lowers the
error on them."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.baselines.reference_cache import cached_best_placement
from graphopt.errors import InvalidArgument
from graphopt.hardware import get_cluster
from graphopt.sim.simulator import PreparedGraph
from graphopt.train.move_gain import fit_move_net, move_examples
from graphopt.workloads import get_graph

CLUSTER = "v100-nvlink-2"


def test_labels_are_the_simulators_gains_of_single_moves():
    graph, cluster = get_graph("random-sp-200-s0"), get_cluster(CLUSTER)
    (example,) = move_examples([graph], cluster, ops=12, seed=0)
    placement, _, _ = cached_best_placement(graph, cluster)
    assert np.array_equal(example.inputs.own, placement)
    labelled = np.argwhere(~np.isnan(example.gains))
    assert len(np.unique(labelled[:, 0])) == 12  # the ops drawn, each to its other device
    assert (labelled[:, 1] != placement[labelled[:, 0]]).all()
    prepared = PreparedGraph(graph, cluster)
    t = float(prepared.evaluate_batch(placement[None]).step_time[0])
    for v, d in labelled[:3]:
        moved = placement.copy()
        moved[v] = d
        t_moved = float(prepared.evaluate_batch(moved[None]).step_time[0])
        assert example.gains[v, d] == pytest.approx(100 * np.log(t / t_moved))


@pytest.mark.parametrize("loss", ["mse", "bce"])
def test_fitting_lowers_the_error_and_reports_each_pass(loss):
    cluster = get_cluster(CLUSTER)
    graphs = [get_graph(n) for n in ("random-sp-200-s0", "wavenet-tiny")]
    examples = move_examples(graphs, cluster, ops=40, seed=1)
    losses = []
    fit_move_net(
        examples,
        6,
        width=16,
        layers=1,
        lr=3e-3,
        loss=loss,
        on_epoch=lambda e, err, net: losses.append(err),
    )
    assert len(losses) == 6 and losses[-1] < losses[0]
    with pytest.raises(InvalidArgument, match="unknown loss 'hinge'"):
        fit_move_net(examples, 1, loss="hinge")


def test_fine_tuning_starts_from_a_copy_and_keeps_its_scaling():
    import torch

    cluster = get_cluster(CLUSTER)
    first = move_examples([get_graph("random-sp-200-s0")], cluster, ops=40, seed=1)
    other = move_examples([get_graph("wavenet-tiny")], cluster, ops=40, seed=2)
    start = fit_move_net(first, 2, width=16, layers=1, lr=3e-3)
    before = {k: v.clone() for k, v in start.state_dict().items()}
    tuned = fit_move_net(other, 3, lr=3e-3, start=start)
    assert tuned is not start and tuned.width == 16 and tuned.layers == 1
    assert all(torch.equal(v, start.state_dict()[k]) for k, v in before.items())  # untouched
    assert torch.equal(tuned.mean, start.mean) and torch.equal(tuned.std, start.std)
    assert not torch.equal(tuned.inp.weight, start.inp.weight)  # fitted to the new graph


def test_no_training_graph_is_refused():
    with pytest.raises(InvalidArgument, match="no training graphs"):
        move_examples([], get_cluster(CLUSTER), ops=8, seed=0)


def test_training_graphs_go_to_each_cluster_in_turn():
    clusters = [get_cluster("v100-nvlink-2"), get_cluster("hetero-cpu-2gpu")]
    graphs = [get_graph(n) for n in ("random-sp-200-s0", "wavenet-tiny", "random-sp-100-s0")]
    examples = move_examples(graphs, clusters, ops=4, seed=0)
    assert [e.name.split(" on ")[1] for e in examples] == [
        "v100-nvlink-2",
        "hetero-cpu-2gpu",
        "v100-nvlink-2",
    ]
    assert [e.inputs.masks.shape[1] for e in examples] == [2, 3, 2]
