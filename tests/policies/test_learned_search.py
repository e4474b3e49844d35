"""The learned search: its budget, its start, its twin ranked by the estimate, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO

from envs.placement_edit import PlacementEditEnv
from graphopt.modes import parse_mode
from graphopt.sim import simulate
from graphopt.typing import Decision
from policies import MovePolicy
from policies.learned_search import learned_search
from policies.rollout import run_policy

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup() -> tuple[PPO, PlacementEditEnv]:
    env = PlacementEditEnv("random-sp-100-s0", cluster="v100-nvlink-4", candidates=8, seed=0)
    model = PPO(MovePolicy, env, n_steps=16, batch_size=16, device="cpu", seed=0)
    return model, env


def test_spends_its_budget_and_never_loses_the_start(setup) -> None:
    model, env = setup
    ref = env.reference(0).measurement
    res = learned_search(model, env, 0, 30, batch=4, seed=1)
    assert res.calls == 30 and len(res.history) == 30  # 7 rounds of 4, then one of 2
    assert np.all(np.diff(res.history) <= 0) and res.history[0] <= ref.step_time
    assert res.measurement.valid and res.measurement.step_time <= ref.step_time
    assert res.measurement.step_time == pytest.approx(res.history[-1])
    again = simulate(env.graphs[0], env.cluster, res.decision)
    assert again.step_time == res.measurement.step_time
    assert res.moves >= 1 and res.measurement.step_time < ref.step_time  # it found a gain


def test_an_untrained_policy_ranks_as_the_estimate(setup) -> None:
    # An untrained MovePolicy is the estimate rule (tests/policies/test_move_policy.py), so the
    # search it guides is the estimate-ranked search, move for move.
    model, env = setup
    by_policy = learned_search(model, env, 0, 24, batch=2, seed=3)
    by_estimate = learned_search(None, env, 0, 24, batch=2, ranking="estimate", seed=3)
    assert np.array_equal(by_policy.decision.placement, by_estimate.decision.placement)
    assert np.array_equal(by_policy.history, by_estimate.history)


def test_search_mode_of_run_policy(setup) -> None:
    model, env = setup
    result = run_policy(model, env, 0, "search:12", seed=0)
    assert result.samples == 12 and result.measurement.valid
    assert result.speedup >= 1.0
    assert parse_mode("search:12", "placement-edit") == ("search", 12)
    # one-shot runs take search:K too (it anneals a decoder's inputs: tests/policies/test_rollout.py)
    assert parse_mode("search:12", "placement") == ("search", 12)


def test_bad_input_is_refused(setup) -> None:
    model, env = setup
    with pytest.raises(ValueError, match="budget and batch must be >= 1"):
        learned_search(model, env, 0, 0)
    with pytest.raises(ValueError, match="unknown ranking 'best'"):
        learned_search(model, env, 0, 4, ranking="best")
    with pytest.raises(ValueError, match="needs a trained placement-edit model"):
        learned_search(None, env, 0, 4)


def test_candidate_placements_and_advance_match_step(setup) -> None:
    _, env = setup
    env.reset(seed=5, options={"graph": 0})
    before = env.placement.copy()
    moved = env.candidate_placements()
    assert moved.shape == (8, env.graphs[0].num_ops)
    assert all(int((row != before).sum()) == 1 for row in moved)  # one op moved each
    env.advance(3)
    assert np.array_equal(env.placement, moved[2])
    assert isinstance(Decision(placement=env.placement), Decision)


def test_rollout_search_spends_one_call_per_rollout_and_keeps_the_best(setup) -> None:
    from policies.learned_search import rollout_search

    model, env = setup
    ref = env.reference(0).measurement
    for ranking in ("policy", "estimate"):
        res = rollout_search(model, env, 0, 12, moves=4, ranking=ranking, seed=2)
        assert res.calls == 12 and len(res.history) == 12
        assert np.all(np.diff(res.history) <= 0)
        assert res.measurement.valid and res.measurement.step_time <= ref.step_time
        assert res.measurement.step_time == pytest.approx(res.history[-1])
    with pytest.raises(ValueError, match="budget and moves must be >= 1"):
        rollout_search(model, env, 0, 4, moves=0)


def test_restart_continues_from_a_given_placement(setup) -> None:
    _, env = setup
    env.reset(seed=0, options={"graph": 0})
    target = np.zeros(env.graphs[0].num_ops, dtype=np.int64)
    obs = env.restart(target)
    assert np.array_equal(env.placement, target) and obs.shape == env.observation_space.shape
    with pytest.raises(ValueError, match="placement has shape"):
        env.restart(target[:3])
