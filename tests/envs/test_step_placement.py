"""graphopt/StepPlacement-v0: placement one op per step inside the list scheduler."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.step_placement import ENV_ID, StepPlacementEnv
from graphopt.decoders.stepwise import ANCHOR_FEATURE, SCHEDULE_FEATURES
from graphopt.sim import simulate
from graphopt.typing import Decision

GRAPHS = ["txl-tiny", "random-sp-100-s0"]


def play(env: StepPlacementEnv, choose) -> tuple[float, dict]:
    obs, _ = env.reset(seed=0, options={"graph": 1})
    total, done, info = 0.0, False, {}
    while not done:
        obs, reward, done, truncated, info = env.step(choose(obs))
        assert not truncated
        total += reward
    return total, info


def test_passes_the_checkers(check_env) -> None:
    check_env(StepPlacementEnv(GRAPHS, "v100-nvlink-4"))


def test_registered() -> None:
    env = gym.make(ENV_ID, graphs="txl-tiny", cluster="v100-nvlink-2")
    obs, info = env.reset(seed=1)
    assert info["num_ops"] == 227
    assert obs["action_mask"][:2].all() and not obs["action_mask"][2:].any()


def test_anchor_policy_reproduces_the_reference_and_returns_zero() -> None:
    env = StepPlacementEnv(GRAPHS, "v100-nvlink-4")
    total, info = play(env, lambda obs: int(np.argmax(obs["candidates"][:, ANCHOR_FEATURE])))
    ref = env.reference(1)
    assert np.array_equal(info["placement"], ref.decision.placement)
    assert info["speedup"] == pytest.approx(1.0)
    # the return is 1 - t / t_ref, summed step by step
    assert total == pytest.approx(0.0, abs=1e-9)
    assert info["episode_return"] == pytest.approx(total)


def test_return_is_one_minus_time_ratio() -> None:
    env = StepPlacementEnv(GRAPHS, "v100-nvlink-4")
    rng = np.random.default_rng(3)
    total, info = play(env, lambda obs: int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    graph = env.graphs[1]
    m = simulate(graph, env.cluster, Decision(placement=info["placement"]))
    assert info["step_time"] == pytest.approx(m.step_time)
    assert total == pytest.approx(1.0 - m.step_time / info["reference_time"])


def test_min_eft_policy_is_heft_lc() -> None:
    from graphopt.baselines.heft import heft_contention

    env = StepPlacementEnv(GRAPHS, "v100-nvlink-4")
    column = SCHEDULE_FEATURES.index("is_min_eft")
    _, info = play(env, lambda obs: int(np.argmax(obs["candidates"][:, column])))
    assert np.array_equal(info["placement"], heft_contention(env.graphs[1], env.cluster))


def test_bad_actions() -> None:
    env = StepPlacementEnv(GRAPHS, "v100-nvlink-4")
    with pytest.raises(gym.error.ResetNeeded):
        env.step(0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="outside"):
        env.step(7)
    with pytest.raises(ValueError, match="integer"):
        env.step(1.5)
