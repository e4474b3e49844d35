"""policies.gdp: GDP's network (GraphSAGE + segment attention, no FiLM nor hint) and policy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO

import envs
from graphopt.nn.batching import obs_to_tensors
from policies.gdp import GDPNetwork, GDPPolicy

torch.set_num_threads(1)

GRAPHS = ["txl-tiny", "random-layered-100-s0"]
SMALL = dict(hidden=16, sage_layers=1, attn_layers=1, heads=2, segment_len=32, mem_len=32)


def _batch(env, indices):
    obs = [env.reset(options={"graph": i})[0] for i in indices]
    return {k: torch.as_tensor(np.stack([o[k] for o in obs])) for k in obs[0]}


def test_network_shapes_padding_and_no_hint():
    env = envs.PlacementEnv(GRAPHS, "v100-nvlink-4", seed=0)
    torch.manual_seed(0)
    net = GDPNetwork(4, **SMALL)
    obs = _batch(env, [0, 1])
    logits, value, mask = net(obs)
    assert logits["placement"].shape == (2, env.max_ops, 4) and value.shape == (2,)
    n = env.graphs[1].num_ops
    assert mask[1].sum() == n and torch.all(logits["placement"][1, n:] == 0)
    obs["hint"] = torch.zeros_like(obs["hint"])  # GDP starts from nothing: the hint is unread
    again, _, _ = net(obs)
    assert torch.equal(again["placement"], logits["placement"])
    names = " ".join(name for name, _ in net.named_parameters())
    assert "film" not in names and "hint" not in names


def test_each_graph_of_a_batch_is_computed_alone():
    """The batched network gives each graph what it gives that graph on its own."""
    env = envs.PlacementEnv(GRAPHS, "v100-nvlink-2", seed=0)
    torch.manual_seed(0)
    net = GDPNetwork(2, **SMALL)
    both, value, _ = net(_batch(env, [0, 1]))
    for b in (0, 1):
        alone, v, _ = net(obs_to_tensors(env.reset(options={"graph": b})[0]))
        assert torch.allclose(both["placement"][b], alone["placement"][0], atol=1e-5)
        assert torch.allclose(value[b], v[0], atol=1e-5)


def test_policy_learns_with_ppo_and_its_log_probabilities_agree():
    env = envs.PlacementEnv(GRAPHS, "v100-nvlink-2")
    model = PPO(GDPPolicy, env, n_steps=16, batch_size=16, n_epochs=1, seed=0, policy_kwargs=SMALL)
    model.learn(32)
    obs, _ = env.reset(seed=1)
    tensors, _ = model.policy.obs_to_tensor(obs)
    with torch.no_grad():
        actions, values, log_prob = model.policy(tensors)
        values2, log_prob2, entropy = model.policy.evaluate_actions(tensors, actions)
    assert torch.allclose(log_prob, log_prob2) and torch.allclose(values, values2)
    assert float(entropy[0]) > 0
    action, _ = model.predict(obs, deterministic=True)
    assert env.action_space.contains(action)


def test_policy_refuses_other_tasks_and_go_arguments():
    env = envs.PlacementEnv(GRAPHS, "v100-nvlink-2")
    with pytest.raises(ValueError, match="its task is placement, got 'joint'"):
        PPO(GDPPolicy, env, policy_kwargs={"task": "joint"})
    with pytest.raises(ValueError, match=r"unknown GDPPolicy argument\(s\) \['film'\]"):
        PPO(GDPPolicy, env, policy_kwargs={"film": False})
