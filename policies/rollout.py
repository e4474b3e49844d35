"""Running a trained policy on graphs: greedy, best of K samples, after fine-tuning, or refined
by search on the analytic estimate (placement), or (a run with a decoder) by annealing the
decoder's inputs from the network's outputs.

For the multi-step ``placement-edit`` task a decision is a whole episode of moves
(:meth:`envs.placement_edit.PlacementEditEnv.rollout`, no cost-model call inside); greedy takes the
most likely choice at every step, ``sample:K`` keeps the best of the greedy episode and ``K - 1``
sampled ones. For the scheduling, fusion and joint edit tasks (:mod:`envs.decision_edit`) every
step is one simulator call: greedy is one episode of the environment's horizon, ``search:K`` one
greedy episode of ``K`` calls.

Used by validation during training and by ``graphopt eval``. The environment supplies the graph's
encoding, the decoding of actions and the reference; the policy must have been trained for the
same task, device count and ``max_ops`` (checked by :func:`check_compatible`).
"""

from __future__ import annotations

import math
from copy import deepcopy
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.vec_env import DummyVecEnv

from envs import make_env
from envs.base import GraphEnv
from envs.decision_edit import DecisionEditEnv
from envs.one_shot import GraphOptEnv
from envs.rewards import INVALID
from graphopt.baselines.estimate_search import estimate_search, weighted_moves
from graphopt.decoders.search import decoder_search
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.modes import parse_mode
from graphopt.tasks import get_task
from graphopt.typing import Decision, Measurement
from policies.distributions import BatchedCategorical


@dataclass(frozen=True)
class PolicyResult:
    """What the policy achieved on one graph."""

    graph: str
    decision: Decision
    measurement: Measurement
    reference_time: float
    samples: int
    """Decisions simulated to get there (1 for greedy, K for sample:K, plus fine-tuning steps; 2
    for plan:K, whose K analytic estimates are not simulations)."""

    @property
    def speedup(self) -> float:
        """Reference time over step time; an invalid decision counts as ``1 / INVALID``."""
        if not self.measurement.valid:
            return 1.0 / INVALID
        return self.reference_time / self.measurement.step_time


def _rank(m: Measurement) -> tuple[bool, float]:
    """Order of measurements: valid before invalid, then faster first."""
    return (not m.valid, m.step_time)


def check_compatible(model: PPO, env: GraphEnv) -> None:
    """Raise ValueError if ``model`` was trained for another task, device count or size."""
    trained = getattr(model, "action_space", None)
    if not get_task(env.task).one_shot or isinstance(trained, spaces.Discrete):
        same = (
            trained == env.action_space
            and getattr(model, "observation_space", None) == env.observation_space
        )
        if not same:
            raise ValueError(
                f"the policy was trained for another environment (actions {trained}) than this "
                f"{env.task} one needs (actions {env.action_space}, observations "
                f"{env.observation_space}; the policy's: "
                f"{getattr(model, 'observation_space', None)}): evaluate an edit run with "
                "the task and number of candidates it was trained with; a placement-edit run from "
                "before the observation gained its gain_insert and gain_append columns must be "
                "retrained"
            )
        return
    assert isinstance(env, GraphOptEnv)  # every other task is one-shot
    if isinstance(trained, spaces.Box) or env.decoder is not None:
        if trained != env.action_space:
            raise ValueError(
                f"the policy was trained for other decoder actions ({trained}) than this "
                f"{env.task} environment takes ({env.action_space}): evaluate it with the task, "
                "cluster (device count), decoder and max_ops it was trained with"
            )
        return
    t_nvec = np.asarray(getattr(trained, "nvec", np.zeros(0, dtype=np.int64)))
    if tuple(t_nvec) != tuple(env.nvec):
        raise ValueError(
            f"the policy was trained for another action layout ({_describe(t_nvec)}) than this "
            f"{env.task} environment needs ({_describe(env.nvec)}): "
            "evaluate it with the task, cluster (device count), num_priorities and max_ops it was "
            "trained with"
        )


def _describe(nvec: np.ndarray) -> str:
    if nvec.size == 0:
        return "none"
    values, counts = np.unique(nvec, return_counts=True)
    return ", ".join(
        f"{c} slots of {v}" for v, c in zip(values.tolist(), counts.tolist(), strict=True)
    )


