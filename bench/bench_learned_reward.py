"""PPO with a learned reward, checked against the simulator: how big is the gap?

Usage: python bench/bench_learned_reward.py [--timesteps N] [--budget SECONDS] [--samples K]
                                            [--draws D] [--loss NAME]

1. Data: ``--samples`` decisions per graph of ``suite:default`` on ``v100-nvlink-4``, measured by
   the simulator (:func:`graphopt.costmodel.data.generate`, seed 0).
2. Cost model: ``graphopt costmodel train`` on them for ``--budget`` seconds with ``--loss``
   (default ListMLE; :func:`graphopt.costmodel.runs.train_run`; its test split's tau is printed).
3. Two PPO runs of ``--timesteps`` decisions with the demo configuration
   (``graphopt/configs/demo.yaml``), same seed: one rewarded by the learned model
   (``--cost-model``), one by the simulator. Both validate on ``suite:heldout-small`` with the
   simulator, so their held-out figures are comparable.
4. The gap: for each run's final policy on each training graph, the greedy decision and
   ``--draws - 1`` sampled ones are priced by both the learned model and the simulator, each
   against its own price of the reference decision (the env's speed-up ``t_ref / t``). Printed per
   graph: the mean speed-up the learned model believes, the mean the simulator measures, the
   Kendall tau between the two over the drawn decisions, and the greedy decision's true
   speed-up; then the held-out greedy speed-up (geometric mean, simulator) of both runs.

Every figure comes from runs in this process; one torch thread.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from graphopt.costmodel import data
from graphopt.costmodel.learned import LearnedCostModel
from graphopt.costmodel.metrics import kendall_tau
from graphopt.costmodel.runs import TEST_METRICS, train_run
from graphopt.eval.evaluate import load_run_model
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.train.config import load_config
from graphopt.train.trainer import make_envs, train
from graphopt.workloads.registry import resolve_graphs
from policies.rollout import geomean

ROOT = Path(__file__).resolve().parents[1]


def _final_val_speedup(run: Path) -> float:
    with (run / "metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["kind"] == "val"]
    return float(rows[-1]["speedup_geomean"])


def _gap(run: Path, config, learned: LearnedCostModel, draws: int) -> None:
    """Per training graph: believed vs measured speed-ups of the run's policy (module docstring)."""
    model = load_run_model(run)
    envs, _ = make_envs(dataclasses.replace(config, n_envs=1, val_graphs=""))
    env, sim = envs[0], Simulator()
    greedy_true = []
    for i, graph in enumerate(env.graphs):
        obs, _ = env.reset(seed=i, options={"graph": i})
        ref = env.reference(i).decision
        ref_sim = sim.evaluate(graph, env.cluster, ref).step_time
        ref_learned = learned.evaluate(graph, env.cluster, ref).step_time
        believed, measured = [], []
        for k in range(draws):
            action, _ = model.predict(obs, deterministic=(k == 0))
            decision = env.decode(action)
            believed.append(ref_learned / learned.evaluate(graph, env.cluster, decision).step_time)
            m = sim.evaluate(graph, env.cluster, decision)
            measured.append(ref_sim / m.step_time if m.valid else 0.0)
        greedy_true.append(measured[0])
        tau = kendall_tau(np.array(believed), np.array(measured)) if draws > 2 else float("nan")
        print(
            f"    {graph.name:<24} believed {np.mean(believed):6.3f}x  measured "
            f"{np.mean(measured):6.3f}x  tau {tau:6.3f}  greedy measured {measured[0]:6.3f}x"
        )
    print(f"    greedy on the training graphs, simulator: geomean {geomean(greedy_true):.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--timesteps", type=int, default=4096, help="PPO decisions per run")
    parser.add_argument("--budget", type=float, default=180.0, help="cost-model training seconds")
    parser.add_argument("--samples", type=int, default=384, help="measured decisions per graph")
    parser.add_argument("--draws", type=int, default=32, help="decisions per graph for the gap")
    parser.add_argument("--loss", default="listmle", help="the cost model's training loss")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    base = load_config(ROOT / "graphopt" / "configs" / "demo.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        graphs = resolve_graphs([base.graphs])
        data.generate(
            graphs,
            get_cluster(base.cluster),
            Path(tmp) / "cm",
            samples=args.samples,
            seed=0,
            progress=False,
        )
        cm_run = train_run(
            Path(tmp) / "cm",
            epochs=1000,
            time_budget=args.budget,
            lr=2e-3,
            loss=args.loss,
            name="reward",
            runs_root=tmp,
        )
        test = json.loads((cm_run / TEST_METRICS).read_text())
        print(
            f"cost model ({args.loss}): {args.samples} decisions on each of {len(graphs)} graphs of "
            f"{base.graphs}; test split tau {test['kendall_tau']:.3f}, top-10 error "
            f"{test['top10_error']:.2%} ({time.perf_counter() - t0:.0f} s with the data)"
        )
        learned = LearnedCostModel.load(cm_run)
        for reward in ("learned", "simulator"):
            config = dataclasses.replace(
                base,
                total_timesteps=args.timesteps,
                name=reward,
                eval_every=max(args.timesteps // 4, 1),
                checkpoint_every=args.timesteps,
                cost_model=str(cm_run) if reward == "learned" else "simulator",
            )
            t0 = time.perf_counter()
            run = train(config, runs_root=tmp, show_progress=False)
            print(
                f"PPO, reward from the {reward}: {args.timesteps} decisions in "
                f"{time.perf_counter() - t0:.0f} s; held-out greedy (simulator) "
                f"{_final_val_speedup(run):.3f}x over the best heuristic"
            )
            _gap(run, config, learned, args.draws)


if __name__ == "__main__":
    main()
