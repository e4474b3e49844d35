"""Whole-graph training, prediction, checkpoints, and the learned model as a CostModel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import envs
from graphopt.costmodel import data
from graphopt.costmodel.fit import (
    batch_size_for,
    evaluate,
    feature_layout,
    fit,
    load_checkpoint,
    net_layout,
    predict,
    save_checkpoint,
)
from graphopt.costmodel.learned import LearnedCostModel
from graphopt.costmodel.model import CostNet, NetLayout
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.typing import CostModel, Decision
from graphopt.workloads.registry import resolve_graphs


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> list[data.GraphSamples]:
    out = tmp_path_factory.mktemp("cm")
    graphs = resolve_graphs(["rnnlm-tiny", "random-sp-100-s0"])
    data.generate(graphs, get_cluster("v100-nvlink-4"), out, samples=48, seed=0, progress=False)
    return data.load_dataset(out)


def _net(samples: list[data.GraphSamples]) -> CostNet:
    f = feature_layout(samples)
    torch.manual_seed(0)
    return CostNet(net_layout(f, hidden=16, layers=2))


def test_fit_lowers_the_loss_and_keeps_the_best_epoch(samples: list[data.GraphSamples]) -> None:
    train, val = data.split_samples(samples, 0.25, seed=0)
    net = _net(samples)
    history = fit(net, train, val, loss="mse", epochs=6, batch_size=16, lr=3e-3, seed=0)
    assert len(history) == 6
    # a small, noisy dataset: the loss of an epoch may rise again, but training finds lower ones
    assert min(row["train/loss"] for row in history[1:]) < history[0]["train/loss"]
    best = max(row["val/kendall_tau"] for row in history)
    assert evaluate(net, val)["kendall_tau"] == pytest.approx(best, abs=1e-6)


def test_predict_is_independent_of_batching(samples: list[data.GraphSamples]) -> None:
    net = _net(samples).eval()
    s = samples[0]
    np.testing.assert_allclose(
        predict(net, s, batch_size=5), predict(net, s, batch_size=64), rtol=1e-5, atol=1e-5
    )
    assert batch_size_for(1000, 32, 10_000) == 10
    assert batch_size_for(10**6, 32, 10_000) == 2


def test_checkpoint_round_trip_and_layout_check(
    samples: list[data.GraphSamples], tmp_path: Path
) -> None:
    net = _net(samples).eval()
    layout = feature_layout(samples)
    path = save_checkpoint(tmp_path / "model.pt", net, layout)
    again, _ = load_checkpoint(path, expect=layout)
    np.testing.assert_allclose(predict(again, samples[0]), predict(net, samples[0]), rtol=1e-6)
    other = dict(layout, kind="tpugraphs", config_features=10)
    with pytest.raises(ValueError, match="the model was trained on"):
        load_checkpoint(path, expect=other)
    (tmp_path / "bad.pt").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="bad.pt is not a plain weights file .* costmodel train"):
        load_checkpoint(tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "none.pt")


def test_learned_model_is_a_cost_model(samples: list[data.GraphSamples], tmp_path: Path) -> None:
    net = _net(samples)
    save_checkpoint(tmp_path / "model.pt", net, feature_layout(samples))
    model = LearnedCostModel.load(tmp_path)
    assert isinstance(model, CostModel)
    s = samples[1]
    assert s.graph is not None and s.cluster is not None
    place = s.configs.placement[:3]  # type: ignore[attr-defined]
    batch = model.predict_batch(s.graph, s.cluster, place)
    np.testing.assert_allclose(batch, np.exp(predict(net, s.subset(np.arange(3)))), rtol=1e-5)
    m = model.evaluate(s.graph, s.cluster, Decision(placement=place[0]))
    truth = Simulator().evaluate(s.graph, s.cluster, Decision(placement=place[0]))
    assert m.step_time == pytest.approx(batch[0], rel=1e-5)
    np.testing.assert_allclose(m.busy_time, truth.busy_time, rtol=1e-9)
    assert m.bytes_moved == pytest.approx(truth.bytes_moved)
    assert m.valid


def test_learned_model_drops_into_an_environment(
    samples: list[data.GraphSamples], tmp_path: Path
) -> None:
    save_checkpoint(tmp_path / "model.pt", _net(samples), feature_layout(samples))
    env = envs.PlacementEnv(
        graphs=["random-sp-100-s0"],
        cluster="v100-nvlink-4",
        cost_model=LearnedCostModel.load(tmp_path / "model.pt"),
    )
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(env.action_space.sample())
    assert terminated and np.isfinite(reward) and info["step_time"] > 0


def test_parameter_memory_makes_a_decision_invalid(samples: list[data.GraphSamples]) -> None:
    model = LearnedCostModel(_net(samples))
    graph = resolve_graphs(["random-sp-100-s0"])[0]
    small = get_cluster("v100-nvlink-4").to_dict()
    for dev in small["devices"]:
        dev["memory"] = 1.0
    from graphopt.hardware import Cluster

    m = model.evaluate(
        graph, Cluster.from_dict(small), Decision(placement=np.zeros(graph.num_ops, dtype=np.int64))
    )
    if graph.param_bytes.sum() > 1.0:
        assert not m.valid and "OOM on device 0" in m.reason


def test_tpugraphs_checkpoint_cannot_price_decisions(tmp_path: Path) -> None:
    net = CostNet(NetLayout(70, 10))
    save_checkpoint(
        tmp_path / "model.pt",
        net,
        {"kind": "tpugraphs", "node_features": 70, "config_features": 10, "summary_features": 0},
    )
    with pytest.raises(ValueError, match="trained on kind"):
        LearnedCostModel.load(tmp_path / "model.pt")
