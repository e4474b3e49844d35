"""The choice of where training environments run, and the environments each backend builds."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_runs import tiny_config

from graphopt.train.env_spec import EnvSpec, build_envs
from graphopt.train.vec_env import check_inputs, choose_backend, env_spec, make_envs


@pytest.mark.parametrize(
    ("n_envs", "kwargs", "cpus", "expected"),
    [
        (4, {}, 2, "dummy"),  # 2 cores: the learner and the environments share them
        (4, {}, 8, "subproc"),
        (1, {}, 8, "dummy"),  # one environment: nothing to spread
        (4, {"backend": "dummy"}, 8, "dummy"),  # asked for
        (4, {"workers": 2}, 2, "ray"),
        (4, {"ray_address": "10.0.0.1:6379"}, 2, "ray"),
        (4, {"backend": "ray"}, 2, "ray"),
    ],
)
def test_choose_backend(n_envs, kwargs, cpus, expected):
    assert choose_backend(n_envs, cpus=cpus, **kwargs) == expected


def test_choose_backend_refuses_bad_input():
    with pytest.raises(ValueError, match=r"unknown environment backend 'mpi'; choose one of"):
        choose_backend(2, backend="mpi")
    with pytest.raises(ValueError, match="^workers must be >= 1, got 0"):
        choose_backend(2, workers=0)
    with pytest.raises(ValueError, match="run the environments on Ray, not subproc"):
        choose_backend(2, backend="subproc", workers=2)


def test_check_inputs_refuses_what_training_would_before_any_work():
    check_inputs(tiny_config())  # the tiny run's graphs and cluster: fine
    with pytest.raises(ValueError, match="unknown graph 'no-such-graph'"):
        check_inputs(tiny_config(graphs="no-such-graph"))
    with pytest.raises(ValueError, match="unknown graph 'nope'"):
        check_inputs(tiny_config(val_graphs="nope"))
    with pytest.raises(ValueError, match="max_ops is 8"):
        check_inputs(tiny_config(max_ops=8))
    with pytest.raises(ValueError, match="unknown cluster preset 'v100x3'"):
        check_inputs(tiny_config(cluster="v100x3"))


def test_the_spec_rebuilds_the_environments_of_this_process():
    """Environments rebuilt elsewhere from the plain-data spec step exactly like those built
    here (same graphs, cluster, settings, seeds)."""
    config = tiny_config(n_envs=2)
    here, _ = make_envs(config)
    spec, _ = env_spec(config)
    assert isinstance(spec, EnvSpec) and spec.seeds == (0, 1)
    there = build_envs(spec)
    for a, b in zip(here, there, strict=True):
        obs_a, _ = a.reset(seed=3)
        obs_b, _ = b.reset(seed=3)
        for key in obs_a:
            assert np.array_equal(obs_a[key], obs_b[key]), key
        action = a.action_space.sample()
        assert a.step(action)[1] == b.step(action)[1]


@pytest.mark.expensive  # a process per environment, spawned: seconds of imports (CI runs it)
def test_a_process_per_environment_trains_like_in_process(tmp_path):
    """The subproc backend (what auto picks for several environments on more than 2 cores)
    gives the run of the in-process one, and resuming on another backend works."""
    import csv

    import torch

    from graphopt import rundir
    from graphopt.train.trainer import resume, train

    def rows(run):
        with (run / rundir.METRICS).open() as f:
            drop = ("wall_seconds", "samples_per_second")
            out = [{k: v for k, v in r.items() if k not in drop} for r in csv.DictReader(f)]
        # SB3's DummyVecEnv hands the callback float32 rewards, SubprocVecEnv float64
        for r in out:
            r["reward_mean"] = f"{float(r['reward_mean'] or 'nan'):.6g}"
        return out

    config = tiny_config(n_envs=2, total_timesteps=32)
    here = train(config, runs_root=tmp_path / "a", show_progress=False, backend="dummy")
    there = train(config, runs_root=tmp_path / "b", show_progress=False, backend="subproc")
    assert rows(here) == rows(there)
    a = torch.load(here / rundir.FINAL, weights_only=True)["policy"]
    b = torch.load(there / rundir.FINAL, weights_only=True)["policy"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    resume(there, total_timesteps=64, show_progress=False, backend="dummy")
    assert rundir.read_state(there)["timesteps"] == 64
