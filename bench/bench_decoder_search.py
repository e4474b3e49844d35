"""Search seeded by the GO network through the placement decoder against simulated annealing on
placements, at equal simulator calls and at equal seconds (the network's time included).

Usage: python bench/bench_decoder_search.py [--run RUN] [--graphs G] [--seeds 0,1,2]

Per held-out graph (the issue's set by default) and seed: annealing on placements from the best
heuristic (:func:`graphopt.baselines.search.simulated_annealing`) at 256 and 4,096 calls; the
decoder search (:func:`graphopt.decoders.search.decoder_search`) at 256 and 4,096 calls, started
from zero outputs (the best heuristic) or, with ``--run``, from that decoder run's greedy outputs
(one forward pass, timed); and both at 1 s and 10 s of wall time, each method's calls for a
budget of seconds taken from its own measured rate (as ``graphopt eval --curve`` does). Prints
the speed-ups over the best heuristic and their geometric means.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import numpy as np
import torch

import envs
from graphopt.baselines.search import simulated_annealing
from graphopt.decoders.search import decoder_search
from policies.rollout import decoder_outputs

EVAL = (
    "suite:heldout-small,pipedream:resnet50,pipedream:inception_v3,pipedream:gnmt,"
    "torch:inception,torch:lstm"
)


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run", default=None, help="a decoder run (graphopt train, decoder: heft-lc)"
    )
    parser.add_argument("--graphs", default=EVAL)
    parser.add_argument("--cluster", default="v100-nvlink-4")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--seconds", default="1,10", help="wall-time budgets ('' to skip)")
    parser.add_argument("--calls", default="256,4096", help="call budgets")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = None
    if args.run:
        from graphopt.eval.evaluate import load_run_model, model_sizes

        model = load_run_model(Path(args.run), device="cpu")
        max_ops, max_edges = model_sizes(model, "placement")
        env = envs.make_env(
            "placement",
            args.graphs,
            args.cluster,
            decoder="heft-lc",
            max_ops=max_ops,
            max_edges=max_edges,
        )
    else:
        env = envs.make_env("placement", args.graphs, args.cluster, decoder="heft-lc")
    seeds = [int(s) for s in args.seeds.split(",")]
    devices = [c for c, name in enumerate(env.channels) if name.startswith("affinity:")]
    start_name = "network" if model is not None else "zero"
    budgets = [int(c) for c in args.calls.split(",")]
    seconds_list = [float(s) for s in args.seconds.split(",") if s]
    columns = [f"sa@{c}" for c in budgets] + [f"dec({start_name})@{c}" for c in budgets]
    columns += [f"sa@{s:g}s" for s in seconds_list]
    columns += [f"dec({start_name})@{s:g}s" for s in seconds_list]
    print("| graph | " + " | ".join(columns) + " |")
    print("| --- | " + " | ".join("---:" for _ in columns) + " |")
    table: dict[str, list[float]] = {c: [] for c in columns}
    for i, graph in enumerate(env.graphs):
        ref = env.reference(i)
        ref_time = ref.measurement.step_time
        forward = 0.0
        start = np.zeros((len(env.channels), graph.num_ops))
        if model is not None:
            began = time.perf_counter()
            obs, _ = env.reset(options={"graph": i})
            start = decoder_outputs(model, obs, len(env.channels), graph.num_ops)
            forward = time.perf_counter() - began

        def evaluate(o: np.ndarray, graph=graph, i=i):  # noqa: ANN001, ANN202
            d = env.decode_outputs(i, o)
            return d, env.cost_model.evaluate(graph, env.cluster, d)

        cells: dict[str, list[float]] = {c: [] for c in columns}
        for seed in seeds:
            rates = {}
            for calls in budgets:
                began = time.perf_counter()
                sa = simulated_annealing(
                    graph, env.cluster, "placement", calls, seed, start=ref.decision
                )
                rates["sa"] = calls / (time.perf_counter() - began)
                cells[f"sa@{calls}"].append(ref_time / sa.measurement.step_time)
                began = time.perf_counter()
                found = decoder_search(evaluate, start, calls, seed=seed, affinity=devices)
                rates["dec"] = calls / (time.perf_counter() - began)
                cells[f"dec({start_name})@{calls}"].append(ref_time / found.measurement.step_time)
            for seconds in seconds_list:
                calls = max(1, int(rates["sa"] * seconds))
                sa = simulated_annealing(
                    graph, env.cluster, "placement", calls, seed, start=ref.decision
                )
                cells[f"sa@{seconds:g}s"].append(ref_time / sa.measurement.step_time)
                calls = max(1, int(rates["dec"] * max(seconds - forward, 0.0)))
                found = decoder_search(evaluate, start, calls, seed=seed, affinity=devices)
                cells[f"dec({start_name})@{seconds:g}s"].append(
                    ref_time / found.measurement.step_time
                )
        row = []
        for c in columns:
            value = geomean(cells[c])
            table[c].append(value)
            row.append(f"{value:.4f}")
        print(f"| {graph.name} | " + " | ".join(row) + " |", flush=True)
    print("| geometric mean | " + " | ".join(f"{geomean(table[c]):.4f}" for c in columns) + " |")


if __name__ == "__main__":
    main()
