"""Environment overhead: ``env.step`` against the cost model's own ``evaluate`` on one graph.

Usage: python bench/bench_env.py [--graph NAME] [--cluster PRESET] [--repeats N]

Both are timed in the same process on the same sampled actions (the env's per-graph reference is
computed before timing, once, as in training). Prints milliseconds per call and the overhead of
``step`` over ``evaluate`` in percent; the target is <= 10% on a 20,000-op graph.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import envs
from graphopt.sim import Simulator


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--graph", default="random-layered-20000-s0")
    parser.add_argument("--cluster", default="v100-nvlink-8")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()

    sim = Simulator()
    env = envs.PlacementEnv(graphs=[args.graph], cluster=args.cluster, cost_model=sim)
    graph = env.graphs[0]
    print(
        f"graph {graph.name}: {graph.num_ops:,} ops, {graph.num_edges:,} edges; cluster {env.cluster.name}"
    )
    env.reset(seed=0)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(args.repeats)]
    env.step(actions[0])  # reference decision and JIT warm-up, outside the timing
    decisions = [env.decode(a) for a in actions]

    step_times, eval_times = [], []
    for action, decision in zip(actions, decisions, strict=True):
        start = time.perf_counter()
        sim.evaluate(graph, env.cluster, decision)
        eval_times.append(time.perf_counter() - start)
        env.reset()
        start = time.perf_counter()
        env.step(action)
        step_times.append(time.perf_counter() - start)
    t_eval, t_step = statistics.median(eval_times), statistics.median(step_times)
    print(f"cost model evaluate : {t_eval * 1e3:7.2f} ms (median of {args.repeats})")
    print(f"env.step            : {t_step * 1e3:7.2f} ms")
    print(f"step overhead       : {(t_step / t_eval - 1) * 100:+6.1f}% (target <= +10%)")
    start = time.perf_counter()
    for _ in range(10):
        env.reset()
    print(
        f"env.reset           : {(time.perf_counter() - start) / 10 * 1e3:7.2f} ms (copies the observation)"
    )


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
