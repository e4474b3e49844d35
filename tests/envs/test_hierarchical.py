"""graphopt/HierarchicalPlacement-v0: HDP's groups of ops and a device per group."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs.hierarchical import HierarchicalPlacementEnv
from graphopt.sim import Simulator
from graphopt.typing import Decision

SMALL = ["random-layered-100-s0", "txl-tiny"]


def test_checkers_pass_and_the_id_is_registered(check_env):
    env = gym.make("graphopt/HierarchicalPlacement-v0", graphs=SMALL, cluster="v100-nvlink-2")
    check_env(env.unwrapped)


def test_op_runs_on_its_groups_device():
    env = HierarchicalPlacementEnv(SMALL, "v100-nvlink-4", groups=5, seed=0)
    assert env.action_space.nvec.tolist() == [5] * env.max_ops + [4] * 5
    obs, _ = env.reset(options={"graph": 1})
    assert (obs["hint"] == -1).all()  # HDP gets no reference decision
    action = env.action_space.sample()
    n = env.graphs[1].num_ops
    group, device = action[:n], action[env.max_ops :]
    _, reward, terminated, truncated, info = env.step(action)
    assert terminated and not truncated
    expected = [device[g] for g in group]
    assert env.last_episode.decision.placement.tolist() == expected
    m = Simulator().evaluate(env.graphs[1], env.cluster, Decision(placement=np.array(expected)))
    assert info["step_time"] == m.step_time


def test_make_env_rebuilds_it_from_its_settings():
    env = envs.make_env("placement", SMALL, "v100-nvlink-2", variant="hierarchical", groups=3)
    assert isinstance(env, HierarchicalPlacementEnv)
    settings = env.settings()
    assert settings["variant"] == "hierarchical" and settings["groups"] == 3
    again = envs.make_env("placement", SMALL, "v100-nvlink-2", **settings)
    assert again.action_space == env.action_space
    assert again.observation_space == env.observation_space
    with pytest.raises(ValueError, match="no environment variant 'hierarchical' for task fusion"):
        envs.make_env("fusion", SMALL, "v100-nvlink-2", variant="hierarchical")


def test_bad_actions_and_groups_are_refused():
    with pytest.raises(ValueError, match="groups must be an integer >= 1"):
        HierarchicalPlacementEnv(SMALL, "v100-nvlink-2", groups=0)
    env = HierarchicalPlacementEnv(SMALL, "v100-nvlink-2", groups=2, seed=0)
    with pytest.raises(ValueError, match="a device per group, groups=2"):
        env.step(np.zeros(env.max_ops, np.int64))
    action = np.zeros(env.action_space.shape, np.int64)
    action[-1] = 2
    with pytest.raises(ValueError, match=r"allowed values are 0\.\.1"):
        env.step(action)
