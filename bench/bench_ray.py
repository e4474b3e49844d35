"""Rollout throughput of the training environments on Ray workers, against in-process.

Steps the ``n_envs`` training environments of a placement-edit run on a large graph (gnmt-8,
86,562 ops: each move is simulated, and the observation is a few hundred numbers, so the simulator
dominates) with random actions, through the vectorised environment PPO collects rollouts from
(:func:`graphopt.train.vec_env.make_vec_env`): in-process (``dummy``), then on 1 and 2 Ray
workers. Prints Ray's start-up cost (``ray.init`` on this machine, then building the actors and
their environments), environment steps per second of each, the speed-up of 2 workers over 1
(target: at least 1.6x on 2 cores), and the cost of one PPO update for the scaling model of
docs/ray.md. Run: ``make bench-ray`` (needs ``pip install 'graphopt[ray]'``).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from graphopt.distributed import connect, import_ray
from graphopt.train.config import TrainConfig
from graphopt.train.vec_env import make_vec_env


def _steps_per_second(vec_env, steps: int, seed: int = 0) -> float:
    """Vector steps of random actions after one warm-up step; environment steps per second."""
    rng = np.random.default_rng(seed)
    vec_env.seed(seed)
    vec_env.reset()
    space = vec_env.action_space

    def actions() -> np.ndarray:
        return np.stack([rng.integers(space.n) for _ in range(vec_env.num_envs)])

    vec_env.step(actions())  # warm-up: references and simulator workspaces
    start = time.perf_counter()
    for _ in range(steps):
        vec_env.step(actions())
    return steps * vec_env.num_envs / (time.perf_counter() - start)


def _update_seconds(config: TrainConfig) -> float:
    """One PPO update (n_epochs over n_steps * n_envs decisions) of ``config``'s policy."""
    from graphopt.train.trainer import build_model

    vec_env, _ = make_vec_env(config, backend="dummy")
    model = build_model(config, vec_env)
    model.learn(total_timesteps=config.n_steps * config.n_envs)  # fills the rollout buffer
    start = time.perf_counter()
    model.train()
    seconds = time.perf_counter() - start
    vec_env.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default="gnmt-8")
    parser.add_argument("--n-envs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20, help="vector steps measured per backend")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = TrainConfig(
        task="placement-edit",
        graphs=args.graph,
        val_graphs="",
        cluster="v100-nvlink-4",
        n_envs=args.n_envs,
        n_steps=16,
        batch_size=64,
    ).validate()
    print(f"bench_ray: {args.n_envs} placement-edit environments on {args.graph}, random moves")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")

    rates: dict[str, float] = {}
    vec_env, _ = make_vec_env(config, backend="dummy")
    rates["in-process"] = _steps_per_second(vec_env, args.steps)
    vec_env.close()

    ray = import_ray()
    start = time.perf_counter()
    connect(num_cpus=os.cpu_count())
    init = time.perf_counter() - start
    print(f"Ray start-up: ray.init on this machine {init:.1f} s")
    for workers in (1, 2):
        start = time.perf_counter()
        vec_env, _ = make_vec_env(config, backend="ray", workers=workers)
        built = time.perf_counter() - start
        rates[f"ray x{workers}"] = _steps_per_second(vec_env, args.steps)
        vec_env.close()
        print(f"  {workers} worker(s): actors and environments built in {built:.1f} s")
    ray.shutdown()

    print(f"{'backend':<12} {'env steps/s':>12}")
    for name, rate in rates.items():
        print(f"{name:<12} {rate:>12.2f}")
    speedup = rates["ray x2"] / rates["ray x1"]
    print(
        f"2 workers over 1: {speedup:.2f}x (target >= 1.6x); over in-process: "
        f"{rates['ray x2'] / rates['in-process']:.2f}x"
    )
    step = 1.0 / rates["in-process"]
    update = _update_seconds(config)
    decisions = config.n_steps * config.n_envs
    print(
        f"per-step cost (in-process): {step * 1e3:.1f} ms; one PPO update of {decisions} "
        f"decisions x {config.n_epochs} epochs: {update:.2f} s"
    )
    print(f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