def run_policy(
    model: PPO, env: Any, index: int, mode: str = "greedy", seed: int = 0
) -> PolicyResult:
    """Decide for graph ``index`` of ``env`` with ``model`` in ``mode`` and measure the result."""
    kind, amount = parse_mode(mode, env.task)
    graph = env.graphs[index]
    tuned = 0
    if kind == "finetune":
        model, tuned = finetune(model, env, index, amount, seed)
    if isinstance(env, DecisionEditEnv):
        decision, m, calls = env.rollout(
            lambda obs: int(model.predict(obs, deterministic=True)[0]),
            index,
            seed,
            calls=amount if kind == "search" else None,
        )
        return PolicyResult(
            graph.name, decision, m, env.reference(index).measurement.step_time, calls
        )
    if kind == "search" and isinstance(env, GraphOptEnv):
        return _decoder_search(model, env, index, amount, seed)
    if kind == "plan" and getattr(env, "decoder", None) is not None:
        raise ValueError(
            f"mode {mode} refines a placement by the policy's device probabilities; a run with a "
            "decoder takes greedy, sample:K, finetune:STEPS or search:K (annealing of its inputs)"
        )
    if kind == "search":
        from policies.learned_search import learned_search

        found = learned_search(model, env, index, amount, seed=seed)
        ref = env.reference(index).measurement.step_time
        return PolicyResult(graph.name, found.decision, found.measurement, ref, found.calls)
    if env.task == "placement-edit":
        return _run_episodes(model, env, index, amount if kind == "sample" else 1, seed, tuned)
    obs, _ = env.reset(seed=seed, options={"graph": index})
    best: tuple[Decision, Measurement] | None = None
    draws = 1 if kind != "sample" else amount
    for k in range(draws):
        # sample:K = the greedy decision plus K - 1 samples, so it is never worse than greedy
        action, _ = model.predict(obs, deterministic=(kind != "sample" or k == 0))
        decision = env.decode(action)
        m = env.cost_model.evaluate(graph, env.cluster, decision)
        if best is None or _rank(m) < _rank(best[1]):
            best = (decision, m)
        if kind == "sample" and k + 1 < draws:
            obs, _ = env.reset(options={"graph": index})
    assert best is not None
    if kind == "plan":
        start = np.asarray(best[0].placement, dtype=np.int64)  # obs is still the greedy one's
        planned = plan_placement(model, obs, graph, env.cluster, start, amount, seed)
        decision = Decision(placement=planned)
        m = env.cost_model.evaluate(graph, env.cluster, decision)
        if _rank(m) < _rank(best[1]):
            best = (decision, m)
        draws += 1  # the planned placement's one measurement
    ref = env.reference(index).measurement.step_time
    samples = draws + tuned
    return PolicyResult(graph.name, best[0], best[1], ref, samples)


def decoder_outputs(model: PPO, obs: dict[str, Any], channels: int, num_ops: int) -> np.ndarray:
    """``(channels, num_ops)`` the policy's greedy outputs for a decoder environment."""
    action, _ = model.predict(obs, deterministic=True)
    return np.asarray(action, dtype=np.float64).reshape(channels, -1)[:, :num_ops]


def _decoder_search(
    model: PPO, env: GraphOptEnv, index: int, budget: int, seed: int
) -> PolicyResult:
    """``search:K`` of a decoder run: annealing over the decoder's inputs from the network's
    greedy outputs (:func:`graphopt.decoders.search.decoder_search`), K simulator calls; the
    network runs once."""
    if env.decoder is None:
        raise ValueError(
            f"mode search:{budget} of a one-shot {env.task} run anneals its decoder's inputs; this "
            "run has no decoder: train with decoder: heft-lc, or use greedy, sample:K, plan:K"
        )
    graph = env.graphs[index]
    obs, _ = env.reset(seed=seed, options={"graph": index})
    start = decoder_outputs(model, obs, len(env.channels), graph.num_ops)
    ref = env.reference(index)

    def evaluate(outputs: np.ndarray) -> tuple[Decision, Measurement]:
        decision = env.decode_outputs(index, outputs)
        return decision, env.cost_model.evaluate(graph, env.cluster, decision)

    gate = env.channels.index("gate") if "gate" in env.channels else None
    devices = [c for c, name in enumerate(env.channels) if name.startswith("affinity:")]
    found = decoder_search(evaluate, start, budget, seed=seed, gate_channel=gate, affinity=devices)
    return PolicyResult(
        graph.name, found.decision, found.measurement, ref.measurement.step_time, found.calls
    )


