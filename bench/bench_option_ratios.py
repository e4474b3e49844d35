"""Every cluster model option against the simulator: what each method that prices a transfer
predicts, divided by what the simulator gives for the same decision.

    python bench/bench_option_ratios.py                 # every option combination, 4 graphs
    python bench/bench_option_ratios.py --graphs 2 --combos single

On random graphs (60 ops, layered and series-parallel) and a host CPU with three accelerators
(:func:`option_cluster`), for every combination of ``contention``, ``route``, ``send``,
``copies``, ``dispatch``, ``colocation`` and ``op_times`` (roofline, calibrated):

- the estimate (:class:`graphopt.sim.estimate.PlacementEstimate`) on 200 random placements:
  Kendall's tau against the simulated step times, the median of estimate / simulated and the
  median of ``|estimate / simulated - 1|`` (``est |err|``);
- the heuristics' own predicted finish times for the placement they return, over its simulated
  step time (default priorities, no fusion): HEFT-lc (``heft_schedule(contention=True)``),
  HEFT (its contention-free model), m-ETF (Baechi's schedule, activations not charged), and the
  estimate's two no-queue figures of that placement (:func:`graphopt.sim.estimate.path_lengths`:
  the critical path and the topological list schedule).

Printed per option value (the median over the combinations with that value and the graphs),
then the worst combination of each column. The issue's targets: tau >= 0.9 and the estimate's
and HEFT-lc's ratios within 5% (median).
"""

from __future__ import annotations

import argparse
import itertools
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.stats import kendalltau  # noqa: E402

from graphopt.baselines._costs import (  # noqa: E402
    descending_rank_order,
    longest_path_to_sink,
    op_times,
    positions,
)
from graphopt.baselines.baechi import _m_etf_core  # noqa: E402
from graphopt.baselines.heft import heft_schedule  # noqa: E402
from graphopt.graph import CompGraph  # noqa: E402
from graphopt.hardware import MODEL_OPTIONS, Cluster, Device  # noqa: E402
from graphopt.sim import Simulator  # noqa: E402
from graphopt.sim.estimate import PlacementEstimate, estimate_links, path_lengths  # noqa: E402
from graphopt.sim.links import link_arrays  # noqa: E402
from graphopt.typing import Decision  # noqa: E402
from graphopt.workloads.random_dags import layered_dag, series_parallel_dag  # noqa: E402

OPTIONS = {**MODEL_OPTIONS, "op_times": ("roofline", "calibrated")}
COLUMNS = ("tau", "estimate", "est |err|", "heft-lc", "heft", "m-etf", "critical-path", "list")


def option_cluster(options: dict[str, str]) -> Cluster:
    """A host CPU (device 0) and three accelerators, PCIe to the host (12 GB/s, 10 us), NVLink
    between the accelerators (50 GB/s, 5 us), memory that never binds; ``options`` are the
    model options (``op_times: calibrated`` gives every device an efficiency table)."""
    options = dict(options)
    calibrated = options.get("op_times") == "calibrated"
    eff = (("contraction", 0.7, 1.0), ("elementwise", 1.0, 0.8)) if calibrated else ()
    devices = (Device("cpu", "CPU", 2e12, 1e11, 1e15, 1e-5, efficiency=eff),) + tuple(
        Device(f"gpu{i}", "V100", 15e12, 9e11, 1e15, 5e-6, efficiency=eff) for i in range(3)
    )
    bandwidth, latency = np.full((4, 4), 50e9), np.full((4, 4), 5e-6)
    bandwidth[0, :] = bandwidth[:, 0] = 12e9
    latency[0, :] = latency[:, 0] = 1e-5
    return Cluster("option-grid", devices, bandwidth, latency, **options)


def option_graphs(count: int, num_ops: int = 60) -> list[CompGraph]:
    """``count`` random graphs, layered and series-parallel in turn."""
    return [
        (layered_dag if k % 2 == 0 else series_parallel_dag)(num_ops, seed=k) for k in range(count)
    ]


def m_etf_finish(graph: CompGraph, cluster: Cluster) -> tuple[np.ndarray, float]:
    """m-ETF's placement and its own schedule length (no activation charge)."""
    times = op_times(graph, cluster)
    latency, bandwidth = link_arrays(cluster)
    succ_ptr, succ_dst = graph.successors_csr
    pred_ptr, pred_src, pred_edge = graph.predecessors_csr
    level = longest_path_to_sink(succ_ptr, succ_dst, times.mean(axis=1), np.zeros(graph.num_edges))
    dev, start, _, _ = _m_etf_core(
        succ_ptr, succ_dst, pred_ptr, pred_src, np.ascontiguousarray(graph.edge_bytes[pred_edge]),
        times, latency, bandwidth, positions(descending_rank_order(level)),
        np.ascontiguousarray(graph.param_bytes, dtype=np.float64),
        np.ascontiguousarray(graph.output_bytes, dtype=np.float64),
        np.zeros(cluster.num_devices), np.asarray(cluster.memory, dtype=np.float64),
    )  # fmt: skip
    return dev, float((start + times[np.arange(graph.num_ops), dev]).max())


