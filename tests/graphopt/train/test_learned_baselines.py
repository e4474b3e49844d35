"""The learned baselines in training: config checks, REINFORCE as PPO's one-step update, model
files of one method refused by another, and (expensive) whether each method learns."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from graphopt.baselines.exact import solve_exact
from graphopt.hardware import get_cluster
from graphopt.train.config import TrainConfig, load_config
from graphopt.train.trainer import build_model, train
from graphopt.train.vec_env import make_vec_env
from graphopt.workloads import resolve_graphs
from policies import checkpoint

torch.set_num_threads(1)

TINY = dict(
    graphs="random-layered-16-s1",
    val_graphs="",
    cluster="v100-nvlink-2",
    n_envs=2,
    n_steps=8,
    batch_size=4,
    n_epochs=3,
    policy_kwargs={"hidden": 16},
)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (dict(task="joint", policy="gdp"), "policy gdp is trained on task placement, got task"),
        (dict(task="placement-edit", policy="hdp"), "policy hdp is trained on task placement"),
        (dict(policy="placeto"), "policy placeto is trained on task placement-edit"),
        (dict(algorithm="a2c"), "algorithm 'a2c' is unknown; choose one of: ppo, reinforce"),
        (dict(policy="hdp", groups=5000), "groups must be at most 1024"),
        (dict(policy="hdp", groups=True), "config key 'groups' must be an integer"),
        (dict(policy="gdp", decoder="heft"), "decoder heft steers the one-shot tasks' decisions"),
    ],
)
def test_bad_configs(keys, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        load_config(**keys)


def test_reinforce_is_one_gradient_step_on_the_whole_rollout():
    config = TrainConfig(task="placement", policy="gdp", algorithm="reinforce", **TINY).validate()
    vec_env, _ = make_vec_env(config)
    model = build_model(config, vec_env)
    assert model.n_epochs == 1 and model.batch_size == 16  # n_steps * n_envs
    model.learn(16)
    assert model._n_updates == 1
    ppo = build_model(TrainConfig(task="placement", policy="gdp", **TINY).validate(), vec_env)
    assert ppo.n_epochs == 3 and ppo.batch_size == 4


@pytest.mark.parametrize(
    "keys",
    [
        # each environment process imports torch again (seconds): CI runs these; every run
        # keeps the subproc backend's own test (train/test_vec_env.py)
        pytest.param(
            dict(task="placement", policy="hdp", groups=3), id="hdp", marks=pytest.mark.expensive
        ),
        pytest.param(
            dict(task="placement-edit", policy="placeto"), id="placeto", marks=pytest.mark.expensive
        ),
    ],
)
def test_environments_are_rebuilt_in_other_processes(keys):
    """The subproc backend rebuilds them from plain data, as Ray actors do
    (test_learned_baselines_ray.py)."""
    config = TrainConfig(**keys, **{**TINY, "n_envs": 2}).validate()
    vec_env, _ = make_vec_env(config, backend="subproc")
    try:
        model = build_model(config, vec_env)
        model.learn(16)
        assert model.num_timesteps == 16
    finally:
        vec_env.close()


def test_env_settings_select_each_methods_environment():
    hdp = TrainConfig(task="placement", policy="hdp", groups=6).env_settings(10, 40)
    assert hdp["variant"] == "hierarchical" and hdp["groups"] == 6
    placeto = TrainConfig(task="placement-edit", policy="placeto").env_settings(10, 40)
    assert placeto["variant"] == "placeto" and "candidates" not in placeto


def test_a_model_file_of_another_method_is_refused_naming_both(tmp_path):
    gdp_config = TrainConfig(task="placement", policy="gdp", **TINY).validate()
    go_config = TrainConfig(task="placement", **TINY).validate()
    gdp = build_model(gdp_config, make_vec_env(gdp_config)[0])
    go = build_model(go_config, make_vec_env(go_config)[0])
    checkpoint.save_weights(gdp, tmp_path / "gdp.pt")
    weights = checkpoint.read_weights(tmp_path / "gdp.pt")
    assert weights["method"] == "GDPPolicy"
    with pytest.raises(ValueError, match="holds a model of GDPPolicy, but .* builds GOPolicy"):
        checkpoint.load_weights(go, weights, tmp_path / "gdp.pt")
    older = {k: v for k, v in weights.items() if k != "method"}  # before the method was recorded
    with pytest.raises(ValueError, match="do not fit the model"):
        checkpoint.load_weights(go, older, tmp_path / "gdp.pt")
    torch.save({**weights, "method": 3}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="'method' is not a policy class name"):
        checkpoint.read_weights(tmp_path / "bad.pt")


# ---------------------------------------------------------------------- does each method learn?
SANITY_GRAPH, SANITY_CLUSTER = "random-layered-16-s1", "v100-nvlink-2"
SHARED = dict(
    graphs=SANITY_GRAPH,
    val_graphs=SANITY_GRAPH,
    cluster=SANITY_CLUSTER,
    n_envs=4,
    n_steps=16,
    batch_size=64,
    learning_rate=1e-3,
    ent_coef=0.01,
    checkpoint_every=10**9,
    seed=0,
)
"""bench/bench_learned_baselines.py sanity's settings (seed 0)."""


