"""The placement-edit policy zero-shot on graphs it never saw, against the rule it starts from.

Usage: python bench/bench_edit.py --run RUN [--graphs GRAPHS] [--seeds 3] [--final]

For each graph (the run's cluster; every figure a speed-up over the graph's best heuristic measured
by the simulator, geometric mean over ``--seeds`` seeds of the candidate draws):

- ``rule``: the untrained :class:`policies.MovePolicy` (take the candidate move with the highest
  analytic estimated gain, pass when none is estimated to help): what the policy starts from;
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
from graphopt.evaluate import load_run_model
from graphopt.sim import Simulator
from graphopt.train import rundir
from graphopt.train.config import load_config
from graphopt.train.rollout import geomean
from graphopt.typing import Decision

DEFAULT_GRAPHS = (
    "suite:heldout-small,pipedream:resnet50,pipedream:inception_v3,pipedream:gnmt,"
    "torch:resnet,torch:inception,torch:transformer"
)


def rule(obs: np.ndarray) -> int:
    """The untrained MovePolicy's greedy choice: the highest estimated gain, the pass on ties."""
    return int(np.argmax(obs[:, FEATURES.index("gain")]))


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
    model: PPO = PPO.load(run / rundir.FINAL, device="cpu") if args.final else load_run_model(run)
    sim = Simulator()
    env = PlacementEditEnv(args.graphs.split(","), config.cluster, cost_model=sim,
                           **config.env_extra)  # fmt: skip

    def greedy(obs: np.ndarray) -> int:
        return int(model.predict(obs, deterministic=True)[0])

    print(f"run {run} ({config.graphs}), cluster {config.cluster}, {args.seeds} seeds")
    print(f"{'graph':34s} {'ops':>6s} {'rule':>7s} {'policy':>7s} {'moves':>6s}")
    rows = []
    for i, graph in enumerate(env.graphs):
        ref = env.reference(i).measurement.step_time
        got: dict[str, list[float]] = {"rule": [], "policy": []}
        moves = []
        for seed in range(args.seeds):
            for name, act in (("rule", rule), ("policy", greedy)):
                placement = env.rollout(act, i, seed).placement
                m = sim.evaluate(graph, env.cluster, Decision(placement=placement))
                got[name].append(ref / m.step_time if m.valid else 0.0)
            moves.append(env.moves)
        row = (geomean(got["rule"]), geomean(got["policy"]))
        rows.append(row)
        print(f"{graph.name:34s} {graph.num_ops:6d} {row[0]:7.3f} {row[1]:7.3f} "
              f"{np.mean(moves):6.1f}")  # fmt: skip
    print(f"{'geometric mean':34s} {'':6s} {geomean([r[0] for r in rows]):7.3f} "
          f"{geomean([r[1] for r in rows]):7.3f}")  # fmt: skip
    print(
        f"graphs above the best heuristic: rule {sum(r[0] > 1 for r in rows)} of {len(rows)}, "
        f"policy {sum(r[1] > 1 for r in rows)} of {len(rows)}"
    )


if __name__ == "__main__":
    main()