def measure(graph: CompGraph, cluster: Cluster, sim: Simulator, samples: int = 200) -> dict:
    """Every column of :data:`COLUMNS` for one graph on one cluster."""
    rng = np.random.default_rng(0)
    place = rng.integers(0, cluster.num_devices, size=(samples, graph.num_ops))
    estimate = PlacementEstimate(graph, cluster)
    est = estimate(place)
    step = np.array([sim.evaluate(graph, cluster, Decision(placement=p)).step_time for p in place])
    out = {
        "tau": float(kendalltau(est, step).statistic),
        "estimate": float(np.median(est / step)),
        "est |err|": float(np.median(np.abs(est / step - 1.0))),
    }

    def simulated(placement: np.ndarray) -> float:
        return sim.evaluate(graph, cluster, Decision(placement=placement)).step_time

    lc = heft_schedule(graph, cluster, contention=True)
    out["heft-lc"] = lc.makespan / simulated(lc.placement)
    plain = heft_schedule(graph, cluster)
    out["heft"] = plain.makespan / simulated(plain.placement)
    dev, finish = m_etf_finish(graph, cluster)
    out["m-etf"] = finish / simulated(dev)
    pred_ptr, pred_src, pred_edge = graph.predecessors_csr
    latency, inv_bw = estimate_links(cluster, route=None)
    lengths = path_lengths(
        np.ascontiguousarray(lc.placement[None]), estimate.op_time, pred_ptr, pred_src, pred_edge,
        estimate.nbytes, latency, inv_bw,
    )[0]  # fmt: skip
    out["critical-path"] = lengths[0] / simulated(lc.placement)
    out["list"] = lengths[1] / simulated(lc.placement)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", type=int, default=4, help="random graphs per combination")
    parser.add_argument(
        "--combos", choices=("all", "single"), default="all",
        help="every combination, or the defaults and each option changed alone",
    )  # fmt: skip
    args = parser.parse_args()
    names = list(OPTIONS)
    if args.combos == "all":
        combos = [dict(zip(names, v, strict=True)) for v in itertools.product(*OPTIONS.values())]
    else:
        default = {k: v[0] for k, v in OPTIONS.items()}
        combos = [default] + [{**default, k: v[1]} for k, v in OPTIONS.items()]
    graphs = option_graphs(args.graphs)
    sim = Simulator()
    rows = []  # (options, column -> median over graphs)
    for options in combos:
        cluster = option_cluster(options)
        per_graph = [measure(g, cluster, sim) for g in graphs]
        rows.append((options, {c: float(np.median([m[c] for m in per_graph])) for c in COLUMNS}))
    print(f"{len(combos)} combinations x {len(graphs)} graphs; median per option value")
    print(f"{'option':26s}" + "".join(f"{c:>14s}" for c in COLUMNS))
    for name, values in OPTIONS.items():
        for value in values:
            chosen = [r for o, r in rows if o[name] == value]
            if chosen:
                cells = [np.median([r[c] for r in chosen]) for c in COLUMNS]
                print(f"{name + ': ' + value:26s}" + "".join(f"{x:14.3f}" for x in cells))
    print("worst combination per column (tau: lowest; ratios: farthest from 1)")
    for c in COLUMNS:
        if c == "tau":
            options, worst = min(rows, key=lambda r: r[1][c])
        elif c == "est |err|":
            options, worst = max(rows, key=lambda r: r[1][c])
        else:
            options, worst = max(rows, key=lambda r: abs(np.log(r[1][c])))
        changed = {k: v for k, v in options.items() if v != OPTIONS[k][0]} or "defaults"
        print(f"  {c:14s} {worst[c]:.3f}  {changed}")
    print(f"tau >= 0.9 in {sum(r['tau'] >= 0.9 for _, r in rows)}/{len(rows)} combinations")
    below = [(o, r) for o, r in rows if r["tau"] < 0.9]
    for name, values in OPTIONS.items():  # what the combinations below 0.9 share
        for value in values:
            share = sum(o[name] == value for o, _ in below)
            if below and share == len(below):
                print(f"  every one below 0.9 has {name}: {value}")
    for options, r in below:
        changed = {k: v for k, v in options.items() if v != OPTIONS[k][0]}
        print(f"  tau {r['tau']:.3f}  {changed}")


if __name__ == "__main__":
    main()
