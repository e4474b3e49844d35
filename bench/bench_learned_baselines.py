"""The learned methods peers compare against (GDP, HDP, Placeto) next to the GO policy, the best
heuristic and annealing, at equal budgets of simulator calls.

Usage:
    python bench/bench_learned_baselines.py sanity [--budget 4096] [--seeds 0,1,2] [--methods ...]
    python bench/bench_learned_baselines.py table [--train-budget 4096] [--budget 512]
        [--seeds 0] [--graphs suite:heldout-small,pipedream:gnmt,...]

``sanity``: does each method learn? On ``random-layered-16-s1`` (16 ops) on ``v100-nvlink-2``,
whose optimum is known (CP-SAT, :func:`graphopt.baselines.exact.solve_exact`: the best step time
over every placement and schedule; a placement-only method can reach it, since the exact
placement with the default schedule attains it), each method trains ``budget`` decisions
through :func:`graphopt.train.trainer.train` and is validated greedily on the same graph every
``budget / 16`` decisions. Prints the curve (greedy step time over the optimum) and a table: the
best greedy ratio, the decisions after which it first came within 5% of the optimum, wall time.

``table``: on the evaluation graphs on ``v100-nvlink-4``, per graph: the best heuristic, simulated
annealing from it at ``budget`` calls, and per learned method:

- GO and GDP (trained on suite:default) and Placeto (trained on suite:tiny), ``train-budget``
  decisions each (= simulator calls; validation on suite:heldout-small adds a few), then
  zero-shot (greedy: one call) and fine-tuned on the graph alone for ``budget`` calls
  (``finetune:BUDGET``);
- HDP trained on the graph alone for ``budget`` calls (REINFORCE; it does not transfer).

Placeto is not run on graphs above :data:`PLACETO_MAX_OPS` ops (the table says so). Training
wall times are printed as each run ends; the table compares at equal simulator calls.

Figures are speed-ups over the graph's best heuristic (above 1: faster) and their geometric mean.
torch.set_num_threads(1) throughout.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphopt.baselines.exact import solve_exact
from graphopt.eval.compare import compare_on_graph
from graphopt.eval.evaluate import load_run, policy_result
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.train.config import TrainConfig
from graphopt.train.trainer import train
from graphopt.typing import Decision
from graphopt.workloads import resolve_graphs

SANITY_GRAPH = "random-layered-16-s1"
SANITY_CLUSTER = "v100-nvlink-2"
CLUSTER = "v100-nvlink-4"

SANITY: dict[str, dict[str, Any]] = {
    "gdp": dict(task="placement", policy="gdp"),
    "hdp-reinforce": dict(task="placement", policy="hdp", algorithm="reinforce", groups=8),
    "hdp-ppo": dict(task="placement", policy="hdp", groups=8),
    "placeto-reinforce": dict(
        task="placement-edit",
        policy="placeto",
        algorithm="reinforce",
        learning_rate=3e-3,
        n_steps=64,
    ),
    "placeto-ppo": dict(task="placement-edit", policy="placeto", learning_rate=3e-3, n_steps=64),
}
"""The sanity runs: the config keys of each method (over :data:`SHARED`)."""
SHARED: dict[str, Any] = dict(
    n_envs=4, n_steps=16, batch_size=64, learning_rate=1e-3, ent_coef=0.01, checkpoint_every=10**9
)


def _train(config: TrainConfig, root: Path) -> Path:
    return train(config, runs_root=root, show_progress=False)


def _val_rows(run: Path) -> list[tuple[int, float]]:
    with open(run / "metrics.csv") as f:
        return [
            (int(r["timesteps"]), float(r["step_time_mean"]))
            for r in csv.DictReader(f)
            if r["kind"] == "val"
        ]


def sanity(budget: int, seeds: list[int], methods: list[str]) -> None:
    graph = resolve_graphs(SANITY_GRAPH)[0]
    cluster = get_cluster(SANITY_CLUSTER)
    exact = solve_exact(graph, cluster, time_limit=60)
    assert exact.measurement is not None
    optimum = exact.measurement.step_time
    sim = Simulator()
    placements = itertools.product(range(cluster.num_devices), repeat=graph.num_ops)
    exhaustive = min(
        sim.evaluate(graph, cluster, Decision(placement=np.array(p))).step_time for p in placements
    )
    print(
        f"every placement with the default schedule simulated: best {exhaustive * 1e3:.4f} ms "
        f"({exhaustive / optimum:.4f} x the optimum)"
    )
    print(
        f"{SANITY_GRAPH} ({graph.num_ops} ops) on {SANITY_CLUSTER}: optimum {optimum * 1e3:.4f} "
        f"ms ({exact.status}); budget {budget} decisions, validation every {budget // 16}"
    )
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        for method in methods:
            for seed in seeds:
                config = TrainConfig(
                    **{**SHARED, **SANITY[method]},
                    graphs=SANITY_GRAPH,
                    val_graphs=SANITY_GRAPH,
                    cluster=SANITY_CLUSTER,
                    total_timesteps=budget,
                    eval_every=max(budget // 16, 1),
                    seed=seed,
                    name=f"{method}-{seed}",
                ).validate()
                start = time.perf_counter()
                run = _train(config, Path(tmp))
                wall = time.perf_counter() - start
                rows = _val_rows(run)
                curve = " ".join(f"{t}:{s / optimum:.3f}" for t, s in rows)
                print(f"  {method} seed {seed}: {curve}")
                best = min(s for _, s in rows) / optimum
                within = next((t for t, s in rows if s <= 1.05 * optimum), None)
                table.append((method, seed, best, within, wall))
    print("\n| method | seed | best greedy / optimum | within 5% after | wall s |")
    print("| --- | --- | --- | --- | --- |")
    for method, seed, best, within, wall in table:
        reached = f"{within} decisions" if within is not None else f"not in {budget}"
        print(f"| {method} | {seed} | {best:.3f} | {reached} | {wall:.0f} |")


PLACETO_MAX_OPS = 2000
"""Placeto is evaluated on graphs up to this size: its episode is one policy step per op, so a
greedy decision on 5,348 ops (torch:lstm) takes minutes on 2 CPU cores, and fine-tuning more."""


def _pretrained(method: str, budget: int, seed: int, root: Path, max_ops: int) -> Path:
    """A run of GO, GDP or Placeto trained on its family for ``budget`` decisions, its policy
    sized for graphs of ``max_ops`` ops."""
    common = dict(
        cluster=CLUSTER,
        val_graphs="suite:heldout-small",
        total_timesteps=budget,
        n_envs=4,
        max_ops=max_ops,
        eval_every=max(budget // 2, 1),
        checkpoint_every=10**9,
        seed=seed,
        name=f"{method}-{seed}",
    )
    if method == "go":
        config = TrainConfig(task="placement", graphs="suite:default", n_steps=32, **common)
    elif method == "gdp":
        config = TrainConfig(
            task="placement",
            policy="gdp",
            graphs="suite:default",
            n_steps=32,
            learning_rate=1e-3,
            ent_coef=0.01,
            **common,
        )
    else:
        config = TrainConfig(
            task="placement-edit",
            policy="placeto",
            graphs="suite:tiny",
            n_steps=128,
            learning_rate=1e-3,
            ent_coef=0.01,
            **common,
        )
    return _train(config.validate(), root)


def _speedup(ref: float, step: float, valid: bool) -> float:
    """The speed-up over the best heuristic; 0 for an invalid decision."""
    return ref / step if valid and step > 0 else 0.0


def _shown(ref: float, m: Any) -> str:
    return f"{ref / m.step_time:.3f}" if m.valid else f"invalid ({m.reason})"


def _cell(values: list[float] | None) -> str:
    """Mean over seeds of the valid decisions, with how many seeds were invalid."""
    if values is None:
        return "not run"
    valid = [v for v in values if v > 0]
    if not valid:
        return "invalid"
    bad = len(values) - len(valid)
    return f"{statistics.mean(valid):.3f}" + (f" ({bad}/{len(values)} invalid)" if bad else "")


def table(train_budget: int, budget: int, seeds: list[int], graphs_spec: str) -> None:
    # each graph with a spec that resolves it alone (for HDP's per-graph runs)
    specs = [
        (g.name if item.startswith("suite:") else item, g)
        for item in graphs_spec.split(",")
        for g in resolve_graphs(item)
    ]
    graphs = [g for _, g in specs]
    cluster = get_cluster(CLUSTER)
    largest = max(g.num_ops for g in graphs + resolve_graphs("suite:heldout-small"))
    rows: dict[str, dict[str, list[float]]] = {}
    chosen: dict[str, str] = {}  # the best heuristic of each graph

    def add(graph: str, method: str, value: float) -> None:
        rows.setdefault(method, {}).setdefault(graph, []).append(value)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for seed in seeds:
            torch.manual_seed(seed)
            runs = {}
            for method in ("go", "gdp", "placeto"):
                start = time.perf_counter()
                size = largest if method != "placeto" else min(largest, PLACETO_MAX_OPS)
                runs[method] = _pretrained(method, train_budget, seed, root, size)
                print(
                    f"trained {method} seed {seed}: {time.perf_counter() - start:.0f} s", flush=True
                )
            for spec, graph in specs:
                comp = compare_on_graph(graph, cluster, "placement", budget=budget, seed=seed)
                best = comp.best_heuristic
                assert best is not None
                ref = best.step_time
                add(graph.name, "best heuristic", 1.0)
                chosen[graph.name] = best.method
                for r in comp.results:
                    if r.method == f"annealing@{budget}":
                        add(graph.name, r.method, _speedup(ref, r.step_time, r.valid))
                for method, run in runs.items():
                    if method == "placeto" and graph.num_ops > PLACETO_MAX_OPS:
                        print(f"  {graph.name} placeto: not run ({graph.num_ops} ops)")
                        continue
                    for mode in ("greedy", f"finetune:{budget}"):
                        start = time.perf_counter()
                        loaded = load_run(run, [graph], None, seed, device="cpu")
                        res = policy_result(loaded.model, loaded.env, 0, mode, seed)
                        m = res.measurement
                        add(graph.name, f"{method} {mode}", _speedup(ref, m.step_time, m.valid))
                        print(
                            f"  {graph.name} {method} {mode}: {_shown(ref, m)} "
                            f"({time.perf_counter() - start:.0f} s)",
                            flush=True,
                        )
                start = time.perf_counter()
                hdp = TrainConfig(
                    task="placement",
                    policy="hdp",
                    algorithm="reinforce",
                    groups=16,
                    graphs=spec,
                    val_graphs=spec,
                    cluster=CLUSTER,
                    total_timesteps=budget,
                    n_envs=4,
                    n_steps=16,
                    learning_rate=1e-3,
                    ent_coef=0.01,
                    eval_every=max(budget // 8, 1),
                    checkpoint_every=10**9,
                    seed=seed,
                    name=f"hdp-{seed}",  # runs of one name are numbered
                ).validate()
                run = _train(hdp, root)
                loaded = load_run(run, [graph], None, seed, device="cpu")
                m = policy_result(loaded.model, loaded.env, 0, "greedy", seed).measurement
                add(graph.name, f"hdp@{budget} (per graph)", _speedup(ref, m.step_time, m.valid))
                print(
                    f"  {graph.name} hdp: {_shown(ref, m)} ({time.perf_counter() - start:.0f} s)",
                    flush=True,
                )
    names = [g.name for g in graphs]
    print(
        f"\nspeed-up over the best heuristic on {CLUSTER}; train budget {train_budget}, "
        f"per-graph budget {budget}; seeds {seeds} (mean over seeds)"
    )
    print("| method | " + " | ".join(names) + " | geomean |")
    print("| --- |" + " --- |" * (len(names) + 1))
    for method, per_graph in rows.items():
        ran = [v for g in names for v in per_graph.get(g, [])]
        geo = math.exp(statistics.mean(math.log(v) for v in ran)) if all(ran) else 0.0
        cells = " | ".join(_cell(per_graph.get(g)) for g in names)
        note = "" if all(g in per_graph for g in names) else " (graphs run)"
        shown = f"{geo:.3f}" if geo > 0 else "0 (an invalid decision)"
        print(f"| {method} | {cells} | {shown}{note} |")
    print("best heuristic: " + ", ".join(f"{g}: {chosen[g]}" for g in names))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", choices=("sanity", "table"))
    parser.add_argument(
        "--budget",
        type=int,
        default=None,
        help="sanity: training decisions (4096); table: per-graph calls (512)",
    )
    parser.add_argument("--train-budget", type=int, default=4096)
    parser.add_argument("--seeds", default=None, help="sanity: 0,1,2; table: 0")
    parser.add_argument("--methods", default=",".join(SANITY))
    parser.add_argument("--graphs", default="suite:heldout-small")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.study == "sanity":
        seeds = [int(s) for s in (args.seeds or "0,1,2").split(",")]
        sanity(args.budget or 4096, seeds, args.methods.split(","))
    else:
        seeds = [int(s) for s in (args.seeds or "0").split(",")]
        table(args.train_budget, args.budget or 512, seeds, args.graphs)


if __name__ == "__main__":
    main()
