"""The learned search against annealing, at equal and at 16x the simulator calls (placement).

For each graph (default: the held-out graphs of the issue that fit in seconds: ``suite:heldout-small``
and the zoo's ``torch:inception`` and ``torch:lstm``), on the run's cluster, from the graph's best
heuristic, printed as speed-up over that heuristic:

- ``learned@K``: :func:`policies.learned_search.learned_search`, the edit policy of ``RUN``
  ranking each round's candidate moves, the best ``--batch`` simulated per round;
- ``estimate@K``: the same search with the moves ranked by the analytic estimate alone (what
  the policy adds to the search is the difference);
- ``roll@K`` / ``roll-est@K``: :func:`policies.learned_search.rollout_search`, ``K`` rollouts
  of ``--moves`` moves on the estimate from the best placement so far, each simulated once,
  the moves chosen by the policy / by the estimate's gain;
- ``anneal@K``: simulated annealing from the best heuristic (:mod:`graphopt.baselines.search`);

for ``K`` in ``--calls`` (default 64, 256, 1024) and annealing also at ``--anneal-max`` (4096),
then geometric means over the graphs. Target (issue "learning that pays", placement search
efficiency): learned@256 >= anneal@4096 in geometric mean.

Run: ``python bench/bench_learned_search.py RUN [--graphs G] [--calls 64,256,1024]
[--anneal-max 4096] [--batch 1] [--moves 16] [--seeds 3] [--candidates C]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from envs import make_env
from envs.base import resolve_graph_list
from graphopt import rundir
from graphopt.baselines.search import simulated_annealing
from graphopt.eval.compare import geomean_speedup
from graphopt.eval.evaluate import load_run_model
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.train.config import load_config
from policies.learned_search import learned_search, rollout_search

GRAPHS = "suite:heldout-small,torch:inception,torch:lstm"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run")
    p.add_argument("--graphs", default=GRAPHS)
    p.add_argument("--calls", default="64,256,1024")
    p.add_argument("--anneal-max", type=int, default=4096)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--moves", type=int, default=16, help="moves per rollout of roll@K")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument(
        "--candidates", type=int, default=0, help="moves drawn per round (default: the run's)"
    )
    args = p.parse_args()
    path = rundir.check_run_dir(args.run)
    config = load_config(path / rundir.CONFIG_FILE)
    model = load_run_model(path)
    cluster = get_cluster(config.cluster)
    graphs = resolve_graph_list(args.graphs)
    budgets = [int(k) for k in args.calls.split(",")]
    sim = Simulator()
    env = make_env(
        "placement-edit",
        graphs,
        cluster,
        cost_model=sim,
        seed=0,
        candidates=args.candidates or config.candidates,
        horizon=config.horizon,
    )
    methods = ("learned", "estimate", "roll", "roll-est", "anneal")
    columns = [f"{m}@{k}" for k in budgets for m in methods]
    columns.append(f"anneal@{args.anneal_max}")
    print(
        f"run {path} ({config.task}), cluster {cluster.name}, batch {args.batch}, "
        f"{args.seeds} seed(s): speed-up over the best heuristic (mean over seeds)"
    )
    print(f"{'graph':<28}{'ops':>7}" + "".join(f"{c:>14}" for c in columns) + f"{'s':>7}")
    table: dict[str, list[float]] = {c: [] for c in columns}
    searches: dict[str, tuple[Any, dict[str, Any]]] = {
        "learned": (learned_search, {"batch": args.batch, "ranking": "policy"}),
        "estimate": (learned_search, {"batch": args.batch, "ranking": "estimate"}),
        "roll": (rollout_search, {"moves": args.moves, "ranking": "policy"}),
        "roll-est": (rollout_search, {"moves": args.moves, "ranking": "estimate"}),
    }
    for i, graph in enumerate(graphs):
        began = time.perf_counter()
        ref = env.reference(i).measurement.step_time
        start = env.reference(i).decision
        row: dict[str, float] = {}
        for column in columns:
            name, k = column.rsplit("@", 1)
            speed = []
            for seed in range(args.seeds):
                if name == "anneal":
                    res = simulated_annealing(
                        graph, cluster, "placement", int(k), seed, start=start
                    )
                else:
                    search, settings = searches[name]
                    res = search(model, env, i, int(k), seed=seed, **settings)
                m = res.measurement
                speed.append(ref / m.step_time if m.valid else 0)
            row[column] = statistics.mean(speed)
        for c in columns:
            table[c].append(row[c])
        print(
            f"{graph.name[:27]:<28}{graph.num_ops:>7}"
            + "".join(f"{row[c]:>14.4f}" for c in columns)
            + f"{time.perf_counter() - began:>7.1f}",
            flush=True,
        )
    print(f"{'geomean':<35}" + "".join(f"{geomean_speedup(table[c]):>14.4f}" for c in columns))


if __name__ == "__main__":
    main()
