"""PPO training with a learned cost model as the reward, validated with the simulator."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import yaml
from tiny_runs import tiny_config

from graphopt.costmodel.data import generate, load_dataset
from graphopt.costmodel.fit import feature_layout, fit, net_layout, save_checkpoint
from graphopt.costmodel.learned import LearnedCostModel
from graphopt.costmodel.model import CostNet
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.train.config import TrainConfig, load_config
from graphopt.train.trainer import make_envs, train
from graphopt.workloads import resolve_graphs

TRAIN, VAL, CLUSTER = "random-layered-100-s0", "random-sp-100-s0", "v100-nvlink-2"


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cost model fitted for one epoch on 16 measured placements of the training graph."""
    tmp = tmp_path_factory.mktemp("costmodel")
    generate(resolve_graphs(TRAIN), get_cluster(CLUSTER), tmp / "ds", samples=16, progress=False)
    samples = load_dataset(tmp / "ds")
    features = feature_layout(samples)
    net = CostNet(net_layout(features, hidden=8, layers=1))
    fit(net, samples, epochs=1, batch_size=8)
    return save_checkpoint(tmp / "model.pt", net, features)


def learned_config(cost_model: str, **overrides: object) -> TrainConfig:
    return tiny_config(
        graphs=TRAIN,
        val_graphs=VAL,
        cluster=CLUSTER,
        checkpoint_every=32,
        name="learned",
        cost_model=cost_model,
        **overrides,
    )


def test_training_envs_use_the_learned_model_and_validation_the_simulator(model_path: Path):
    envs, val = make_envs(learned_config(str(model_path.parent), n_envs=2))  # a directory works too
    assert all(isinstance(e.cost_model, LearnedCostModel) for e in envs)
    assert envs[0].cost_model is envs[1].cost_model
    assert val is not None and isinstance(val.cost_model, Simulator)
    # the reward's step time is the learned model's price of the decision
    env = envs[0]
    env.reset(seed=0)
    action = np.zeros(len(env.nvec), dtype=np.int64)
    _, _, _, _, info = env.step(action)
    expected = env.cost_model.evaluate(env.graphs[0], env.cluster, env.decode(action))
    assert info["step_time"] == pytest.approx(expected.step_time)
    assert info["reference_time"] == pytest.approx(env.reference(0).measurement.step_time)


def test_train_with_a_learned_reward(model_path: Path, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(model_path.parent)
    run = train(learned_config("model.pt"), runs_root=tmp_path, show_progress=False)
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["cost_model"] == str(model_path.resolve())  # stored as an absolute path
    with (run / "metrics.csv").open() as f:
        kinds = [row["kind"] for row in csv.DictReader(f)]
    assert "train" in kinds and "val" in kinds  # learned-reward rows and simulator rows
    assert (run / "best_model.pt").exists() and (run / "final_model.pt").exists()
    assert not list(run.rglob("*.zip"))  # weights only


def test_cost_model_key_is_checked_and_optional(tmp_path: Path):
    with pytest.raises(ValueError, match="cost_model 'nope' is neither 'simulator' nor"):
        TrainConfig(cost_model="nope").validate()
    (tmp_path / "run").mkdir()
    with pytest.raises(ValueError, match="graphopt costmodel train"):
        TrainConfig(cost_model=str(tmp_path / "run")).validate()
    old = tmp_path / "old.yaml"  # a version-1 file written before the key existed
    old.write_text("version: 1\ntask: placement\nn_envs: 2\n")
    assert load_config(old).cost_model == "simulator"
