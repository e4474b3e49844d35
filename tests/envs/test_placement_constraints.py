"""Every environment keeps the placement constraints (:mod:`graphopt.constraints`): the one-shot
environments project their actions, the edit environments offer only allowed moves."""

from __future__ import annotations

import numpy as np
import pytest
from constrained_cases import contiguous_case, random_case

import envs  # noqa: F401  (registers the ids)
from envs import make_env
from graphopt.constraints import Constraints, constraints

CASES = [random_case(seed) for seed in range(0, 40, 2)] + [
    contiguous_case(seed) for seed in range(0, 20, 2)
]
"""20 random constrained graphs, each on its own random cluster (half enforce colocation), then
10 with random colour classes on clusters with ``contiguous: true`` (every test takes some of
both)."""
SOME = CASES[:14] + CASES[20:26]
"""20 of them, 6 contiguous: what the slower environments step through."""


_RULES: dict[tuple[int, int], tuple[object, object, Constraints]] = {}


def rules_of(graph, cluster) -> Constraints:
    """``constraints(graph, cluster)``, built once per pair of objects (it is a function of the
    two; building it on every check was most of these tests' time). The entry holds the pair, so
    that their ids stay theirs."""
    key = (id(graph), id(cluster))
    if key not in _RULES:
        _RULES[key] = (graph, cluster, constraints(graph, cluster))
    return _RULES[key][2]


def keeps(env, placement) -> bool:
    graph = env.graphs[env._current]
    return rules_of(graph, env.cluster).violation(np.asarray(placement)) == ""


@pytest.mark.parametrize("task", ["placement", "joint"])
def test_one_shot_actions_are_projected(task: str) -> None:
    for graph, cluster in SOME:
        env = make_env(task, [graph], cluster, seed=0)
        rng = np.random.default_rng(0)
        for _ in range(5):
            action = env.action_space.sample()
            action[: env.max_ops] = rng.integers(0, cluster.num_devices, env.max_ops)
            decision = env.decode(action)
            assert keeps(env, decision.placement), (graph.name, decision.placement)
            _, _, _, _, info = env.step(action)
            assert "placement constraint" not in info["reason"]
            env.reset()


def test_decoder_actions_keep_constraints() -> None:
    for graph, cluster in CASES[:4] + CASES[20:24]:
        env = make_env("placement", [graph], cluster, seed=0, decoder="heft")
        for k in range(3):
            action = np.random.default_rng(k).normal(size=env.action_space.shape) * 4
            assert keeps(env, env.decode(np.clip(action, -8, 8)).placement)


def test_placement_edit_candidates_keep_constraints() -> None:
    for graph, cluster in SOME:
        env = make_env("placement-edit", [graph], cluster, seed=0, candidates=6, horizon=10)
        rng = np.random.default_rng(1)
        for _ in range(10):
            for row in env.candidate_placements():
                assert keeps(env, row), graph.name
            env.step(int(rng.integers(0, 7)))
            assert keeps(env, env.placement)
        # a start that breaks them is projected
        env.restart(np.zeros(graph.num_ops, dtype=np.int64))
        assert keeps(env, env.placement)


@pytest.mark.parametrize("task", ["joint-edit", "scheduling-edit"])
def test_decision_edit_moves_keep_constraints(task: str) -> None:
    for graph, cluster in SOME:
        env = make_env(task, [graph], cluster, seed=0, candidates=6, horizon=10)
        rng = np.random.default_rng(2)
        for _ in range(10):
            for move in env._cand:
                assert keeps(env, env._moved(move)[0]), (graph.name, move)
            env.step(int(rng.integers(0, 6)))
            assert keeps(env, env.placement)


def test_hierarchical_actions_are_projected() -> None:
    for graph, cluster in CASES[:5] + CASES[20:25]:
        env = make_env("placement", [graph], cluster, seed=0, variant="hierarchical")
        for k in range(3):
            action = env.action_space.sample()
            env.action_space.seed(k)
            assert keeps(env, env.decode(action).placement), graph.name


def test_placeto_steps_keep_constraints() -> None:
    for graph, cluster in CASES[:5] + CASES[20:25]:
        for start in ("random", "single", "reference"):
            env = make_env(
                "placement-edit", [graph], cluster, seed=0, variant="placeto", start=start
            )
            rng = np.random.default_rng(3)
            assert keeps(env, env.placement)
            for _ in range(graph.num_ops):
                env.step(int(rng.integers(0, cluster.num_devices)))
                assert keeps(env, env.placement), graph.name
            devices = rng.integers(0, cluster.num_devices, graph.num_ops).tolist()
            decision = env.rollout(lambda obs, left=devices: left.pop(), 0)
            assert keeps(env, decision.placement)
