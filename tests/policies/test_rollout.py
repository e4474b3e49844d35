"""check_compatible: a policy is refused, with the reason, by an environment it was not trained for."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from gymnasium import spaces

from envs.placement_edit import FEATURES, PlacementEditEnv
from policies.rollout import check_compatible


def test_an_edit_policy_with_an_older_observation_is_refused():
    env = PlacementEditEnv("suite:tiny", "v100-nvlink-4", candidates=4)
    same = SimpleNamespace(action_space=env.action_space, observation_space=env.observation_space)
    check_compatible(same, env)  # accepted
    older = spaces.Box(-100, 100, (5, len(FEATURES) - 2), np.float32)
    old = SimpleNamespace(action_space=env.action_space, observation_space=older)
    with pytest.raises(ValueError, match="must be retrained"):
        check_compatible(old, env)
    other = SimpleNamespace(
        action_space=spaces.Discrete(7), observation_space=env.observation_space
    )
    with pytest.raises(ValueError, match="number of candidates"):
        check_compatible(other, env)


def test_finetune_copies_the_model_in_memory_and_leaves_it_untouched(monkeypatch):
    import torch
    from stable_baselines3 import PPO

    from envs import make_env
    from policies import GOPolicy
    from policies.rollout import finetune

    torch.set_num_threads(1)

    def never(*args, **kwargs):
        raise AssertionError("finetune must not save or load a model file")

    env = make_env("placement", ["txl-tiny", "random-sp-100-s0"], "v100-nvlink-2", seed=0)
    kwargs = {"task": "placement", "hidden": 16, "sage_layers": 1, "attn_layers": 1, "heads": 2}
    model = PPO(GOPolicy, env, n_steps=16, batch_size=16, n_epochs=1, seed=0, policy_kwargs=kwargs)
    model.learn(16)  # an optimizer state to carry over
    monkeypatch.setattr(PPO, "load", never)
    monkeypatch.setattr(PPO, "save", never)
    weights = {k: v.clone() for k, v in model.policy.state_dict().items()}
    moments = model.policy.optimizer.state_dict()["state"][0]["exp_avg"].clone()
    tuned, used = finetune(model, env, 1, 16, seed=3)
    assert tuned is not model and used == 16
    assert tuned.env.envs[0].graphs[0].name == "random-sp-100-s0"  # the one graph alone
    assert tuned.policy_class is GOPolicy and tuned.n_steps == model.n_steps
    for key, value in model.policy.state_dict().items():
        assert torch.equal(value, weights[key]), key  # the original is untouched
    assert torch.equal(model.policy.optimizer.state_dict()["state"][0]["exp_avg"], moments)
    assert any(
        not torch.equal(v, weights[k]) for k, v in tuned.policy.state_dict().items()
    )  # the copy learned


# ------------------------------------------------------------------ runs with a decoder
def _decoder_model(graphs: str = "txl-tiny,wavenet-tiny"):
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    import envs
    from policies.decoder_policy import GODecoderPolicy

    env = envs.make_env("placement", graphs, "v100-nvlink-4", decoder="heft-lc", seed=0)
    kwargs = {"task": "placement", "hidden": 16, "segment_len": 32, "mem_len": 32}
    model = PPO(
        GODecoderPolicy, DummyVecEnv([lambda: env]), n_steps=8, seed=0, policy_kwargs=kwargs
    )
    return model, env


def test_decoder_run_greedy_sample_and_search_modes():
    from policies.rollout import run_policy

    model, env = _decoder_model()
    greedy = run_policy(model, env, 1, "greedy", seed=0)
    assert greedy.samples == 1 and greedy.speedup == 1.0  # every op anchored at first
    sampled = run_policy(model, env, 1, "sample:4", seed=0)
    assert sampled.samples == 4 and sampled.speedup >= greedy.speedup
    searched = run_policy(model, env, 1, "search:32", seed=0)
    assert searched.samples == 32 and searched.speedup >= greedy.speedup
    again = run_policy(model, env, 1, "search:32", seed=0)
    assert again.measurement.step_time == searched.measurement.step_time


def test_search_mode_needs_a_decoder_and_matching_actions():
    import envs
    from policies.rollout import check_compatible, run_policy

    model, _ = _decoder_model()
    plain = envs.make_env("placement", "txl-tiny", "v100-nvlink-4", seed=0)
    with pytest.raises(ValueError, match="trained for other decoder actions"):
        check_compatible(model, plain)
    with pytest.raises(ValueError, match="has no decoder: train with decoder: heft-lc"):
        run_policy(model, plain, 0, "search:8", seed=0)
