"""Inductor's compiled kernels against the simulator's fused-kernel rule and a learned kernel model.

Measures (or, with ``--reuse``, reads back) the compiled forward graph of every model of
``bench_profile.MODELS`` on this CPU, one thread (:func:`graphopt.measure.kernels.
profile_kernels`: each kernel's median time and the graphopt ops it computes), into ``--data``
(default ``bench/data/kernels-<kind>/<model>-forward.json``). The graphs themselves, with their
ops' measured eager times, come from ``bench_profile``'s data (``--profile``, default
``bench/data/profile-<kind>``).

Then, leaving one family out (the calibration and the kernel model fitted on the other
families), per family:

- per kernel, ``|predicted - measured| / measured`` of: ``rule 4``, the simulator's price of a
  fused kernel from its members' **measured eager** op times (``max(sum - (m - 1) * launch,
  max)``: what the simulator would say with perfect op times); ``roofline``, the calibrated
  roofline of the kernel's summed FLOPs and boundary bytes; ``learned``, the kernel model
  (:mod:`graphopt.costmodel.kernel_fit`);
- the compiled step: the sum of the kernels' times, measured and predicted by each;
- the speed-up of compilation: measured (the eager forward step over the compiled graph's step,
  taking turns in one process) against predicted (the simulator's unfused step on the calibrated
  machine, as ``bench_compile`` predicts, over each predicted compiled step), in points
  (x 100), and how many graphs are within 10 points.

Run: ``python bench/bench_kernels.py [--models NAME,...] [--iterations 20] [--reuse]
[--data DIR] [--profile DIR]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_profile import MODELS, on, without_measured  # noqa: E402

from graphopt.costmodel.kernel_fit import fit_kernel_model, member_times, op_indices  # noqa: E402
from graphopt.graph import CompGraph  # noqa: E402
from graphopt.hardware import Cluster, Device  # noqa: E402
from graphopt.measure.kernels import KernelProfile, profile_kernels  # noqa: E402
from graphopt.measure.machine import cpu_kind  # noqa: E402
from graphopt.sim import simulate  # noqa: E402
from graphopt.sim.calibrate import calibrate, source_of  # noqa: E402


def rule4(graph: CompGraph, groups: list[list[int]], device: Device) -> np.ndarray:
    """The simulator's fused-kernel price from the members' measured times (rule 4)."""
    times = graph.measured[device.kind]
    out = []
    for members in groups:
        t = times[members]
        out.append(
            max(float(t.sum()) - (len(members) - 1) * device.launch_overhead, float(t.max()))
        )
    return np.asarray(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reuse", action="store_true", help="read the kernel profiles in --data back")
    p.add_argument("--data", type=Path, default=None)
    p.add_argument("--profile", type=Path, default=None)
    args = p.parse_args()
    torch.set_num_threads(1)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {unknown}; choose from {', '.join(MODELS)}")
    kind = cpu_kind(1)
    here = Path(__file__).parent / "data"
    data = args.data or here / f"kernels-{kind}"
    prof_dir = args.profile or here / f"profile-{kind}"
    data.mkdir(parents=True, exist_ok=True)
    profiles: dict[str, KernelProfile] = {}
    for name in names:
        path = data / f"{name}-forward.json"
        if not args.reuse:
            start = time.perf_counter()
            profile_kernels(MODELS[name], iterations=args.iterations, warmup=args.warmup).save(path)
            print(f"  measured {name}: {path} ({time.perf_counter() - start:.1f} s)", flush=True)
        profiles[name] = KernelProfile.load(path)

    cluster = Cluster.load(prof_dir / "cluster.yaml")
    device = cluster.devices[0]
    graphs = {n: CompGraph.load(prof_dir / f"{n}-forward.json.gz") for n in names}
    every = [CompGraph.load(p) for p in sorted(prof_dir.glob("*.json.gz"))]
    header = (
        f"{'graph':<13}{'kernels':>8}{'fused':>6} |kernel err|:{'rule 4':>7}{'learned':>8}"
        f"{'calib.':>7}  compiled ms:{'meas':>7}{'rule 4':>7}{'learned':>8}{'calib.':>7}"
        f"  speed-up:{'meas':>5}{'rule 4':>7}{'learned':>8}{'calib.':>7}  points:{'learned':>8}"
        f"{'calib.':>7}"
    )
    print(header)
    errs: dict[str, list[float]] = {"rule 4": [], "learned": [], "calibrated": []}
    points: dict[str, list[float]] = {"rule 4": [], "learned": [], "calibrated": []}
    for name in names:
        graph, profile = graphs[name], profiles[name]
        family = source_of(graph)
        held_out = calibrate([g for g in every if source_of(g) != family], device).device
        samples = [(graphs[o], profiles[o]) for o in names if source_of(graphs[o]) != family]
        model = fit_kernel_model(samples, held_out)
        groups = op_indices(graph, profile)
        measured = np.asarray(profile.seconds)
        bare = without_measured(graph)
        eager_ops = member_times(graph, device)  # measured eager op times
        calibrated_ops = member_times(bare, held_out)  # the calibrated roofline, held out
        predicted = {
            "rule 4": rule4(graph, groups, device),
            "learned": model.predict(graph, groups, profile.extern, held_out, eager_ops),
            "calibrated": model.predict(bare, groups, profile.extern, held_out, calibrated_ops),
        }
        # The unfused step each is compared with: the measured op times' sum (perfect op times),
        # or the simulator's step on the calibrated machine (FLOPs and bytes only).
        measured_ops = simulate(graph, cluster).step_time
        unfused = {
            "rule 4": measured_ops,
            "learned": measured_ops,
            "calibrated": simulate(bare, on(cluster, held_out)).step_time,
        }
        meas_speedup = profile.eager_seconds / profile.step_seconds
        speed = {k: unfused[k] / predicted[k].sum() for k in predicted}
        med = {k: float(np.median(np.abs(v - measured) / measured)) for k, v in predicted.items()}
        for k in predicted:
            errs[k].append(med[k])
            points[k].append(100 * (speed[k] - meas_speedup))
        print(
            f"{name:<13}{len(groups):>8}{sum(len(g) > 1 for g in groups):>6} {'':>12}"
            f"{med['rule 4']:>7.0%}{med['learned']:>8.0%}{med['calibrated']:>7.0%}  {'':>12}"
            f"{profile.step_seconds * 1e3:>7.2f}{predicted['rule 4'].sum() * 1e3:>7.2f}"
            f"{predicted['learned'].sum() * 1e3:>8.2f}{predicted['calibrated'].sum() * 1e3:>7.2f}"
            f"  {'':>9}{meas_speedup:>5.2f}{speed['rule 4']:>7.2f}{speed['learned']:>8.2f}"
            f"{speed['calibrated']:>7.2f}  {'':>7}{points['learned'][-1]:>+8.0f}"
            f"{points['calibrated'][-1]:>+7.0f}",
            flush=True,
        )
    print(
        "\nleave one family out; rule 4 and learned price from the measured eager op times, "
        "calibrated from the held-out calibrated roofline:"
    )
    for k, v in errs.items():
        print(
            f"  |kernel error|, median of the graphs' medians, {k:<10}: {statistics.median(v):.1%}"
        )
    for k, v in points.items():
        within = sum(abs(x) <= 10 for x in v)
        print(
            f"  speed-up, {k:<10}: |points| median {statistics.median(abs(x) for x in v):.0f}, "
            f"worst {max(abs(x) for x in v):.0f}; within 10 points on {within} of {len(v)} graphs"
        )


if __name__ == "__main__":
    main()
