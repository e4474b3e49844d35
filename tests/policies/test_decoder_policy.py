from __future__ import annotations

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv

import envs
from policies.decoder_policy import GATE_BIAS, GODecoderPolicy, scalar_channels


def _model(task: str, **kwargs):
    env = envs.make_env(task, "txl-tiny,wavenet-tiny", "v100-nvlink-2", decoder="heft-lc", seed=0)
    model = PPO(
        GODecoderPolicy,
        DummyVecEnv([lambda: env]),
        n_steps=8,
        batch_size=8,
        n_epochs=1,
        seed=0,
        policy_kwargs={"task": task, "hidden": 16, "segment_len": 32, "mem_len": 32, **kwargs},
    )
    return env, model


@pytest.mark.parametrize("task", ["placement", "scheduling", "fusion", "joint"])
def test_greedy_decision_at_initialisation_is_the_reference(task):
    torch.set_num_threads(1)
    env, model = _model(task)
    for i in range(len(env.graphs)):
        obs, _ = env.reset(options={"graph": i})
        action, _ = model.predict(obs, deterministic=True)
        *_, info = env.step(action)
        if task in ("placement", "joint"):  # all gates start negative: every op anchored
            gates = action.reshape(len(env.channels), -1)[1, : env.graphs[i].num_ops]
            assert (gates < 0).all() and abs(float(gates.mean()) - GATE_BIAS) < 0.5
            assert info["step_time"] == info["reference_time"]
    model.learn(16)  # PPO trains it on the decoded decisions' rewards


def test_channel_order_and_log_std_per_kind():
    env, model = _model("joint", device_agnostic=True)
    policy = model.policy
    assert scalar_channels("joint") == ("shift", "gate", "priority", "fusion")
    assert policy.kinds == ["shift", "gate", "affinity", "priority", "fusion"]
    with torch.no_grad():
        policy.log_std.copy_(torch.arange(5.0))
    assert policy.channel_log_std().tolist() == [0, 1, 2, 2, 3, 4]
    assert len(env.channels) == 6


def test_a_discrete_action_space_is_refused():
    env = envs.make_env("placement", "txl-tiny", "v100-nvlink-2")
    with pytest.raises(ValueError, match="needs the Box action space of a decoder env"):
        PPO(GODecoderPolicy, DummyVecEnv([lambda: env]), policy_kwargs={"task": "placement"})


def test_samples_release_few_ops():
    env, model = _model("placement")
    obs, _ = env.reset(options={"graph": 0})
    n = env.graphs[0].num_ops
    released = [
        (model.predict(obs, deterministic=False)[0].reshape(4, -1)[1, :n] > 0).mean()
        for _ in range(20)
    ]
    assert 0 < float(np.mean(released)) < 0.05