def _best_ratio(config: TrainConfig, tmp_path: Path) -> float:
    """The best greedy validation step time of a run of ``config`` over the CP-SAT optimum."""
    graph = resolve_graphs(SANITY_GRAPH)[0]
    exact = solve_exact(graph, get_cluster(SANITY_CLUSTER), time_limit=60)
    assert exact.measurement is not None and exact.status == "optimal"
    run = train(config, runs_root=tmp_path, show_progress=False)
    with open(run / "metrics.csv") as f:
        times = [float(r["step_time_mean"]) for r in csv.DictReader(f) if r["kind"] == "val"]
    return min(times) / exact.measurement.step_time


@pytest.mark.expensive
def test_gdp_reaches_the_optimum_within_5_percent(tmp_path):
    """Seeds 0, 1, 2 came within 1.8% by 2,048 decisions (bench_learned_baselines.py sanity)."""
    config = TrainConfig(
        task="placement", policy="gdp", total_timesteps=2048, eval_every=1024, **SHARED
    ).validate()
    assert _best_ratio(config, tmp_path) <= 1.05


@pytest.mark.expensive
@pytest.mark.xfail(
    strict=True,
    reason="missed target: Placeto (PPO) is 1.10-1.19 x the optimum at best within 32,768 "
    "decisions on seeds 0-4 with today's dependencies (seed 1 reached it at 18,432 with those "
    "of 2026-11-28; bench_learned_baselines.py sanity, docs/results/learned_baselines.md)",
)
def test_placeto_reaches_the_optimum_within_5_percent(tmp_path):
    """PPO, seed 1, 20,480 decisions: the budget in which seed 1 once reached the optimum."""
    keys = {**SHARED, "learning_rate": 3e-3, "n_steps": 64, "seed": 1}
    config = TrainConfig(
        task="placement-edit", policy="placeto", total_timesteps=20480, eval_every=2048, **keys
    ).validate()
    assert _best_ratio(config, tmp_path) <= 1.05


@pytest.mark.expensive
@pytest.mark.xfail(
    strict=True,
    reason="missed target: HDP (REINFORCE or PPO, 8 groups) settles on one device (1.229 x the "
    "optimum) within 16,384 decisions on every seed tried (bench_learned_baselines.py sanity)",
)
def test_hdp_reaches_the_optimum_within_5_percent(tmp_path):
    config = TrainConfig(
        task="placement",
        policy="hdp",
        algorithm="reinforce",
        groups=8,
        total_timesteps=16384,
        eval_every=1024,
        **SHARED,
    ).validate()
    assert _best_ratio(config, tmp_path) <= 1.05
