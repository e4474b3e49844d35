"""Shared pieces of the benchmarks that study edits of the policy's hint (``bench_headroom.py``,
``bench_imitation.py``, ``bench_move_ranking.py``): the held-out graphs, pricing placements,
the gain of every single-op move, and the demo-sized GO policy on a set of training graphs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from graphopt.sim import PreparedGraph

ROOT = Path(__file__).resolve().parents[1]
HELD_OUT = "suite:heldout-small,pipedream:resnet50,pipedream:inception_v3,pipedream:gnmt"


def step_times(prepared: PreparedGraph, placements: np.ndarray) -> np.ndarray:
    """``(B,)`` simulated step times of ``(B, N)`` placements; ``inf`` where invalid."""
    zeros = np.zeros_like(placements)
    r = prepared.evaluate_batch(placements, zeros, zeros)
    return np.where(r.valid, r.step_time, np.inf)


def move_times(
    prepared: PreparedGraph,
    hint: np.ndarray,
    num_devices: int,
    max_moves: int | None = None,
    seed: int = 0,
) -> tuple[float, np.ndarray]:
    """``(t, times)``: the step time ``t`` of ``hint`` and ``(N, D)`` the step time after moving
    op ``i`` alone to device ``d`` (``t`` at the hint's own device), priced in chunks of at most
    4,096 placements. With ``max_moves`` below the ``N (D - 1)`` possible moves, only a random
    sample of that many is priced; the rest are ``nan``."""
    n = len(hint)
    ops = np.repeat(np.arange(n), num_devices)
    devices = np.tile(np.arange(num_devices), n)
    keep = devices != hint[ops]
    ops, devices = ops[keep], devices[keep]  # every move, by op then device
    base = float(step_times(prepared, hint[None])[0])
    times = np.full((n, num_devices), base)
    if max_moves is not None and len(ops) > max_moves:
        times[ops, devices] = np.nan
        chosen = np.sort(np.random.default_rng(seed).choice(len(ops), max_moves, replace=False))
        ops, devices = ops[chosen], devices[chosen]
    for lo in range(0, len(ops), 4096):
        i, d = ops[lo : lo + 4096], devices[lo : lo + 4096]
        moved = np.repeat(hint[None], len(i), axis=0)
        moved[np.arange(len(i)), i] = d
        times[i, d] = step_times(prepared, moved)
    return base, times


def best_single_moves(
    base: float, times: np.ndarray, hint: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(gain, device)`` per op: the speed-up over ``base`` of its fastest move away from
    ``hint`` (even one that loses), ties going to the first device after the hinted one,
    cyclically."""
    n, d = times.shape
    devices = (hint[:, None] + np.arange(1, d)[None, :]) % d  # (N, D - 1)
    candidates = times[np.arange(n)[:, None], devices]
    best = candidates.argmin(axis=1)
    return base / candidates[np.arange(n), best], devices[np.arange(n), best]


def random_graph_names(count: int) -> list[str]:
    """``count`` seeded random DAG names, 150-1,500 ops, layered and series-parallel in turn."""
    rng = np.random.default_rng(3)
    return [
        f"random-{'layered' if i % 2 else 'sp'}-{int(rng.integers(150, 1500))}-s{200 + i}"
        for i in range(count)
    ]


def demo_policy(graphs: list[str], max_ops: int | None = None) -> tuple[Any, Any, Any]:
    """``(env, held-out env, PPO model)``: placement on ``graphs`` with the network and sizes of
    ``graphopt/configs/demo.yaml`` (``max_ops`` overridden when given), validation on
    :data:`HELD_OUT`; one environment, seed 0."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from graphopt.train.config import load_config
    from graphopt.train.env_spec import existing
    from graphopt.train.trainer import _policy, make_envs

    config = load_config(ROOT / "graphopt" / "configs" / "demo.yaml")
    config = dataclasses.replace(
        config,
        graphs=",".join(graphs),
        val_graphs=HELD_OUT,
        n_envs=1,
        max_ops=config.max_ops if max_ops is None else max_ops,
    )
    (env,), val = make_envs(config)
    assert val is not None
    policy, kwargs = _policy(config, env)
    model = PPO(
        policy,
        DummyVecEnv([existing(env)]),
        n_steps=64,
        batch_size=64,
        device="cpu",
        policy_kwargs=kwargs,
        seed=0,
    )
    return env, val, model


def placement_logits(net: Any, observations: list[dict[str, np.ndarray]]) -> Any:
    """``(B, max_ops, D)`` placement logits of the GO network ``net`` (a ``GOPolicy``) for ``B``
    observations, stacked into one batch."""
    import torch

    batch = {k: torch.as_tensor(np.stack([o[k] for o in observations])) for k in observations[0]}
    logits, _, _, _ = net._run(batch)
    return logits["placement"]


def clipped_step(optimizer: Any, net: Any, loss: Any) -> None:
    """One optimiser step on ``loss`` with the gradient norm clipped to 1 (as PPO does)."""
    import torch

    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    optimizer.step()
