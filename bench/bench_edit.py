"""The placement-edit policy zero-shot on graphs it never saw, against the rule it starts from.

Usage: python bench/bench_edit.py --run RUN [--graphs GRAPHS] [--seeds 3] [--final]

For each graph (the run's cluster; every figure a speed-up over the graph's best heuristic measured
by the simulator, geometric mean over ``--seeds`` seeds of the candidate draws):

- ``insert``: the rule on the insertion schedule alone (the highest gain in the ``gain_insert``
  column, pass when none helps), for comparison;
- ``rule``: the untrained :class:`policies.MovePolicy` (take the candidate move with the highest
  vetted estimated gain, :func:`envs.placement_edit.vetted_gain`, pass when none is estimated to
  help): what the policy starts from;
- ``policy``: the run's best model (``--final``: its final one), greedy (``graphopt eval RUN --mode greedy`` with seed 0 is one
  of these seeds);
- ``moves``: moves the policy made (mean over seeds), out of the run's horizon.

Both see the same candidates (same seed) and make no simulator call until their final placement
is measured. One torch thread.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from stable_baselines3 import PPO

from envs.placement_edit import FEATURES, PlacementEditEnv
from graphopt import rundir
from graphopt.eval.evaluate import load_run_model
from graphopt.sim import Simulator
from graphopt.train.config import load_config
from graphopt.typing import Decision
from policies.rollout import geomean

DEFAULT_GRAPHS = (
    "suite:heldout-small,pipedream:resnet50,pipedream:inception_v3,pipedream:gnmt,"
    "torch:resnet,torch:inception,torch:transformer,torch:lstm"
)


def rule(obs: np.ndarray) -> int:
    """The untrained MovePolicy's greedy choice: the highest estimated gain, the pass on ties."""
    return int(np.argmax(obs[:, FEATURES.index("gain")]))


def insert_rule(obs: np.ndarray) -> int:
    """The same rule on the insertion schedule's gain alone."""
    return int(np.argmax(obs[:, FEATURES.index("gain_insert")]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", required=True)
    parser.add_argument("--graphs", default=DEFAULT_GRAPHS)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--final", action="store_true", help="the final model, not the best")
    args = parser.parse_args()
    torch.set_num_threads(1)

    run = Path(args.run)
    config = load_config(run / rundir.CONFIG_FILE)
    if config.task != "placement-edit":
        raise SystemExit(f"{run} is a {config.task} run; this bench takes placement-edit runs")
    model: PPO = load_run_model(run, run / rundir.FINAL) if args.final else load_run_model(run)
    sim = Simulator()
    env = PlacementEditEnv(
        args.graphs.split(","), config.cluster, cost_model=sim, **config.env_settings()
    )

    def greedy(obs: np.ndarray) -> int:
        return int(model.predict(obs, deterministic=True)[0])

    print(f"run {run} ({config.graphs}), cluster {config.cluster}, {args.seeds} seeds")
    names = ("insert", "rule", "policy")
    print(f"{'graph':34s} {'ops':>6s} " + " ".join(f"{n:>7s}" for n in names) + f" {'moves':>6s}")
    rows = []
    for i, graph in enumerate(env.graphs):
        ref = env.reference(i).measurement.step_time
        got: dict[str, list[float]] = {name: [] for name in names}
        moves = []
        for seed in range(args.seeds):
            for name, act in (("insert", insert_rule), ("rule", rule), ("policy", greedy)):
                placement = env.rollout(act, i, seed).placement
                m = sim.evaluate(graph, env.cluster, Decision(placement=placement))
                got[name].append(ref / m.step_time if m.valid else 0.0)
            moves.append(env.moves)
        row = [geomean(got[name]) for name in names]
        rows.append(row)
        print(
            f"{graph.name:34s} {graph.num_ops:6d} "
            + " ".join(f"{v:7.3f}" for v in row)
            + f" {np.mean(moves):6.1f}"
        )
    columns = [list(c) for c in zip(*rows, strict=True)]
    print(f"{'geometric mean':34s} {'':6s} " + " ".join(f"{geomean(c):7.3f}" for c in columns))
    above = ", ".join(f"{n} {sum(v > 1 for v in c)}" for n, c in zip(names, columns, strict=True))
    print(f"graphs above the best heuristic (of {len(rows)}): {above}")


if __name__ == "__main__":
    main()
