"""policies.placeto: Placeto's embedding of the current placement and its device choice."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO

import envs
from envs.placeto import PlacetoEnv
from graphopt.nn.batching import obs_to_tensors
from policies.placeto import PlacetoNetwork, PlacetoPolicy

torch.set_num_threads(1)

GRAPHS = ["random-layered-16-s1", "random-sp-12-s0"]


def test_pool_is_the_mean_over_each_group():
    """The slow twin: a loop over graphs and nodes."""
    torch.manual_seed(0)
    h = torch.randn(7, 3)
    graph = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    member = torch.tensor([True, False, True, False, False, True, True])
    pooled = PlacetoNetwork._pool(h, graph, member, 3)
    for b in range(3):
        rows = [h[i] for i in range(7) if graph[i] == b and member[i]]
        want = torch.stack(rows).mean(0) if rows else torch.zeros(3)
        assert torch.allclose(pooled[b], want)


def test_each_observation_of_a_batch_is_computed_alone():
    env = PlacetoEnv(GRAPHS, "v100-nvlink-4", seed=0)
    torch.manual_seed(0)
    net = PlacetoNetwork(4, hidden=16, layers=2)
    obs = [env.reset(options={"graph": i})[0] for i in (0, 1)]
    obs.append(env.step(1)[0])
    batch = {k: torch.as_tensor(np.stack([o[k] for o in obs])) for k in obs[0]}
    logits, value = net(batch)
    assert logits.shape == (3, 4) and value.shape == (3,)
    for b, o in enumerate(obs):
        alone, v = net(obs_to_tensors(o))
        assert torch.allclose(logits[b], alone[0], atol=1e-5)
        assert torch.allclose(value[b], v[0], atol=1e-5)


def test_the_visited_nodes_device_changes_the_embedding():
    env = PlacetoEnv(GRAPHS, "v100-nvlink-2", start="single", seed=0)
    torch.manual_seed(0)
    net = PlacetoNetwork(2, hidden=16, layers=2)
    obs, _ = env.reset(options={"graph": 0})
    before, _ = net(obs_to_tensors(obs))
    obs["placement"][3] = 1
    after, _ = net(obs_to_tensors(obs))
    assert not torch.allclose(before, after)


def test_learns_with_ppo_and_refuses_other_environments():
    env = PlacetoEnv(GRAPHS, "v100-nvlink-2", seed=0)
    model = PPO(
        PlacetoPolicy,
        env,
        n_steps=16,
        batch_size=16,
        n_epochs=1,
        seed=0,
        policy_kwargs={"hidden": 16, "layers": 2},
    )
    model.learn(32)
    obs, _ = env.reset(seed=1)
    tensors, _ = model.policy.obs_to_tensor(obs)
    with torch.no_grad():
        actions, _, log_prob = model.policy(tensors)
        _, again, entropy = model.policy.evaluate_actions(tensors, actions)
    assert torch.allclose(log_prob, again) and float(entropy[0]) > 0
    with pytest.raises(ValueError, match="needs the environment of envs.placeto"):
        PPO(PlacetoPolicy, envs.PlacementEnv(GRAPHS, "v100-nvlink-2"))
