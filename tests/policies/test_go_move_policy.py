"""GOMovePolicy: the GO graph network scoring an edit environment's candidate moves."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3 import PPO

from envs import make_env
from envs.decision_edit import FEATURES, OP_STATE
from policies import GOMovePolicy, MovePolicy

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def env():
    return make_env(
        "joint-edit",
        ["wavenet-tiny", "random-sp-100-s0"],
        "v100-nvlink-4",
        candidates=6,
        horizon=8,
        obs_mode="graph",
        seed=0,
    )


def test_the_graph_observation(env):
    obs, _ = env.reset(options={"graph": 1})
    assert env.observation_space.contains(obs)
    n = env.graphs[1].num_ops
    assert obs["op_state"].shape == (env.max_ops, len(OP_STATE))
    assert not obs["op_state"][n:].any()  # padding slots
    assert obs["op_state"][:n, OP_STATE.index("critical")].any()
    assert [m.op for m in env._cand] == obs["row_op"][: len(env._cand)].tolist()
    with pytest.raises(ValueError, match="has 226 ops but max_ops is 10; pass max_ops >= 226"):
        make_env("fusion-edit", "wavenet-tiny", "v100-nvlink-4", obs_mode="graph", max_ops=10)
    with pytest.raises(ValueError, match="unknown obs_mode"):
        make_env("fusion-edit", "wavenet-tiny", "v100-nvlink-4", obs_mode="pixels")


def test_untrained_it_follows_the_prior_and_it_learns(env):
    model = PPO(
        GOMovePolicy,
        env,
        n_steps=16,
        batch_size=8,
        n_epochs=1,
        device="cpu",
        seed=0,
        policy_kwargs={"hidden": 8, "layers": 1},
    )
    prior = FEATURES.index("prior")
    obs, _ = env.reset(options={"graph": 0})
    for _ in range(5):
        action, _ = model.predict(obs, deterministic=True)
        assert int(action) == int(np.argmax(obs["rows"][:, prior]))
        obs, *_ = env.step(int(action))
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(32)
    after = list(model.policy.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    obs, _ = env.reset(options={"graph": 1})
    tensors, _ = model.policy.obs_to_tensor(obs)
    values = model.policy.predict_values(tensors)
    assert values.shape == (1, 1) and torch.isfinite(values).all()


def test_the_wrong_spaces_are_refused():
    rows = spaces.Box(-100, 100, (4, len(FEATURES)), np.float32)
    with pytest.raises(ValueError, match="obs_mode='graph'"):
        GOMovePolicy(rows, spaces.Discrete(4), lambda _: 1e-3)
    with pytest.raises(ValueError, match="unknown GOMovePolicy argument"):
        GOMovePolicy(rows, spaces.Discrete(4), lambda _: 1e-3, width=3)
    assert issubclass(GOMovePolicy, MovePolicy.__mro__[1])  # both are CandidatePolicy
