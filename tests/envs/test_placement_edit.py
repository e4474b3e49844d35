"""graphopt/PlacementEdit-v0: one move at a time from the best heuristic."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs  # noqa: F401  (registers the ids)
from envs.placement_edit import (
    CLIP,
    FEATURES,
    PlacementEditEnv,
    move_features,
    percent_gain,
    symlog,
    vetted_gain,
)
from envs.rewards import reward
from graphopt.graph import CompGraph, Op
from graphopt.hardware import Cluster, get_cluster
from graphopt.sim import Simulator
from graphopt.sim.estimate import PlacementEstimate
from graphopt.typing import Decision

GRAPHS = ["txl-tiny", "random-sp-100-s0"]


def make(**kwargs):
    kwargs.setdefault("cluster", "v100-nvlink-4")
    return PlacementEditEnv(GRAPHS, candidates=8, horizon=12, **kwargs)


def best_gain(obs: np.ndarray) -> int:
    """The rule: the row of the highest estimated gain, the pass (row 0) on ties."""
    return int(np.argmax(obs[:, FEATURES.index("gain")]))


def test_registered_and_passes_both_env_checkers():
    env = gym.make("graphopt/PlacementEdit-v0", graphs=GRAPHS, candidates=4, horizon=3)
    gym_check_env(env.unwrapped, skip_render_check=True)
    sb3_check_env(make(), warn=True)


def test_episode_starts_at_the_reference_and_lasts_horizon_steps():
    env = make(seed=1)
    obs, info = env.reset(seed=1, options={"graph": 0})
    ref = env.reference(0)
    assert np.array_equal(env.placement, ref.decision.placement)
    assert obs.shape == (9, len(FEATURES)) and env.observation_space.contains(obs)
    assert obs[0, FEATURES.index("is_pass")] == 1 and obs[1:, FEATURES.index("is_pass")].sum() == 0
    assert obs[0, FEATURES.index("gain")] == 0
    for t in range(12):
        obs, r, terminated, truncated, info = env.step(0)
        assert r == 0.0 and not truncated
        assert terminated == (t == 11)
    assert info["speedup"] == pytest.approx(1.0) and info["moves"] == 0
    assert np.array_equal(env.placement, ref.decision.placement)  # passes change nothing


def test_a_move_changes_one_op_and_rewards_telescope_to_the_final_speedup():
    env, sim = make(seed=3), Simulator()
    env.reset(seed=3, options={"graph": 1})
    ref_time = env.reference(1).measurement.step_time
    total, rng = 0.0, np.random.default_rng(0)
    for _ in range(12):
        before = env.placement.copy()
        action = int(rng.integers(1, 9))
        _, r, done, _, info = env.step(action)
        assert (env.placement != before).sum() == 1
        total += r
    m = sim.evaluate(env.graphs[1], env.cluster, Decision(placement=env.placement))
    assert info["step_time"] == pytest.approx(m.step_time)
    assert info["episode_return"] == pytest.approx(total)
    expected = 100 * (reward("speedup", m.step_time, m.valid, ref_time) - 0.0)
    assert total == pytest.approx(expected, abs=1e-9)


def test_rollout_is_deterministic_needs_no_cost_model_and_the_rule_only_lowers_the_estimate():
    class Refuses:
        def evaluate(self, graph, cluster, decision):
            raise AssertionError("rollout must not call the cost model")

    env = make()
    start = env.reference(1).decision.placement  # references are computed with the simulator
    env.cost_model = Refuses()
    a = env.rollout(best_gain, 1, seed=5).placement
    b = env.rollout(best_gain, 1, seed=5).placement
    assert np.array_equal(a, b)
    est = PlacementEstimate(env.graphs[1], env.cluster)
    append = PlacementEstimate(env.graphs[1], env.cluster, window=0)
    start = np.asarray(start)[None]
    assert est(a[None])[0] < est(start)[0]  # the rule found a better estimate
    assert append(a[None])[0] <= append(start)[0]  # and never a worse append-only one


def test_bad_input():
    four = get_cluster("v100-nvlink-4")
    one = Cluster("one", four.devices[:1], np.ones((1, 1)), np.zeros((1, 1)))
    with pytest.raises(ValueError, match="one device"):
        PlacementEditEnv(GRAPHS, cluster=one)
    with pytest.raises(ValueError, match="must be >= 1"):
        PlacementEditEnv(GRAPHS, candidates=0)
    env = make(seed=0)
    with pytest.raises(ValueError, match=r"outside 0..8"):
        env.step(9)
    with pytest.raises(ValueError, match=r"action must be an integer, got 1\.5"):
        env.step(1.5)
    with pytest.raises(ValueError, match=r"action has shape \(2,\); expected \(\)"):
        env.step(np.array([1, 2]))
    with pytest.raises(ValueError, match=r"action must be an integer"):
        env.advance(0.5)
    assert env._steps == 0  # nothing refused counted as a step
    env.step(np.float64(1.0))  # a whole number is its index, as in the one-shot environments
    with pytest.raises(ValueError, match="outside"):
        env.reset(options={"graph": 5})


def test_move_features():
    gains = np.array([0.5, -2.0, np.inf * -1, np.nan, 0.5])
    ones = np.ones(5)
    insert, append = gains * 2, -ones
    out = move_features(gains, ones, ones * 2, ones * 0.3, ones * 0.7, 1.0, 0.25, insert, append)
    g = FEATURES.index("gain")
    assert out.shape == (6, len(FEATURES)) and out.dtype == np.float32
    assert out[0, g] == 0 and out[1, g] == pytest.approx(symlog(np.array(0.5)))
    assert out[3, g] == out[4, g] == pytest.approx(symlog(np.array(-CLIP)))  # unplaceable
    rank = out[:, FEATURES.index("gain_rank")]
    assert rank[1] == 0 and rank[5] == pytest.approx(0.2) and rank[0] == pytest.approx(0.4)
    assert out[:, FEATURES.index("gain_gap")].max() == 0
    assert (out[:, FEATURES.index("progress")] == 0.25).all()
    assert out[0, FEATURES.index("op_old")] == 0 and out[
        1, FEATURES.index("load_new")
    ] == pytest.approx(0.7)
    assert out[1, FEATURES.index("gain_insert")] == pytest.approx(symlog(np.array(1.0)))
    assert out[1:, FEATURES.index("gain_append")] == pytest.approx(
        np.full(5, symlog(np.array(-1.0)))
    )
    assert out[0, FEATURES.index("gain_insert")] == out[0, FEATURES.index("gain_append")] == 0
    assert symlog(np.array([0.1, -1.0])) == pytest.approx([np.log(2), -np.log(11)])


def test_vetted_gain_keeps_the_insertion_gain_only_where_the_append_schedule_does_not_worsen():
    insert = np.array([0.5, 0.5, -0.2, 0.3, -1.0])
    append = np.array([0.1, -0.1, 0.4, 0.0, -0.5])
    assert vetted_gain(insert, append) == pytest.approx([0.5, -0.1, -0.2, 0.3, -1.0])
    assert (vetted_gain(insert, append)[append < 0] < 0).all()  # never taken by the rule


# ---------------------------------------------------------------- graphs whose parameters do not fit
def heavy_chain(num_ops: int, param_bytes: float) -> CompGraph:
    """A chain of ``num_ops`` matmuls of ``param_bytes`` parameters each."""
    ops = [
        Op(
            f"op{i}",
            "MatMul",
            flops=1e9,
            bytes_accessed=1e6,
            output_bytes=1e6,
            param_bytes=param_bytes,
        )
        for i in range(num_ops)
    ]
    return CompGraph.build(
        "heavy", ops, [(f"op{i}", f"op{i + 1}", 1e6) for i in range(num_ops - 1)]
    )


def test_percent_gain_is_never_nan():
    before = np.array([2.0, 2.0, np.inf, np.inf, 0.0])
    after = np.array([1.0, np.inf, 1.0, np.inf, 1.0])
    assert percent_gain(before, after) == pytest.approx([50.0, -np.inf, np.inf, 0.0, 0.0])
    assert float(percent_gain(np.inf, np.inf)) == 0.0


def test_observations_stay_finite_where_no_placement_fits():
    # every op alone (40 GB) is over the memory of every device (16 GB): no placement fits
    env = PlacementEditEnv([heavy_chain(6, 40e9)], "v100-nvlink-2", candidates=4, horizon=6)
    ref = env.reference(0)
    assert not ref.measurement.valid
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(6):
        assert np.isfinite(obs).all() and env.observation_space.contains(obs)
        assert (obs[:, FEATURES.index("gain")] == 0).all()  # no move fits: none gains
        obs, r, done, _, info = env.step(int(rng.integers(0, 5)))
        assert np.isfinite(r)
    assert done and not info["valid"]  # the start was not valid either: it is not passed off as one
    assert np.isfinite(obs).all()
    placement = env.rollout(best_gain, 0, seed=1).placement
    assert placement is not None and placement.shape == (6,)


def test_a_move_that_makes_the_placement_fit_gains_the_most():
    # two ops of 10 GB on one 16 GB device (the "single" reference) do not fit; split, they do
    env = PlacementEditEnv(
        [heavy_chain(2, 10e9)], "v100-nvlink-2", reference="single", candidates=4, horizon=2
    )
    obs, _ = env.reset(seed=0)
    assert np.isfinite(obs).all()
    gain = obs[:, FEATURES.index("gain")]
    assert gain[0] == 0 and gain[1:] == pytest.approx(np.full(4, symlog(np.array(CLIP))))
    assert obs[0, FEATURES.index("gained")] == 0
    obs, r, _, _, _ = env.step(best_gain(obs))
    assert r > 0  # from out of memory to valid
    assert obs[0, FEATURES.index("gained")] == pytest.approx(symlog(np.array(CLIP)))
    assert np.isfinite(obs).all()


def test_move_features_are_finite_whatever_the_input():
    nan = np.full(3, np.nan)
    out = move_features(nan, nan, nan, nan, nan, np.nan, 0.5, nan, -np.inf * np.ones(3))
    assert np.isfinite(out).all()
    assert out[:, FEATURES.index("gained")] == pytest.approx(np.full(4, symlog(np.array(-CLIP))))
