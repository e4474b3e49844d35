"""graphopt/SchedulingEdit-v0, FusionEdit-v0, JointEdit-v0: one simulated move per step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs  # noqa: F401  (registers the ids)
from envs import make_env
from envs.decision_edit import (
    FAMILIES,
    FEATURES,
    DecisionEditEnv,
    JointEditEnv,
    promote,
    ranks,
)
from envs.rewards import reward
from graphopt.sim import Simulator
from graphopt.sim.estimate import EstimateCostModel
from graphopt.tasks import TASKS as TASKS_BY_NAME
from graphopt.typing import Decision

GRAPHS = ["wavenet-tiny", "random-sp-100-s0"]
TASKS = ["scheduling-edit", "fusion-edit", "joint-edit"]


def make(task: str, **kwargs) -> DecisionEditEnv:
    kwargs.setdefault("candidates", 8)
    kwargs.setdefault("horizon", 12)
    env = make_env(task, GRAPHS, "v100-nvlink-4", **kwargs)
    assert isinstance(env, DecisionEditEnv)
    return env


def prior(obs: np.ndarray) -> int:
    return int(np.argmax(obs[:, FEATURES.index("prior")]))


def test_ranks_keep_the_order_and_promote_moves_one_op():
    # priorities 5, 1, 1, 0: order by level, ties by index: op3, op1, op2, op0
    assert ranks(np.array([5, 1, 1, 0])).tolist() == [3, 1, 2, 0]
    # op0 just ahead of op1: op3, op0, op1, op2
    assert promote(np.array([3, 1, 2, 0]), 0, 1).tolist() == [1, 2, 3, 0]


def test_ranked_priorities_simulate_the_same():
    env = make("scheduling-edit", seed=0)
    for i, g in enumerate(env.graphs):
        ref = env.reference(i)
        ranked = Decision(placement=ref.decision.placement, priority=ranks(ref.decision.priority))
        sim = Simulator()
        assert sim.evaluate(g, env.cluster, ranked).step_time == pytest.approx(
            ref.measurement.step_time, rel=1e-12
        )


@pytest.mark.parametrize("task", TASKS)
def test_passes_the_environment_checkers(task):
    env = make(task, seed=0)
    gym_check_env(env, skip_render_check=True)
    sb3_check_env(env, warn=False)
    made = gym.make(TASKS_BY_NAME[task].env_id, graphs=GRAPHS, cluster="v100-nvlink-4")
    assert type(made.unwrapped) is envs.ENV_CLASSES[task]


@pytest.mark.parametrize("task", TASKS)
def test_an_episode_is_a_hill_climb_whose_return_telescopes(task):
    env = make(task, seed=3)
    obs, info = env.reset(options={"graph": 1})
    start = env.measurement.step_time
    ref_time = env.reference(1).measurement.step_time
    total, done, times = 0.0, False, [start]
    while not done:
        assert env.observation_space.contains(obs) and np.isfinite(obs).all()
        obs, r, done, truncated, info = env.step(prior(obs))
        assert not truncated and r >= 0.0
        total += r
        times.append(env.measurement.step_time)
    assert all(b <= a for a, b in zip(times, times[1:], strict=False))  # never slower
    assert info["calls"] <= 1 + env.horizon
    expected = 100 * (
        reward("speedup", times[-1], True, ref_time) - reward("speedup", start, True, ref_time)
    )
    assert total == pytest.approx(expected, abs=1e-9)
    assert info["episode_return"] == pytest.approx(total)
    assert info["speedup"] == pytest.approx(ref_time / times[-1])


@pytest.mark.parametrize("task", TASKS)
def test_rollout_spends_exactly_its_calls_and_is_deterministic(task):
    env = make(task, seed=0)
    a = env.rollout(prior, 0, seed=5, calls=20)
    b = env.rollout(prior, 0, seed=5, calls=20)
    assert a[2] == b[2] <= 20
    assert a[1].step_time == b[1].step_time
    for name in ("placement", "priority", "fusion"):
        assert np.array_equal(getattr(a[0], name), getattr(b[0], name))
    # the decision it returns is the one measured
    m = Simulator().evaluate(env.graphs[0], env.cluster, a[0])
    assert m.step_time == pytest.approx(a[1].step_time, rel=1e-12)
    with pytest.raises(ValueError, match="calls must be >= 1"):
        env.rollout(prior, 0, calls=0)


@pytest.mark.parametrize("task", TASKS)
def test_rollout_is_the_episode_reset_on_that_graph_would_play(task):
    """A rollout plays the episode ``reset(seed, options={"graph": i})`` starts, stepped with the
    same policy."""
    env = make(task, seed=0)
    decision, m, _ = env.rollout(prior, 1, seed=3)
    obs, _ = env.reset(seed=3, options={"graph": 1})
    for _ in range(env.horizon):
        obs, *_ = env.step(prior(obs))
    assert m.step_time == env._m.step_time
    for name in ("placement", "priority", "fusion"):
        assert np.array_equal(getattr(decision, name), getattr(env.decision(), name))


def test_offered_moves_are_legal_and_of_the_task_families():
    env = make("joint-edit", seed=1, candidates=16)
    seen = set()
    for _ in range(6):
        env.reset(options={"graph": 0})
        rules = env.sim.prepare(env.graphs[0], env.cluster).rules
        for move in env._cand:
            seen.add(FAMILIES[move.family])
            placement, _, fusion = env._moved(move)
            assert rules.violation(placement, fusion)[0] == 0
    assert seen == set(FAMILIES)
    sched = make("scheduling-edit", seed=1)
    sched.reset(options={"graph": 0})
    assert {FAMILIES[m.family] for m in sched._cand} <= {"priority"}


def test_priority_moves_promote_ahead_of_an_op_that_overtook():
    env = make("scheduling-edit", seed=0)
    env.reset(options={"graph": 0})
    t = env._times
    assert t is not None and env._cand
    for move in env._cand:
        op, ahead = move.op, move.value
        assert env.placement[op] == env.placement[ahead]
        assert t.ready[op] <= t.start[ahead] < t.start[op]
        promoted = promote(env.priority, op, ahead)
        assert promoted[op] + 1 == promoted[ahead]


def test_tried_moves_are_marked_until_the_decision_changes():
    env = make("fusion-edit", seed=0, candidates=4, horizon=40)
    obs, _ = env.reset(options={"graph": 1})
    tried = FEATURES.index("tried")
    for _ in range(40):
        move = env._cand[0] if env._cand else None
        kept = env._try(0)
        if move is not None and not kept:
            assert move in env._tried
        if kept:
            assert not env._tried
        obs = env._draw()
        marked = [m in env._tried for m in env._cand]
        assert obs[: len(marked), tried].tolist() == [float(x) for x in marked]


def test_another_cost_model_is_refused():
    with pytest.raises(ValueError, match="simulator's schedules"):
        JointEditEnv(GRAPHS, "v100-nvlink-4", cost_model=EstimateCostModel())


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="candidates and horizon"):
        make("fusion-edit", candidates=0)
    env = make("fusion-edit", seed=0)
    with pytest.raises(ValueError, match="outside"):
        env.step(99)


@pytest.mark.parametrize("task", ["scheduling-edit", "fusion-edit", "joint-edit"])
def test_an_action_that_is_not_one_integer_is_refused(task):
    env = make(task, seed=0)
    with pytest.raises(ValueError, match=r"action must be an integer, got 1\.5; expected a cand"):
        env.step(1.5)
    with pytest.raises(ValueError, match=r"action has shape \(2,\); expected \(\)"):
        env.step(np.array([0, 1]))
    assert env._steps == 0  # nothing refused counted as a step
    env.step(np.float32(0.0))  # a whole number is its index, as in the one-shot environments
    assert env._steps == 1


def test_an_untrained_move_policy_is_the_prior_hill_climb_and_search_spends_k():
    import torch
    from stable_baselines3 import PPO

    from graphopt.modes import parse_mode
    from policies import MovePolicy
    from policies.rollout import run_policy

    torch.set_num_threads(1)
    env = make("fusion-edit", seed=0)
    model = PPO(MovePolicy, env, n_steps=16, batch_size=16, device="cpu", seed=0)
    result = run_policy(model, env, 1, "search:24", seed=2)
    _, by_prior, calls = env.rollout(prior, 1, seed=2, calls=24)
    assert result.samples == calls <= 24
    assert result.measurement.step_time == by_prior.step_time
    assert run_policy(model, env, 1, "greedy").samples <= 1 + env.horizon
    assert parse_mode("search:8", "joint-edit") == ("search", 8)
    with pytest.raises(ValueError, match="use greedy or search:K"):
        parse_mode("sample:8", "scheduling-edit")
