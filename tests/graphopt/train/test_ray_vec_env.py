"""Rollouts on Ray actors: the same run as in-process, a worker killed mid-run, resume."""

from __future__ import annotations

import csv
import os
import signal
from pathlib import Path

import pytest
import torch
from ray_testing import local_ray, need_ray
from tiny_runs import tiny_config

from graphopt import rundir
from graphopt.distributed import WorkerDied
from graphopt.train.trainer import resume, train

need_ray()
torch.set_num_threads(1)


@pytest.fixture(scope="module", autouse=True)
def ray_2cpus():
    yield from local_ray()


def _policy(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / rundir.FINAL, weights_only=True)["policy"]


def _train_rows(run: Path) -> list[dict[str, str]]:
    """metrics.csv without its clock columns."""
    with (run / rundir.METRICS).open() as f:
        return [
            {k: v for k, v in row.items() if k not in ("wall_seconds", "samples_per_second")}
            for row in csv.DictReader(f)
        ]


def test_one_ray_worker_trains_exactly_like_the_in_process_env(tmp_path: Path):
    config = tiny_config(n_envs=2, total_timesteps=64)
    here = train(config, runs_root=tmp_path / "a", show_progress=False, backend="dummy")
    there = train(config, runs_root=tmp_path / "b", show_progress=False, workers=1, backend="ray")
    assert _train_rows(here) == _train_rows(there)
    assert len([r for r in _train_rows(here) if r["kind"] == "train"]) == 2
    a, b = _policy(here), _policy(there)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    other = train(
        tiny_config(n_envs=2, total_timesteps=64, seed=1),
        runs_root=tmp_path / "c",
        show_progress=False,
    )
    assert not all(torch.equal(a[k], _policy(other)[k]) for k in a)  # the check can fail


def test_two_workers_split_the_environments_and_keep_their_order(tmp_path: Path):
    config = tiny_config(n_envs=2, total_timesteps=32)
    here = train(config, runs_root=tmp_path / "a", show_progress=False, backend="dummy")
    there = train(config, runs_root=tmp_path / "b", show_progress=False, workers=2)
    assert _train_rows(here) == _train_rows(there)


def test_a_worker_killed_mid_run_leaves_a_checkpoint_that_resumes(tmp_path: Path, monkeypatch):
    from graphopt.train.ray_vec_env import RayVecEnv

    step_wait = RayVecEnv.step_wait
    calls = {"n": 0}

    def kill_on_the_40th_step(self):
        calls["n"] += 1
        if calls["n"] == 20:  # 2 environments: timestep 40, after the checkpoint at 32
            os.kill(self.worker_pids()[1], signal.SIGKILL)
        return step_wait(self)

    monkeypatch.setattr(RayVecEnv, "step_wait", kill_on_the_40th_step)
    config = tiny_config(n_envs=2, total_timesteps=64)
    with pytest.raises(WorkerDied, match=r"Ray environment worker 1 died \("):
        train(config, runs_root=tmp_path, show_progress=False, workers=2)
    monkeypatch.undo()
    (run,) = (tmp_path / "placement").iterdir()
    state = rundir.read_state(run)
    assert state["status"] == "crashed" and "WorkerDied" in state["error"]
    assert state["timesteps"] == 38  # the steps before the failed one
    assert torch.load(run / rundir.LAST, weights_only=True)["num_timesteps"] == 38
    resume(run, show_progress=False, workers=2)  # new actors
    state = rundir.read_state(run)
    # SB3 collects whole rollouts of 32: from 38 the run ends at 70
    assert state["status"] == "finished" and state["timesteps"] == 70
    steps = [int(r["timesteps"]) for r in _train_rows(run) if r["kind"] == "train"]
    assert steps == [32, 70]  # the first session's rows up to its checkpoint kept
