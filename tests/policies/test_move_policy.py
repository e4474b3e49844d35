"""MovePolicy: shapes, order of candidates, the rule it starts from, and stock PPO."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3 import PPO

from envs import make_env
from envs.placement_edit import FEATURES, PlacementEditEnv
from graphopt.graph import CompGraph, Op
from policies import MovePolicy
from policies.move_policy import MoveScorer
from policies.rollout import run_policy

torch.set_num_threads(1)


def test_scorer_shapes_and_candidate_order():
    torch.manual_seed(0)
    scorer = MoveScorer(len(FEATURES), hidden=8)
    torch.nn.init.normal_(scorer.logit.weight)  # leave the zero start, so order matters
    x = torch.randn(3, 7, len(FEATURES))
    logits, value = scorer(x)
    assert logits.shape == (3, 7) and value.shape == (3,)
    perm = torch.randperm(7)
    p_logits, p_value = scorer(x[:, perm])
    assert torch.allclose(p_logits, logits[:, perm], atol=1e-6)  # equivariant
    assert torch.allclose(p_value, value, atol=1e-6)  # invariant
    more = scorer(torch.randn(2, 40, len(FEATURES)))[0]  # any number of candidates
    assert more.shape == (2, 40)


def test_untrained_greedy_policy_is_the_estimate_rule():
    env = PlacementEditEnv("random-sp-100-s0", cluster="v100-nvlink-4", candidates=8, seed=0)
    model = PPO(MovePolicy, env, n_steps=16, batch_size=16, device="cpu", seed=0)
    gain = FEATURES.index("gain")
    obs, _ = env.reset(seed=0)
    for _ in range(20):
        action = int(model.predict(obs, deterministic=True)[0])
        assert action == int(np.argmax(obs[:, gain]))
        obs, *_ = env.step(action)
    flat = PPO(MovePolicy, env, policy_kwargs={"gain_prior": 0.0}, device="cpu", seed=0)
    logits = flat.policy.scorer(torch.as_tensor(obs)[None])[0]
    assert torch.allclose(logits, logits[0, 0].expand_as(logits))  # uniform start


def test_stock_ppo_learns_saves_and_loads(tmp_path):
    env = PlacementEditEnv("txl-tiny", cluster="v100-nvlink-2", candidates=4, horizon=8, seed=0)
    model = PPO(
        MovePolicy,
        env,
        n_steps=32,
        batch_size=16,
        n_epochs=2,
        device="cpu",
        seed=0,
        policy_kwargs={"hidden": 16},
    )
    model.learn(64)
    model.save(tmp_path / "m.zip")
    loaded = PPO.load(tmp_path / "m.zip", device="cpu")
    obs, _ = env.reset(seed=1)
    assert model.predict(obs, deterministic=True)[0] == loaded.predict(obs, deterministic=True)[0]
    values, log_prob, entropy = loaded.policy.evaluate_actions(
        torch.as_tensor(obs)[None], torch.tensor([0])
    )
    assert values.shape == (1, 1) and log_prob.shape == (1,) and entropy.shape == (1,)


def test_bad_spaces_and_arguments():
    box = spaces.Box(-1, 1, (5, len(FEATURES)))
    with pytest.raises(ValueError, match="Discrete"):
        MovePolicy(box, spaces.Discrete(4), lambda _: 1e-3)
    with pytest.raises(ValueError, match="Box observation"):
        MovePolicy(spaces.Box(-1, 1, (5,)), spaces.Discrete(5), lambda _: 1e-3)
    with pytest.raises(ValueError, match=r"unknown MovePolicy argument\(s\) \['depth'\]"):
        MovePolicy(box, spaces.Discrete(5), lambda _: 1e-3, depth=3)


def test_acts_on_a_graph_where_no_placement_fits():
    # every op's 40 GB of parameters is over every device's 16 GB: no valid start, no valid move
    ops = [
        Op(f"op{i}", "MatMul", flops=1e9, bytes_accessed=1e6, output_bytes=1e6, param_bytes=40e9)
        for i in range(5)
    ]
    graph = CompGraph.build("heavy", ops, [(f"op{i}", f"op{i + 1}", 1e6) for i in range(4)])
    env = make_env("placement-edit", [graph], "v100-nvlink-2", candidates=4, horizon=4)
    model = PPO(MovePolicy, env, n_steps=16, batch_size=16, device="cpu", seed=0)
    obs, _ = env.reset(seed=0)
    dist = model.policy.get_distribution(torch.as_tensor(obs)[None])
    assert torch.isfinite(dist.distribution.logits).all()
    result = run_policy(model, env, 0)
    assert result.decision.placement is not None and len(result.decision.placement) == 5
    assert not result.measurement.valid and "out of memory" in result.measurement.reason


def test_a_malformed_observation_still_gives_finite_logits():
    env = PlacementEditEnv("txl-tiny", cluster="v100-nvlink-2", candidates=4, horizon=4, seed=0)
    model = PPO(MovePolicy, env, n_steps=16, batch_size=16, device="cpu", seed=0)
    obs = torch.as_tensor(env.reset(seed=0)[0])[None].clone()
    obs[0, 2, :] = torch.nan
    obs[0, 3, 0] = torch.inf
    logits = model.policy.get_distribution(obs).distribution.logits
    assert torch.isfinite(logits).all()
    assert int(logits.argmax()) == 3  # +inf gain, read as +CLIP: the best row
