"""Compile graphopt's numba functions into numba's on-disk cache ahead of their first use.

Every ``@njit(cache=True)`` function is compiled the first time a process calls it and kept in
``__pycache__`` beside its module; later processes load it in milliseconds. On a fresh checkout
nothing is cached yet, so the first commands compile (about two minutes of compilation in all).
``make warmup`` runs this module: a tiny graph through the paths that use compiled code, in
:data:`PARTS`: the simulator first (:data:`FIRST`: every other part calls it), then the others as
parallel processes. Use it before timing anything on a new machine; ``make test`` does not (its
two workers compile what they use while other tests run, which is sooner in all).

``python -m graphopt.warmup`` runs every part (in parallel); ``--part NAME`` runs one in this
process. A part that fails prints its error and makes the exit status 1 (the cache is only an
optimisation: everything still compiles on first use).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

GRAPH = "txl-tiny"
"""A small graph with parameters, colocation groups and fusible ops."""
CLUSTER = "v100-nvlink-4"


def _simulator() -> None:
    """The simulator (every other part calls it): one placement, one batch."""
    import numpy as np

    from graphopt.hardware import get_cluster
    from graphopt.sim import PreparedGraph, Simulator
    from graphopt.typing import Decision
    from graphopt.workloads import get_graph

    graph, cluster = get_graph(GRAPH), get_cluster(CLUSTER)
    placement = np.arange(graph.num_ops) % cluster.num_devices
    Simulator().evaluate(graph, cluster, Decision(placement=placement))
    PreparedGraph(graph, cluster).evaluate_batch(placement[None, :])


def _placement() -> None:
    """Every placement heuristic and the simulator."""
    from graphopt.baselines.staged import best_heuristic
    from graphopt.hardware import get_cluster
    from graphopt.sim import Simulator
    from graphopt.workloads import get_graph

    best_heuristic(get_graph(GRAPH), get_cluster(CLUSTER), "placement", Simulator())


def _other_tasks() -> None:
    """The scheduling, fusion and joint heuristics."""
    from graphopt.baselines.staged import best_heuristic
    from graphopt.hardware import get_cluster
    from graphopt.sim import Simulator
    from graphopt.workloads import get_graph

    graph, cluster = get_graph(GRAPH), get_cluster(CLUSTER)
    for task in ("scheduling", "fusion", "joint"):
        best_heuristic(graph, cluster, task, Simulator())


def _decoders() -> None:
    """The placement decoder's search, annealing, the step-wise decoder and its lookahead."""
    import numpy as np

    from graphopt.decoders.stepwise import HeadParams, decode, lookahead, step_graph
    from graphopt.hardware import get_cluster
    from graphopt.optimizer import optimize_graph
    from graphopt.sim import PreparedGraph
    from graphopt.workloads import get_graph

    graph, cluster = get_graph(GRAPH), get_cluster(CLUSTER)
    optimize_graph(graph, cluster, calls=8)
    sg = step_graph(graph, cluster)
    head = HeadParams.zeros(graph.num_ops)
    episode = decode(sg, "sample", head, rng=np.random.default_rng(0))
    lookahead(sg, head, episode.actions, np.array([0]))
    PreparedGraph(graph, cluster).evaluate_batch(episode.placement[None, :])


FIRST = {"simulator": _simulator}
"""Parts that run before the others (what every other part calls, compiled once)."""
PARTS = {**FIRST, "placement": _placement, "tasks": _other_tasks, "decoders": _decoders}
"""The parts, each a function that runs its paths once."""


def run_part(name: str) -> float:
    """Run part ``name`` in this process; returns its seconds."""
    start = time.perf_counter()
    PARTS[name]()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m graphopt.warmup", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--part", choices=sorted(PARTS), help="run one part in this process")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.part:
        try:
            seconds = run_part(args.part)
        except Exception as e:  # the cache is an optimisation: say what failed, go on
            print(f"graphopt.warmup: part {args.part} failed: {e}", file=sys.stderr)
            return 1
        print(f"graphopt.warmup: {args.part} in {seconds:.1f} s")
        return 0
    start = time.perf_counter()
    command = [sys.executable, "-m", "graphopt.warmup", "--part"]
    codes = [subprocess.call([*command, name]) for name in FIRST]
    procs = [subprocess.Popen([*command, name]) for name in PARTS if name not in FIRST]
    codes += [p.wait() for p in procs]
    print(f"graphopt.warmup: numba's cache filled in {time.perf_counter() - start:.1f} s")
    return 1 if any(codes) else 0


if __name__ == "__main__":
    sys.exit(main())
