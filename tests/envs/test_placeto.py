"""graphopt/Placeto-v0: one node placed per step in topological order."""

from __future__ import annotations

import gymnasium as gym
import networkx as nx
import numpy as np
import pytest

import envs
from envs.placeto import ANCESTOR, CURRENT, DESCENDANT, PARALLEL, PlacetoEnv
from envs.rewards import reward
from graphopt.sim import Simulator
from graphopt.typing import Decision

SMALL = ["random-layered-16-s1", "random-sp-12-s0"]


def test_checkers_pass_and_the_id_is_registered(check_env):
    env = gym.make("graphopt/Placeto-v0", graphs=SMALL, cluster="v100-nvlink-2")
    check_env(env.unwrapped)


def test_relation_matches_ancestors_and_descendants():
    """The slow twin: networkx's ancestors and descendants of every op."""
    env = PlacetoEnv(["random-sp-100-s0"], "v100-nvlink-2", seed=0)
    graph = env.graphs[0]
    g = graph.to_networkx()
    names = graph.op_names
    for op in range(graph.num_ops):
        rel = env.relation(0, op)
        up = {graph.index[a] for a in nx.ancestors(g, names[op])}
        down = {graph.index[d] for d in nx.descendants(g, names[op])}
        for other in range(graph.num_ops):
            want = (
                CURRENT
                if other == op
                else ANCESTOR
                if other in up
                else DESCENDANT
                if other in down
                else PARALLEL
            )
            assert rel[other] == want, (op, other)


@pytest.mark.parametrize("start", ["random", "single", "reference"])
def test_an_episode_visits_every_op_in_order_and_its_return_telescopes(start):
    env = PlacetoEnv(SMALL, "v100-nvlink-4", start=start, seed=0)
    obs, _ = env.reset(options={"graph": 0})
    graph = env.graphs[0]
    sim = Simulator()
    first = obs["placement"][: graph.num_ops].copy()
    rng = np.random.default_rng(0)
    total, steps, done, info = 0.0, 0, False, {}
    while not done:
        assert obs["relation"][steps] == CURRENT and obs["visited"][:steps].all()
        device = int(rng.integers(4))
        obs, r, done, truncated, info = env.step(device)
        assert not truncated and obs["placement"][steps] == device
        total += r
        steps += 1
    assert steps == graph.num_ops
    ref = env.reference(0).measurement.step_time

    def score(placement):
        m = sim.evaluate(graph, env.cluster, Decision(placement=np.asarray(placement)))
        return reward(env.reward_mode, m.step_time, m.valid, ref), m

    end, m = score(obs["placement"][: graph.num_ops])
    assert info["step_time"] == m.step_time
    assert total == pytest.approx(end - score(first)[0], abs=1e-9)
    assert info["episode_return"] == pytest.approx(total)
    if start == "single":
        assert (first == 0).all()


def test_rollout_gives_the_placement_of_the_acts_without_pricing():
    env = PlacetoEnv(SMALL, "v100-nvlink-2", seed=0)
    calls = []

    class Counting(Simulator):
        def evaluate(self, *args, **kwargs):
            calls.append(1)
            return super().evaluate(*args, **kwargs)

    env.cost_model = Counting()
    decision = env.rollout(lambda obs: int(obs["relation"].argmax() % 2), 1, seed=3)
    assert decision.placement.tolist() == [i % 2 for i in range(env.graphs[1].num_ops)]
    assert not calls


def test_make_env_settings_and_bad_input():
    env = envs.make_env("placement-edit", SMALL, "v100-nvlink-2", variant="placeto")
    assert isinstance(env, PlacetoEnv)
    again = envs.make_env("placement-edit", SMALL, "v100-nvlink-2", **env.settings())
    assert again.observation_space == env.observation_space
    with pytest.raises(ValueError, match="unknown start 'best'; choose one of"):
        PlacetoEnv(SMALL, "v100-nvlink-2", start="best")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"outside 0\.\.1"):
        env.step(2)
