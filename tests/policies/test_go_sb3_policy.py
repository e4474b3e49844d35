"""policies.sb3_policy: GOPolicy inside stock Stable-Baselines3 PPO."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3 import PPO

import envs
from graphopt.encoding import observation_space
from policies.sb3_policy import GOPolicy, check_blocks

torch.set_num_threads(1)

GRAPHS = ["txl-tiny", "random-layered-100-s0"]
SMALL_NET = dict(hidden=16, segment_len=64, mem_len=64)


def _learn(env, **policy_kwargs) -> PPO:
    model = PPO(
        GOPolicy,
        env,
        n_steps=16,
        batch_size=8,
        n_epochs=1,
        seed=0,
        policy_kwargs={"task": env.unwrapped.task, **policy_kwargs},
    )
    model.learn(32)  # two rollouts, each followed by an update
    return model


@pytest.mark.parametrize("env_cls", [envs.PlacementEnv, envs.JointEnv, envs.FusionEnv])
def test_ppo_learns_and_predicts(env_cls, tmp_path):
    env = env_cls(graphs=GRAPHS, cluster="v100-nvlink-2")
    model = _learn(env, task=env.task)
    assert model.policy.task == env.task
    obs, _ = env.reset(seed=1)
    action, _ = model.predict(obs, deterministic=True)
    assert env.action_space.contains(action)
    n = int(obs["counts"][0])
    assert np.all(action.reshape(-1, env.max_ops)[:, n:] == 0)
    env.step(action)
    # save / load round trip: same deterministic action
    model.save(tmp_path / "model.zip")
    loaded = PPO.load(tmp_path / "model.zip")
    again, _ = loaded.predict(obs, deterministic=True)
    assert np.array_equal(action, again)


def test_obs_mode_id(tmp_path):
    env = envs.PlacementEnv(graphs=GRAPHS, cluster="v100-nvlink-2", obs_mode="id")
    model = _learn(env, graphs=env.encoded_graphs())
    obs, _ = env.reset(seed=0)
    action, _ = model.predict(obs, deterministic=True)
    assert env.action_space.contains(action)
    model.save(tmp_path / "model.zip")
    again, _ = PPO.load(tmp_path / "model.zip").predict(obs, deterministic=True)
    assert np.array_equal(action, again)


def test_policy_save_load(tmp_path):
    env = envs.JointEnv(graphs=GRAPHS, cluster="v100-nvlink-2")
    policy = GOPolicy(
        env.observation_space, env.action_space, lambda _: 1e-3, task=env.task, **SMALL_NET
    )
    policy.save(str(tmp_path / "policy.pt"))
    loaded = GOPolicy.load(str(tmp_path / "policy.pt"))
    obs, _ = env.reset(seed=0)
    assert np.array_equal(
        policy.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0]
    )


def test_forward_shapes():
    env = envs.JointEnv(graphs=GRAPHS, cluster="v100-nvlink-2")
    policy = GOPolicy(
        env.observation_space, env.action_space, lambda _: 1e-3, task=env.task, **SMALL_NET
    )
    obs, _ = env.reset(seed=0)
    batch = {k: torch.as_tensor(np.stack([v, v])) for k, v in obs.items()}
    actions, values, log_prob = policy(batch)
    assert (
        actions.shape == (2, 3 * env.max_ops) and values.shape == (2, 1) and log_prob.shape == (2,)
    )
    values2, log_prob2, entropy = policy.evaluate_actions(batch, actions.float())
    torch.testing.assert_close(log_prob2, log_prob)
    assert entropy.shape == (2,) and torch.all(entropy > 0)
    assert policy.predict_values(batch).shape == (2, 1)


def test_check_blocks():
    md = lambda *ks: spaces.MultiDiscrete(np.repeat(np.array(ks), 5))  # noqa: E731
    assert check_blocks(md(4, 8, 2), 5, "joint") == {"placement": 4, "scheduling": 8, "fusion": 2}
    assert check_blocks(md(4), 5, "placement") == {"placement": 4}
    assert check_blocks(md(8), 5, "scheduling") == {"scheduling": 8}
    assert check_blocks(md(2), 5, "fusion") == {"fusion": 2}
    with pytest.raises(ValueError, match="expects blocks"):
        check_blocks(md(4), 5, "joint")
    with pytest.raises(ValueError, match="expects blocks"):
        check_blocks(md(3), 5, "fusion")
    with pytest.raises(ValueError, match="unknown task"):
        check_blocks(md(4), 5, "routing")
    with pytest.raises(ValueError, match="unknown task"):
        check_blocks(md(4), 5, "placement-edit")
    with pytest.raises(ValueError, match="multiple of max_ops"):
        check_blocks(md(4), 7, "placement")


def test_bad_policy_kwargs():
    space = observation_space(10, 40)
    actions = spaces.MultiDiscrete(np.full(10, 2))
    with pytest.raises(ValueError, match="unknown GOPolicy argument"):
        GOPolicy(space, actions, lambda _: 1e-3, task="fusion", hiden=8)
    with pytest.raises(ValueError, match="needs its task"):
        GOPolicy(space, actions, lambda _: 1e-3)
    with pytest.raises(ValueError, match="encoded_graphs"):
        GOPolicy(
            spaces.Dict({"graph_id": spaces.Box(0, 1, (1,), np.int64)}),
            actions,
            lambda _: 1e-3,
            task="fusion",
        )


def test_hint_sets_the_initial_greedy_decision():
    torch.manual_seed(0)
    env = envs.PlacementEnv(graphs=["txl-tiny"], cluster="v100-nvlink-4", seed=0)
    model = PPO(
        GOPolicy, env, n_steps=32, batch_size=16, policy_kwargs={"task": "placement"}, device="cpu"
    )
    obs, _ = env.reset(seed=0)
    n = int(obs["counts"][0])
    action, _ = model.predict(obs, deterministic=True)
    assert action[:n].tolist() == obs["hint"][:n].tolist()  # starts at the reference decision
    assert (action[n:] == 0).all()
    no_hint = envs.PlacementEnv(graphs=["txl-tiny"], cluster="v100-nvlink-4", hint=False, seed=0)
    obs2, _ = no_hint.reset(seed=0)
    logits_with, *_ = model.policy.network(policies_batch(obs))
    logits_without, *_ = model.policy.network(policies_batch(obs2))
    assert not torch.allclose(logits_with["placement"], logits_without["placement"])


def policies_batch(obs):
    from graphopt.nn.batching import graph_batch, obs_to_tensors

    return graph_batch(obs_to_tensors(obs))


def test_masked_fusion_bits_are_never_chosen():
    env = envs.make_env("fusion", ["txl-tiny"], "v100-nvlink-2", seed=0)
    policy = GOPolicy(
        env.observation_space,
        env.action_space,
        lambda _: 1e-3,
        task="fusion",
        hint_weight=0.0,
        **SMALL_NET,
    )
    obs, _ = env.reset(seed=0)
    mask = obs["fusion_mask"].astype(bool)
    batch = {k: torch.as_tensor(np.stack([v] * 64)) for k, v in obs.items()}
    with torch.no_grad():
        actions, _, _ = policy(batch)
    assert actions.shape == (64, env.max_ops)
    chosen = actions.numpy().astype(bool)
    assert not np.any(chosen[:, ~mask]) and np.any(chosen[:, mask])
