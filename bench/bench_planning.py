"""Planning on the analytic estimate: how far above the best heuristic, at what cost, and does the
policy's proposal distribution help?

Usage: python bench/bench_planning.py [--graphs GRAPHS] [--budgets 256,1024,4096] [--seeds 3]
                                      [--batch 4] [--run RUN] [--large GRAPH]

For each held-out graph (placement on ``v100-nvlink-4``, from the best heuristic's placement; every
figure a speed-up over it measured by the simulator, geometric mean over ``--seeds`` seeds):

- ``estimate@K``: :func:`graphopt.baselines.estimate_search.estimate_search` with uniform proposals,
  ``K`` analytic estimates and *no* simulation; ``believes`` is its own estimated gain;
- ``annealing@K``: simulated annealing from the same start with ``K`` *simulator* evaluations;
- with ``--run``: ``policy@K``, the same estimate search from the run's greedy placement with
  proposals weighted by the policy (``graphopt eval --mode plan:K``), without keeping the start.

Then the cost of one estimate against one simulation on ``--large`` (default ``gnmt-8``, 86,562
ops), batches of 64 random placements, in this process. One torch thread.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from placement_moves import HELD_OUT, step_times

from graphopt.baselines.estimate_search import estimate_search, weighted_moves
from graphopt.baselines.search import simulated_annealing
from graphopt.baselines.staged import best_heuristic
from graphopt.hardware import get_cluster
from graphopt.sim import PreparedGraph, Simulator
from graphopt.sim.estimate import PlacementEstimate
from graphopt.typing import Decision
from graphopt.workloads.registry import resolve_graphs
from policies.rollout import geomean


def policy_setup(run: str, graphs: list, cluster: str) -> tuple:
    """``(model, env)`` for the run's best model on ``graphs``."""
    from pathlib import Path

    from envs import make_env
    from graphopt.eval.evaluate import load_run_model, model_sizes

    model = load_run_model(Path(run))
    max_ops, max_edges = model_sizes(model, "placement")
    env = make_env("placement", graphs, cluster, max_ops=max_ops, max_edges=max_edges)
    return model, env


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--graphs", default=HELD_OUT)
    parser.add_argument("--cluster", default="v100-nvlink-4")
    parser.add_argument("--budgets", default="256,1024,4096")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=4, help="candidates estimated per round")
    parser.add_argument("--run", help="a placement run whose policy proposes the moves")
    parser.add_argument("--large", default="gnmt-8", help="graph for the cost per estimate")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cluster = get_cluster(args.cluster)
    budgets = [int(b) for b in args.budgets.split(",")]
    graphs = resolve_graphs(args.graphs.split(","))
    model = env = None
    if args.run:
        from policies.rollout import placement_probabilities

        model, env = policy_setup(args.run, graphs, args.cluster)
    columns = [f"{kind}@{b}" for b in budgets for kind in ("estimate", "believes", "annealing")]
    if model is not None:
        columns += [f"policy@{b}" for b in budgets]
    print(f"{'graph':<26} {'ops':>6} " + " ".join(f"{c:>14}" for c in columns) + "  seconds")
    table: dict[str, list[float]] = {c: [] for c in columns}
    for i, graph in enumerate(graphs):
        t0 = time.perf_counter()
        decision, measurement, _ = best_heuristic(graph, cluster, "placement", Simulator())
        start = np.asarray(decision.placement, dtype=np.int64)
        base = measurement.step_time
        prepared = PreparedGraph(graph, cluster)
        estimate = PlacementEstimate(graph, cluster)
        row: dict[str, float] = {}
        seeds = range(args.seeds)
        for b in budgets:
            found = [
                estimate_search(
                    graph, cluster, start, b, seed=s, batch=args.batch, estimate=estimate
                )
                for s in seeds
            ]
            row[f"estimate@{b}"] = geomean(
                [base / step_times(prepared, f.placement[None])[0] for f in found]
            )
            row[f"believes@{b}"] = geomean([f.estimated_speedup for f in found])
            annealed = [
                simulated_annealing(
                    graph, cluster, "placement", b, seed=s, start=Decision(placement=start)
                ).measurement.step_time
                for s in seeds
            ]
            row[f"annealing@{b}"] = geomean([base / t for t in annealed])
        if model is not None and env is not None:
            obs, _ = env.reset(options={"graph": i})
            action, _ = model.predict(obs, deterministic=True)
            greedy = np.asarray(env.decode(action).placement, dtype=np.int64)
            propose = weighted_moves(placement_probabilities(model, obs, graph.num_ops))
            for b in budgets:
                found = [
                    estimate_search(
                        graph,
                        cluster,
                        greedy,
                        b,
                        seed=s,
                        propose=propose,
                        batch=args.batch,
                        estimate=estimate,
                    )
                    for s in seeds
                ]
                row[f"policy@{b}"] = geomean(
                    [base / step_times(prepared, f.placement[None])[0] for f in found]
                )
        for c in columns:
            table[c].append(row[c])
        print(
            f"{graph.name[:26]:<26} {graph.num_ops:>6} "
            + " ".join(f"{row[c]:>14.3f}" for c in columns)
            + f"  {time.perf_counter() - t0:7.1f}",
            flush=True,
        )
    print(
        f"{'geometric mean':<26} {'':>6} "
        + " ".join(f"{geomean(table[c]):>14.3f}" for c in columns)
    )
    wins = {b: sum(x > 1.0 for x in table[f"estimate@{b}"]) for b in budgets}
    print(
        "graphs where estimate search beats the best heuristic: "
        + ", ".join(f"{wins[b]}/{len(graphs)} at {b}" for b in budgets)
    )

    (large,) = resolve_graphs([args.large])
    rng = np.random.default_rng(0)
    batch = rng.integers(0, cluster.num_devices, (64, large.num_ops))
    estimate = PlacementEstimate(large, cluster)
    prepared = PreparedGraph(large, cluster)
    estimate(batch[:1])  # compile
    step_times(prepared, batch[:1])
    t0 = time.perf_counter()
    estimate(batch)
    t_est = (time.perf_counter() - t0) / len(batch)
    t0 = time.perf_counter()
    step_times(prepared, batch)
    t_sim = (time.perf_counter() - t0) / len(batch)
    print(
        f"{large.name} ({large.num_ops:,} ops): {t_est * 1e3:.2f} ms per estimate, "
        f"{t_sim * 1e3:.2f} ms per simulation ({t_sim / t_est:.1f}x)"
    )


if __name__ == "__main__":
    main()
