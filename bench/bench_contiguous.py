"""The contiguous-split placers (Tarnawski et al.'s greedy and max-load DP, PipeDream's planner)
on the project's training graphs: simulated step time and whether each split is contiguous on
the block DAG, for this tree and, with ``--before PATH``, for another checkout of graphopt.

    python bench/bench_contiguous.py --before /tmp/graphopt-before
    python bench/bench_contiguous.py --option
    python bench/bench_contiguous.py --before /tmp/graphopt-before --graphs 'torch:resnet?depth=18|torch:vit'

With ``--option``: every placer of ``PLACERS`` on the same graphs and clusters without and with
the cluster option ``contiguous: true`` (step time, or the placer's refusal), and whether the
simulator finds the placement contiguous.

Placements are computed by each tree's own code (a subprocess with that tree on ``PYTHONPATH``)
and judged here: step time by this tree's simulator (default priorities, no fusion), contiguity
by this tree's block DAG (the greedy's CPU runs its blocks one by one and is not judged).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = ("pipedream:resnet50", "pipedream:inception_v3", "pipedream:gnmt", "pipedream:vgg16")
CLUSTERS = ("accel-host", "v100-nvlink-4")
PLACERS = ("tarnawski-greedy", "tarnawski-dp", "pipedream")

COMPUTE = """
import json, sys, numpy as np
from graphopt.baselines.placement import PLACERS
from graphopt.hardware import get_cluster
from graphopt.workloads import resolve_graphs
out = {}
for spec in sys.argv[2].split("|"):
    (graph,) = resolve_graphs(spec)
    for cluster_name in sys.argv[3].split(","):
        cluster = get_cluster(cluster_name)
        for name in sys.argv[4].split(","):
            try:
                out[f"{spec}|{cluster_name}|{name}"] = PLACERS[name](graph, cluster).tolist()
            except ValueError as e:
                out[f"{spec}|{cluster_name}|{name}"] = str(e)
json.dump(out, open(sys.argv[1], "w"))
"""


def placements(tree: Path, graphs: list[str]) -> dict[str, list[int] | str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.json"
        env = dict(os.environ, PYTHONPATH=str(tree))
        args = [str(path), "|".join(graphs), ",".join(CLUSTERS), ",".join(PLACERS)]
        subprocess.run([sys.executable, "-c", COMPUTE, *args], env=env, check=True, cwd=tree)
        return json.loads(path.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="another checkout to compare with")
    parser.add_argument("--option", action="store_true", help="contiguous: false against true")
    parser.add_argument(
        "--graphs",
        default="|".join(GRAPHS),
        help="graphs of the before/after table, separated by '|' (a torch: source has '&')",
    )
    args = parser.parse_args()
    graphs = args.graphs.split("|")
    if args.option:
        option_table()
        return
    from graphopt.blocks import block_dag, is_contiguous
    from graphopt.hardware import get_cluster
    from graphopt.sim import PreparedGraph
    from graphopt.typing import Decision
    from graphopt.workloads import resolve_graphs

    trees = {"after": ROOT} | ({"before": args.before} if args.before else {})
    results = {label: placements(tree, graphs) for label, tree in trees.items()}
    header = ["graph", "cluster", "placer"] + [
        f"{label} {what}" for label in trees for what in ("ms", "contiguous")
    ]
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join(["---"] * 3 + ["---:"] * (len(header) - 3)) + " |")
    for spec in graphs:
        (graph,) = resolve_graphs(spec)
        dag = block_dag(graph)
        for cluster_name in CLUSTERS:
            cluster = get_cluster(cluster_name)
            prepared = PreparedGraph(graph, cluster)
            cpus = np.array([d for d, dev in enumerate(cluster.devices) if dev.kind == "CPU"])
            for name in PLACERS:
                row = [spec, cluster_name, name]
                for label in trees:
                    found = results[label][f"{spec}|{cluster_name}|{name}"]
                    if isinstance(found, str):
                        row += ["refused", "-"]
                        continue
                    placement = np.array(found)
                    m = prepared.evaluate(Decision(placement=placement))
                    stage = np.zeros(dag.num_blocks, dtype=np.int64)
                    stage[dag.block] = placement
                    whole = np.array_equal(stage[dag.block], placement)
                    alone = cpus if name == "tarnawski-greedy" else None
                    ok = whole and is_contiguous(dag, stage, singletons=alone)
                    digits = 1 if m.step_time >= 0.1 else 3  # small graphs: microseconds
                    ms = f"{m.step_time * 1e3:.{digits}f}" if m.valid else "invalid"
                    row += [ms, "yes" if ok else "no"]
                print("| " + " | ".join(row) + " |")


def option_table() -> None:
    """Every placer without and with ``contiguous: true`` (module docstring)."""
    from dataclasses import replace

    from graphopt.baselines.placement import PLACERS as REGISTRY
    from graphopt.constraints import constraints
    from graphopt.hardware import get_cluster
    from graphopt.sim import PreparedGraph
    from graphopt.typing import Decision
    from graphopt.workloads import resolve_graphs

    print("| graph | cluster | placer | ms | ms, contiguous: true | contiguous |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for spec in GRAPHS:
        (graph,) = resolve_graphs(spec)
        for cluster_name in CLUSTERS:
            rows = []
            for option in (False, True):
                cluster = replace(get_cluster(cluster_name), contiguous=option)
                prepared, rules = PreparedGraph(graph, cluster), constraints(graph, cluster)
                for name, placer in REGISTRY.items():
                    try:
                        placement = placer(graph, cluster)
                    except ValueError:
                        rows.append((name, "refused", "-"))
                        continue
                    m = prepared.evaluate(Decision(placement=placement))
                    ms = f"{m.step_time * 1e3:.1f}" if m.valid else "invalid"
                    ok = "yes" if rules.violation(placement) == "" else "no"
                    rows.append((name, ms, ok))
            half = len(rows) // 2
            for (name, ms, _), (_, ms_c, ok_c) in zip(rows[:half], rows[half:], strict=True):
                print(f"| {spec} | {cluster_name} | {name} | {ms} | {ms_c} | {ok_c} |")


if __name__ == "__main__":
    main()
