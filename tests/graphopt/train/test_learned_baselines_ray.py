"""The learned baselines' environments on Ray actors: the same run as in-process."""

from __future__ import annotations

import pytest
import torch
from ray_testing import local_ray, need_ray

from graphopt import rundir
from graphopt.train.config import TrainConfig
from graphopt.train.trainer import train

need_ray()
torch.set_num_threads(1)


@pytest.fixture(scope="module", autouse=True)
def ray_2cpus():
    yield from local_ray()


@pytest.mark.parametrize(
    "keys",
    [
        dict(task="placement", policy="hdp", algorithm="reinforce", groups=4),
        dict(task="placement-edit", policy="placeto", algorithm="reinforce"),
    ],
    ids=["hdp", "placeto"],
)
def test_ray_workers_train_the_same_run_as_in_process(tmp_path, keys):
    config = TrainConfig(
        **keys,
        graphs="random-layered-16-s1,random-sp-12-s0",
        val_graphs="",
        cluster="v100-nvlink-2",
        total_timesteps=64,
        n_envs=2,
        n_steps=16,
        checkpoint_every=64,
        policy_kwargs={"hidden": 16},
    ).validate()
    here = train(config, tmp_path / "here", show_progress=False, backend="dummy")
    there = train(config, tmp_path / "ray", show_progress=False, workers=2)
    a = torch.load(here / rundir.FINAL, weights_only=True)["policy"]
    b = torch.load(there / rundir.FINAL, weights_only=True)["policy"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
