"""The four environments: API conformance, determinism, replay, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import envs
from graphopt.hardware import get_cluster
from graphopt.sim import simulate
from graphopt.sim.fusion_rules import fusion_mask
from graphopt.tasks import ONE_SHOT_TASKS, TASKS
from graphopt.typing import Decision
from graphopt.workloads import get_graph

SMALL = ["rnnlm-tiny", "txl-tiny", "random-layered-100-s0"]


@pytest.mark.parametrize("env_id", [TASKS[t].env_id for t in ONE_SHOT_TASKS])
def test_checkers_pass(env_id, check_env):
    env = gym.make(env_id, graphs=SMALL, cluster="v100-nvlink-2")
    check_env(env.unwrapped)


@pytest.mark.parametrize("task", list(ONE_SHOT_TASKS))
def test_step_prices_the_decoded_decision(task):
    env = gym.make(
        TASKS[task].env_id, graphs=SMALL, cluster="v100-nvlink-4", num_priorities=4
    ).unwrapped
    obs, info = env.reset(seed=3)
    graph = env.graphs[env._current]
    assert info["graph"] == graph.name and obs["counts"][0] == graph.num_ops
    action = env.action_space.sample()
    _, reward, terminated, truncated, info = env.step(action)
    assert terminated and not truncated
    decision = env.last_episode.decision
    n = graph.num_ops
    ref = env.reference(env._current).decision
    parts = action.reshape(-1, env.max_ops)[:, :n]
    if task == "placement":
        assert decision.placement.tolist() == parts[0].tolist()
    elif task == "scheduling":
        assert decision.priority.tolist() == parts[0].tolist()
        assert decision.placement.tolist() == ref.placement.tolist()
    elif task == "fusion":
        assert decision.fusion.tolist() == parts[0].tolist()
    else:
        assert [
            decision.placement.tolist(),
            decision.priority.tolist(),
            decision.fusion.tolist(),
        ] == parts.tolist()
    m = simulate(graph, env.cluster, decision)
    assert info["step_time"] == m.step_time and info["valid"] == m.valid
    expected = (
        1 - np.sqrt(min(m.step_time, 9 * info["reference_time"]) / info["reference_time"])
        if m.valid
        else -3.0
    )
    assert reward == pytest.approx(expected)


def test_reference_reward_is_zero_and_reference_is_best_heuristic():
    env = envs.PlacementEnv(graphs=["txl-tiny"], cluster="v100-nvlink-4")
    env.reset(seed=0)
    ref = env.reference(0)
    from graphopt.baselines.placement import PLACERS

    times = [
        simulate(env.graphs[0], env.cluster, Decision(placement=p(env.graphs[0], env.cluster)))
        for p in PLACERS.values()
    ]
    assert ref.measurement.step_time == min(m.step_time for m in times if m.valid)
    action = np.zeros(env.max_ops, dtype=np.int64)
    action[: env.graphs[0].num_ops] = ref.decision.placement
    _, reward, *_ = env.step(action)
    assert reward == 0.0


def test_same_seed_same_graphs_same_rewards():
    def rollout(seed):
        env = gym.make("graphopt/Placement-v0", graphs=SMALL, cluster="v100-nvlink-2")
        env.action_space.seed(seed)
        out = []
        obs, info = env.reset(seed=seed)
        for _ in range(6):
            _, r, *_, step_info = env.step(env.action_space.sample())
            out.append((info["graph"], r))
            obs, info = env.reset()
        return out

    assert rollout(7) == rollout(7)
    assert rollout(7) != rollout(8)


def test_obs_mode_id_and_encoded_graphs():
    env = envs.PlacementEnv(graphs=SMALL, cluster="v100-nvlink-2", obs_mode="id")
    obs, _ = env.reset(seed=1)
    assert set(obs) == {"graph_id"} and env.observation_space.contains(obs)
    full = env.encoded_graphs()[int(obs["graph_id"][0])]
    assert full["counts"][0] == env.graphs[env._current].num_ops


def test_bad_inputs():
    with pytest.raises(ValueError, match="has .* ops but max_ops is 50"):
        envs.PlacementEnv(graphs=SMALL, max_ops=50)
    with pytest.raises(ValueError, match="unknown reward mode 'fastest'; choose one of"):
        envs.PlacementEnv(graphs=SMALL, reward_mode="fastest")
    with pytest.raises(ValueError, match="unknown cluster preset 'tpu-pod'"):
        envs.PlacementEnv(graphs=SMALL, cluster="tpu-pod")
    with pytest.raises(ValueError, match="suite"):
        envs.PlacementEnv(graphs="suite:nope")
    with pytest.raises(ValueError, match="unknown obs_mode"):
        envs.PlacementEnv(graphs=SMALL, obs_mode="pixels")
    with pytest.raises(ValueError, match="unknown reference 'oracle'"):
        envs.PlacementEnv(graphs=SMALL, reference="oracle")
    env = envs.JointEnv(graphs=SMALL, cluster="v100-nvlink-2", num_priorities=3)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action has shape \(5,\); expected"):
        env.step(np.zeros(5, dtype=np.int64))
    bad = env.action_space.sample()
    bad[env.max_ops] = 3  # first priority slot: allowed 0..2
    with pytest.raises(
        ValueError, match=rf"action\[{env.max_ops}\] = 3 is out of range; allowed values are 0..2"
    ):
        env.step(bad)


def _replay(path, cluster: str) -> subprocess.CompletedProcess:
    command = ["simulate", "txl-tiny", "--cluster", cluster, "--decision", str(path), "--json"]
    return subprocess.run(
        [sys.executable, "-m", "graphopt", *command], capture_output=True, text=True, check=False
    )


@pytest.mark.expensive  # two graphopt subprocesses: seconds of imports (CI runs it)
def test_replay_with_graphopt_simulate(tmp_path):
    env = envs.JointEnv(graphs=["txl-tiny"], cluster="v100-nvlink-2", seed=5)
    legal = np.maximum(env.hint_action(0), 0)  # the reference decision: a legal fusion
    env.step(legal)
    path = env.save_episode(tmp_path / "episode.json")
    saved = json.loads(path.read_text())
    assert (
        saved["graph"] == "txl-tiny" and saved["seed"] == 5 and saved["cluster"] == "v100-nvlink-2"
    )
    out = _replay(path, "v100-nvlink-2")
    assert out.returncode == 0
    assert json.loads(out.stdout)[0]["step_time"] == env.last_episode.measurement.step_time
    # a random joint action fuses across devices: invalid in the env, refused by simulate
    env.reset(seed=5)
    _, _, _, _, info = env.step(env.action_space.sample())
    assert not info["valid"] and info["reason"].startswith("illegal fusion (rule 2")
    out = _replay(env.save_episode(tmp_path / "random.json"), "v100-nvlink-2")
    assert out.returncode == 2 and info["reason"] in out.stderr


@pytest.mark.expensive  # a PPO run: seconds (CI runs it)
def test_stock_sb3_ppo_runs_on_the_tiny_suite():
    from stable_baselines3 import PPO

    env = gym.make(
        "graphopt/Placement-v0", graphs=["rnnlm-tiny", "random-sp-100-s0"], cluster="v100-nvlink-2"
    )
    # two rollouts and two updates: enough to show the stock policy collects, learns and goes on
    model = PPO(
        "MultiInputPolicy", env, n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu"
    )
    model.learn(total_timesteps=32)
    assert model.num_timesteps >= 32


def test_custom_cost_model_plugs_in():
    class Constant:
        def evaluate(self, graph, cluster, decision):
            return simulate(graph, cluster, Decision()).__class__(
                step_time=1.0,
                busy_time=np.zeros(cluster.num_devices),
                peak_memory=np.zeros(cluster.num_devices),
                bytes_moved=0.0,
                valid=True,
            )

    env = envs.PlacementEnv(
        graphs=["txl-tiny"], cluster=get_cluster("v100-nvlink-2"), cost_model=Constant()
    )
    env.reset(seed=0)
    _, reward, *_ = env.step(env.action_space.sample())
    assert reward == 0.0  # every decision costs the same as the reference
    assert get_graph("txl-tiny").num_ops == env.graphs[0].num_ops


def test_hint_is_the_reference_decision_laid_out_as_an_action():
    env = envs.JointEnv(graphs=SMALL, cluster="v100-nvlink-2", num_priorities=4, seed=0)
    obs, _ = env.reset(seed=0)
    n, m = env.graphs[env._current].num_ops, env.max_ops
    ref = env.reference(env._current).decision
    hint = obs["hint"]
    assert hint.shape == env.action_space.shape
    assert hint[:n].tolist() == ref.placement.tolist() and (hint[n:m] == -1).all()
    levels = hint[m : m + n]
    assert levels.min() >= 0 and levels.max() < 4
    prio = ref.priority if ref.priority is not None else np.zeros(n, dtype=np.int64)
    assert (np.diff(levels[np.argsort(prio, kind="stable")]) >= 0).all()  # order kept
    placement = envs.PlacementEnv(graphs=SMALL, cluster="v100-nvlink-2", seed=0)
    hint = placement.reset(seed=0)[0]["hint"]
    _, reward, *_ = placement.step(np.where(hint < 0, 0, hint))
    assert reward == 0.0  # the hint decodes to the reference decision itself
    off = envs.PlacementEnv(graphs=SMALL, cluster="v100-nvlink-2", hint=False, seed=0)
    assert (off.reset(seed=0)[0]["hint"] == -1).all()


@pytest.mark.parametrize("task", ["fusion", "joint"])
def test_fusion_tasks_observe_the_fusion_mask(task):
    env = envs.make_env(task, ["txl-tiny", "wavenet-tiny"], "v100-nvlink-4", max_ops=300)
    obs, _ = env.reset(seed=0, options={"graph": 1})
    graph = env.graphs[1]
    expected = np.zeros(env.max_ops, np.int8)
    expected[: graph.num_ops] = fusion_mask(graph)
    assert obs["fusion_mask"].dtype == np.int8 and np.array_equal(obs["fusion_mask"], expected)
    assert 0 < expected.sum() < graph.num_ops
    assert env.observation_space.contains(obs)
    # the reference's bits are legal, so the mask never hides them
    hint = env.hint_action(1).reshape(-1, env.max_ops)[-1][: graph.num_ops]
    assert not np.any((hint == 1) & (expected[: graph.num_ops] == 0))


def test_placement_has_no_fusion_mask():
    env = envs.make_env("placement", "txl-tiny", "v100-nvlink-4")
    assert "fusion_mask" not in env.reset(seed=0)[0]


@pytest.mark.parametrize("task", ["placement", "placement-edit"])
def test_step_before_reset_and_bad_graph_options_are_refused(task):
    from gymnasium.error import ResetNeeded

    env = envs.make_env(task, ["txl-tiny", "wavenet-tiny"], "v100-nvlink-2")
    with pytest.raises(ResetNeeded, match="call env.reset"):
        env.step(env.action_space.sample())
    for bad in (1.9, "1", True):
        with pytest.raises(ValueError, match="must be an integer graph index"):
            env.reset(options={"graph": bad})
    with pytest.raises(ValueError, match=r"outside \[0, 2\)"):
        env.reset(options={"graph": 2})
    env.reset(options={"graph": np.int64(1)})
    env.step(env.action_space.sample())


# ------------------------------------------------------------------ the decoder setting
@pytest.mark.parametrize("task", ONE_SHOT_TASKS)
def test_decoder_envs_pass_the_checkers_and_zero_outputs_give_the_reference(task, check_env):
    env = envs.make_env(task, "suite:tiny", "v100-nvlink-2", decoder="heft-lc", seed=0)
    check_env(env)
    assert isinstance(env.action_space, gym.spaces.Box)
    assert env.action_space.shape == (len(env.channels) * env.max_ops,)
    for i in range(len(env.graphs)):
        env.reset(options={"graph": i})
        *_, info = env.step(np.zeros(env.action_space.shape, np.float32))
        assert info["step_time"] == info["reference_time"]
    settings = env.settings()
    assert settings["decoder"] == "heft-lc" and settings["decoder_anchor"] is True
    again = envs.make_env(task, "suite:tiny", "v100-nvlink-2", **settings)
    assert again.action_space == env.action_space


def test_decoder_env_refuses_nan_naming_the_op_and_bad_settings():
    env = envs.make_env("placement", "txl-tiny", "v100-nvlink-2", decoder="heft", seed=0)
    action = np.zeros(env.action_space.shape, np.float32)
    action[env.max_ops + 5] = np.nan  # the gate of op 5
    with pytest.raises(ValueError, match="op .* \\(index 5\\) is NaN"):
        env.step(action)
    with pytest.raises(ValueError, match="expected \\("):
        env.step(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="unknown decoder 'list'"):
        envs.make_env("placement", "txl-tiny", "v100-nvlink-2", decoder="list")
    with pytest.raises(ValueError, match="decoder_anchor must be true or false"):
        envs.make_env("placement", "txl-tiny", "v100-nvlink-2", decoder_anchor="no")
    plain = envs.make_env("placement", "txl-tiny", "v100-nvlink-2")
    with pytest.raises(ValueError, match="has no decoder"):
        plain.decode_outputs(0, np.zeros((4, 227)))