def _run_episodes(
    model: PPO, env: Any, index: int, draws: int, seed: int, tuned: int
) -> PolicyResult:
    """The best of ``draws`` placement-edit episodes on graph ``index``: the greedy one (seed
    ``seed``), then sampled ones (seeds ``seed + k``); each final placement measured once."""
    graph = env.graphs[index]
    best: tuple[Decision, Measurement] | None = None
    for k in range(draws):
        greedy = k == 0

        def act(obs: np.ndarray, greedy: bool = greedy) -> int:
            return int(model.predict(obs, deterministic=greedy)[0])

        decision = env.rollout(act, index, seed + k)
        m = env.cost_model.evaluate(graph, env.cluster, decision)
        if best is None or _rank(m) < _rank(best[1]):
            best = (decision, m)
    assert best is not None
    ref = env.reference(index).measurement.step_time
    return PolicyResult(graph.name, best[0], best[1], ref, draws + tuned)


def placement_probabilities(model: PPO, obs: dict[str, Any], num_ops: int) -> np.ndarray:
    """``(num_ops, D)`` the policy's device probabilities of every op for observation ``obs``
    (placement block of the action layout)."""
    with torch.no_grad():
        tensors, _ = model.policy.obs_to_tensor(obs)
        dist = model.policy.get_distribution(tensors)
    assert isinstance(dist.distribution, BatchedCategorical)  # a GOPolicy's
    log_probs = dist.distribution.log_probs[0]  # (1, max_ops, D): placement comes first
    return log_probs[0, :num_ops].exp().double().numpy()


def plan_placement(
    model: PPO,
    obs: dict[str, Any],
    graph: CompGraph,
    cluster: Cluster,
    start: np.ndarray,
    budget: int,
    seed: int,
) -> np.ndarray:
    """``start`` refined by ``budget`` analytic estimates, no simulation
    (:func:`graphopt.baselines.estimate_search.estimate_search`), moves proposed from the policy's
    device probabilities half of the time and uniformly otherwise
    (:func:`~graphopt.baselines.estimate_search.weighted_moves`)."""
    if cluster.num_devices < 2:  # nothing to move
        return start
    probs = placement_probabilities(model, obs, graph.num_ops)
    result = estimate_search(
        graph, cluster, start, budget, seed=seed, propose=weighted_moves(probs)
    )
    return result.placement


def finetune(model: PPO, env: GraphEnv, index: int, steps: int, seed: int) -> tuple[PPO, int]:
    """A copy of ``model`` trained ``steps`` more decisions on graph ``index`` alone (GO's
    fine-tuning mode), and the decisions it actually used (PPO collects whole rollouts, so at least
    one rollout of the model's ``n_steps``). The original model is left untouched."""
    single = make_env(
        env.task,
        [env.graphs[index]],
        env.cluster,
        cost_model=env.cost_model,
        seed=seed,
        **env.settings(),
    )
    copy = copy_model(model, single)
    copy.learn(total_timesteps=steps, reset_num_timesteps=True)
    return copy, int(copy.num_timesteps)


PPO_HYPERPARAMETERS = (
    "learning_rate",
    "n_steps",
    "batch_size",
    "n_epochs",
    "gamma",
    "gae_lambda",
    "clip_range",
    "clip_range_vf",
    "normalize_advantage",
    "ent_coef",
    "vf_coef",
    "max_grad_norm",
    "target_kl",
    "seed",
)
"""The PPO constructor arguments a copy takes from its model (attributes of the same name)."""


def copy_model(model: PPO, env: GraphEnv) -> PPO:
    """A new PPO on ``env`` with ``model``'s policy, hyper-parameters, weights and optimizer state,
    copied in memory (no file is written or read); training it leaves ``model`` untouched. An
    ``obs_mode="id"`` policy is given ``env``'s graphs."""
    policy_kwargs = dict(model.policy_kwargs)
    if "graphs" in policy_kwargs and hasattr(env, "encoded_graphs"):
        policy_kwargs["graphs"] = env.encoded_graphs()
    hyper = {name: getattr(model, name) for name in PPO_HYPERPARAMETERS}
    copy = PPO(
        cast(type[ActorCriticPolicy], model.policy_class),
        DummyVecEnv([lambda: env]),
        device=model.device,
        policy_kwargs=policy_kwargs,
        verbose=0,
        **hyper,
    )
    copy.policy.load_state_dict(model.policy.state_dict())
    # deep-copied: loading an optimizer state keeps its tensors, which Adam updates in place
    copy.policy.optimizer.load_state_dict(deepcopy(model.policy.optimizer.state_dict()))
    copy.num_timesteps = int(model.num_timesteps)
    return copy


def geomean(values: list[float]) -> float:
    """Geometric mean of positive values (nan for an empty list)."""
    if not values:
        return math.nan
    return float(math.exp(sum(math.log(v) for v in values) / len(values)))
