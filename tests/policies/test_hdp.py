"""policies.hdp: HDP's grouper and seq2seq placer as one policy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from stable_baselines3 import PPO

import envs
from envs.hierarchical import HierarchicalPlacementEnv
from graphopt.nn.batching import graph_batch, obs_to_tensors
from policies.hdp import HDPPolicy

torch.set_num_threads(1)

GRAPHS = ["random-layered-16-s1", "txl-tiny"]


def _model(groups: int = 4, cluster: str = "v100-nvlink-4") -> tuple[PPO, HierarchicalPlacementEnv]:
    env = HierarchicalPlacementEnv(GRAPHS, cluster, groups=groups, seed=0)
    model = PPO(
        HDPPolicy, env, n_steps=8, batch_size=8, n_epochs=1, seed=0, policy_kwargs={"hidden": 16}
    )
    return model, env


def _batch(env, indices):
    obs = [env.reset(options={"graph": i})[0] for i in indices]
    return {k: torch.as_tensor(np.stack([o[k] for o in obs])) for k in obs[0]}


def test_log_probability_is_the_groupers_plus_the_placers():
    """The slow twin: one graph at a time, each op's and each group's choice summed in a loop."""
    model, env = _model()
    policy = model.policy
    obs = _batch(env, [0, 1])
    with torch.no_grad():
        actions, _, log_prob = policy(obs)
        _, again, entropy = policy.evaluate_actions(obs, actions.float())
    assert torch.allclose(log_prob, again)
    assert torch.all(entropy > 0)
    for b, index in enumerate([0, 1]):
        one = obs_to_tensors(env.reset(options={"graph": index})[0])
        batch = graph_batch(one)
        n = env.graphs[index].num_ops
        with torch.no_grad():
            x, mask = policy.network.embed(batch)
            logits = F.log_softmax(policy.network.grouper_logits(batch, x), -1)[0]
            groups = actions[b : b + 1, : env.max_ops].long()
            expected = sum(float(logits[i, groups[0, i]]) for i in range(n))
            devices = actions[b : b + 1, env.max_ops :].long()
            _, placer, _ = policy.network.placer(x, mask, groups, batch, devices)
        assert float(log_prob[b]) == pytest.approx(expected + float(placer[0]), rel=1e-4)
        assert torch.all(actions[b, n : env.max_ops] == 0)  # padding slots: group 0


def test_greedy_is_deterministic_and_decodes_to_a_placement():
    model, env = _model(groups=3, cluster="v100-nvlink-2")
    obs, _ = env.reset(options={"graph": 0})
    a1, _ = model.predict(obs, deterministic=True)
    a2, _ = model.predict(obs, deterministic=True)
    assert np.array_equal(a1, a2) and env.action_space.contains(a1)
    decision = env.decode(a1)
    assert decision.placement.tolist() == [a1[env.max_ops + g] for g in a1[:16]]


def test_learns_with_ppo_and_refuses_other_environments():
    model, _ = _model()
    model.learn(16)
    assert model.num_timesteps == 16
    plain = envs.PlacementEnv(GRAPHS, "v100-nvlink-2")
    with pytest.raises(ValueError, match="needs the actions of envs.hierarchical"):
        PPO(HDPPolicy, plain)
