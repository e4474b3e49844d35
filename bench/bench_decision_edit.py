"""Scheduling, fusion and joint improved by a policy-proposed hill climb, against annealing at
equal simulator calls (issue "learning that pays", targets for the three tasks).

For each task and graph (default: the held-out graphs ``suite:heldout-small``, the PipeDream
``resnet50``, ``inception_v3`` and ``gnmt`` training graphs (the profiles shipped in
``graphopt/data/pipedream``, or those of ``GRAPHOPT_PIPEDREAM_DIR``), and the zoo's
``torch:inception`` and ``torch:lstm``), on ``v100-nvlink-4``, from the graph's best heuristic
of the task's chain, printed as speed-up over that heuristic at ``K`` simulator calls
(``--calls``, default 256), every method spending exactly ``K`` (the start's simulation
included):

- ``anneal``: simulated annealing (:mod:`graphopt.baselines.search`), mean over ``--seeds``;
- ``random``: the hill climb of :mod:`envs.decision_edit` with uniformly chosen candidates
  (the environment's proposals without a policy), mean over ``--seeds``;
- ``prior``: the same hill climb, taking the candidate of the highest prior (the untrained
  MovePolicy's greedy choice: a critical-path rule);
- ``learned``: the greedy policy of the ``--run`` given for the task (``TASK=RUN``), if any;
- ``room``: how far the lower bound is below the best heuristic (1 - bound / heuristic), the
  target counting only graphs with at least 2% room.

Then geometric means, and for each method the graphs it beats annealing on.

Run: ``python bench/bench_decision_edit.py [--tasks scheduling,fusion,joint] [--calls 256]
[--seeds 3] [--run fusion=runs/fusion-edit/fusion-edit_1 ...] [--graphs G]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

from envs import make_env
from envs.base import resolve_graph_list
from envs.decision_edit import FEATURES, DecisionEditEnv
from graphopt.baselines.search import simulated_annealing
from graphopt.eval.compare import geomean_speedup
from graphopt.eval.evaluate import load_run
from graphopt.hardware import get_cluster
from graphopt.importers.pipedream import default_profile_dir
from graphopt.sim import Simulator
from graphopt.sim.bounds import any_fusion_lower_bounds, lower_bounds

PIPEDREAM = ("resnet50", "inception_v3", "gnmt")


def default_graphs() -> str:
    folder = default_profile_dir()
    names = ["suite:heldout-small", *(f"pipedream:{folder}/{n}.txt" for n in PIPEDREAM)]
    return ",".join([*names, "torch:inception", "torch:lstm"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", default="scheduling,fusion,joint")
    p.add_argument("--graphs", default="")
    p.add_argument("--cluster", default="v100-nvlink-4")
    p.add_argument("--calls", type=int, default=256)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--candidates", type=int, default=16)
    p.add_argument("--run", action="append", default=[], help="TASK=RUN, e.g. fusion=runs/...")
    args = p.parse_args()
    runs = dict(item.split("=", 1) for item in args.run)
    graphs = resolve_graph_list(args.graphs or default_graphs())
    cluster = get_cluster(args.cluster)
    sim = Simulator()
    for task in args.tasks.split(","):
        bench_task(task, graphs, cluster, sim, args, runs.get(task))


def bench_task(
    task: str, graphs: list[Any], cluster: Any, sim: Simulator, args: Any, run: str | None
) -> None:
    """Print the table of one task (module docstring)."""
    k = args.calls
    model: Any = None
    if run:  # the environment of the run's settings (its observation: rows, or rows and graph)
        loaded = load_run(run, graphs, cluster.name, seed=0)
        env, model = loaded.env, loaded.model
    else:
        env = make_env(
            f"{task}-edit", graphs, cluster, cost_model=sim, seed=0, candidates=args.candidates
        )
    assert isinstance(env, DecisionEditEnv)
    methods = ["anneal", "random", "prior"] + (["learned"] if model is not None else [])
    col = FEATURES.index("prior")
    rng = np.random.default_rng(0)

    def rows(obs: Any) -> np.ndarray:
        return obs["rows"] if isinstance(obs, dict) else obs

    acts: dict[str, tuple[Any, int]] = {
        "random": (lambda obs: int(rng.integers(len(rows(obs)))), args.seeds),
        "prior": (lambda obs: int(np.argmax(rows(obs)[:, col])), 1),
    }
    if model is not None:
        acts["learned"] = (lambda obs: int(model.predict(obs, deterministic=True)[0]), 1)
    print(f"\n{task} on {cluster.name}, {k} simulator calls, from the best heuristic")
    print(f"{'graph':<24} {'ops':>6} {'room':>6} " + " ".join(f"{m:>8}" for m in methods))
    table: dict[str, list[float]] = {m: [] for m in methods}
    roomy: list[bool] = []
    seconds: dict[str, float] = dict.fromkeys(methods, 0.0)
    for i, g in enumerate(graphs):
        ref = env.reference(i)
        t_ref = ref.measurement.step_time
        bound = (any_fusion_lower_bounds if task != "scheduling" else lower_bounds)(g, cluster)
        room = 1.0 - bound.best / t_ref
        roomy.append(room >= 0.02)
        row: dict[str, float] = {}
        began = time.perf_counter()
        row["anneal"] = statistics.fmean(
            t_ref
            / simulated_annealing(g, cluster, task, k, s, start=ref.decision).measurement.step_time
            for s in range(args.seeds)
        )
        seconds["anneal"] += time.perf_counter() - began
        for name, (act, seeds) in acts.items():
            began = time.perf_counter()
            out = []
            for s in range(seeds):
                _, m, calls = env.rollout(act, i, seed=s, calls=k)
                assert calls <= k
                out.append(t_ref / m.step_time if m.valid else 0.0)
            row[name] = statistics.fmean(out)
            seconds[name] += time.perf_counter() - began
        for m in methods:
            table[m].append(row[m])
        print(
            f"{g.name[:24]:<24} {g.num_ops:>6} {room:>6.1%} "
            + " ".join(f"{row[m]:>8.4f}" for m in methods)
        )
    print(
        f"{'geomean':<24} {'':>6} {'':>6} "
        + " ".join(f"{geomean_speedup(table[m]):>8.4f}" for m in methods)
    )
    print(
        f"{'seconds (all graphs, all seeds)':<38} "
        + " ".join(f"{seconds[m]:>8.1f}" for m in methods)
    )
    for m in methods[1:]:
        pairs = [(a, b) for a, b, r in zip(table[m], table["anneal"], roomy, strict=True) if r]
        beats = sum(a > b for a, b in pairs)
        ties = sum(a == b for a, b in pairs)
        above = sum(a > 1.0 for a, _ in pairs)
        print(
            f"  {m}: on the {len(pairs)} graphs with >= 2% room, beats annealing on {beats} "
            f"(ties {ties}), above the heuristic on {above}"
        )


if __name__ == "__main__":
    main()
