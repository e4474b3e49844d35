"""Every built-in graph's simulated step time under every placer of ``PLACERS``, on the cluster
presets, for this tree or another checkout: the check that a change leaves the default figures
as they were.

    python bench/bench_default_figures.py --out /tmp/after.json
    python bench/bench_default_figures.py --tree /tmp/graphopt-before --out /tmp/before.json
    python bench/bench_default_figures.py --compare /tmp/before.json /tmp/after.json

A row is ``graph|cluster|placer`` -> ``[step time repr, sha256 of the placement]`` or the
placer's refusal. The placements and step times are each tree's own (a subprocess with the tree
on ``PYTHONPATH``); ``--compare`` prints every row that differs, and exits 1 when a row of a
preset with the default model options differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PRESETS = (
    "v100-nvlink-2",
    "v100-nvlink-4",
    "v100-nvlink-8",
    "v100-pcie-4",
    "hetero-cpu-2gpu",
)
"""The presets with every model option at its default."""
OTHER_PRESETS = ("accel-host", "doppler-4")
"""Presets with other model options: reported, expected to change where a method now honours
an option it ignored."""

COMPUTE = """
import hashlib, json, sys
import numpy as np
from graphopt.baselines.placement import PLACERS
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.typing import Decision
from graphopt.workloads.registry import get_graph, list_graphs
out, sim = {}, Simulator()
graphs = sys.argv[3].split(",") if sys.argv[3] else list(list_graphs())
for graph_name in graphs:
    graph = get_graph(graph_name)
    for cluster_name in sys.argv[2].split(","):
        cluster = get_cluster(cluster_name)
        for name, placer in PLACERS.items():
            key = f"{graph_name}|{cluster_name}|{name}"
            try:
                place = np.asarray(placer(graph, cluster), dtype=np.int64)
            except ValueError as e:
                out[key] = str(e)
                continue
            m = sim.evaluate(graph, cluster, Decision(placement=place))
            out[key] = [repr(float(m.step_time)), hashlib.sha256(place.tobytes()).hexdigest()]
        print(graph_name, cluster_name, flush=True)
    json.dump(out, open(sys.argv[1], "w"), indent=0)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument("--out", type=Path, help="the JSON to write")
    parser.add_argument("--graphs", default="", help="comma-separated graphs (default: all)")
    parser.add_argument("--clusters", default=",".join(DEFAULT_PRESETS + OTHER_PRESETS))
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        changed = [k for k in sorted(before.keys() | after.keys()) if before.get(k) != after.get(k)]
        for key in changed:
            print(f"{key}: {before.get(key)} -> {after.get(key)}")
        default = [k for k in changed if k.split("|")[1] in DEFAULT_PRESETS]
        print(
            f"{len(before)} rows before, {len(after)} after; {len(changed)} differ, "
            f"{len(default)} of them on presets with the default model options"
        )
        sys.exit(1 if default else 0)
    env = dict(os.environ, PYTHONPATH=str(args.tree.resolve()), OMP_NUM_THREADS="1")
    command = [sys.executable, "-c", COMPUTE, str(args.out), args.clusters, args.graphs]
    subprocess.run(command, env=env, check=True, cwd=args.tree)


if __name__ == "__main__":
    main()
