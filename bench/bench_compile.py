"""Fusion against measurement: torch.compile's measured speed-up over eager vs the simulator's.

For each model of ``bench_profile.MODELS`` whose measurements are in ``--data`` (run
``bench/bench_profile.py`` first), on this CPU with ``--threads`` torch threads:

- measured: the eager step (as ``bench_profile`` times it: forward under ``no_grad``, or forward
  + backward of the loss; attention on the math backend), the same model under
  ``torch.compile`` (Inductor, C++ backend), and under ``torch.compile`` with Inductor told not
  to fuse (``max_fusion_size = 1``: every scheduler node its own kernel; lowering still inlines
  pointwise producers into their consumers, a fusion no setting turns off). Medians of
  ``--iterations`` timed steps after warm-up (the first call compiles);
- predicted: the simulator's step on the machine calibrated without the model's family
  (``graphopt.sim.calibrate``, leave one family out, as ``bench_profile``), all ops on one device,
  with no fusion and with the bits of the ``xla``, ``greedy`` and ``inductor`` fusers (Inductor's
  own kernels, :func:`graphopt.baselines.inductor.inductor_bits`, rules-breaking kernels split).

Printed per graph: measured ``eager / compiled`` and ``eager / no-fusion compiled`` speed-ups,
predicted ``none / inductor``, ``none / xla``, ``none / greedy`` speed-ups, and the difference
``predicted - measured`` of the Inductor speed-up in points (x 100).

On a GPU (``--device cuda``, data from ``bench_profile.py --device cuda``) the model runs there
and ``torch.compile`` generates Triton kernels; every step is synchronised before its clock stops.

Run: ``python bench/bench_compile.py [--models NAME,...] [--modes forward,train] [--threads 1]
[--iterations 20] [--data DIR] [--device cpu|cuda]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_profile import MODELS, on, without_measured  # noqa: E402

from graphopt.baselines.fusion import greedy_fusion, xla_fusion  # noqa: E402
from graphopt.baselines.inductor import drop_illegal, inductor_bits  # noqa: E402
from graphopt.graph import CompGraph  # noqa: E402
from graphopt.hardware import Cluster  # noqa: E402
from graphopt.importers import torch as torch_importer  # noqa: E402
from graphopt.importers import zoo  # noqa: E402
from graphopt.measure.machine import cpu_kind, cuda_kind, torch_threads  # noqa: E402
from graphopt.sim import simulate  # noqa: E402
from graphopt.sim.calibrate import calibrate, source_of  # noqa: E402
from graphopt.typing import Decision  # noqa: E402


def step_fn(model: Any, work: zoo.Workload, training: bool) -> Callable[[], None]:
    """One eager-style step of ``model`` (possibly compiled) on ``work``'s inputs."""
    inputs = tuple(
        torch.randn_like(x) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
        for x in work.inputs
    )
    if not training:

        def forward() -> None:
            with torch.no_grad():
                model(*inputs, **work.kwargs)

        return forward
    step = torch_importer._TrainStep(model, work.loss_fn, n_inputs=len(inputs))  # as imported
    extra = torch_importer._as_tuple(work.loss_inputs)

    def train() -> None:
        step(*inputs, *extra, **work.kwargs).backward()

    return train


def timed(step: Callable[[], None], iterations: int, warmup: int) -> float:
    sync = torch.cuda.synchronize if torch.cuda.is_initialized() else (lambda: None)
    for _ in range(warmup):
        step()
    times = []
    for _ in range(iterations):
        sync()
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measured(
    spec: str, training: bool, iterations: int, warmup: int, device: str = "cpu"
) -> dict[str, float]:
    """Eager, compiled and compiled-without-fusion step times of one zoo model on ``device``."""
    import dataclasses

    import torch._dynamo
    import torch._inductor.config as inductor_config
    from torch.utils._pytree import tree_map

    work, _, _ = zoo.zoo_workload(spec, training=training, device="cpu")
    if device != "cpu":

        def to(x: Any) -> Any:
            return x.to(device) if isinstance(x, torch.Tensor) else x

        work = dataclasses.replace(
            work,
            model=work.model.to(device),
            inputs=tree_map(to, work.inputs),
            kwargs=tree_map(to, dict(work.kwargs)),
            loss_inputs=tree_map(to, work.loss_inputs),
        )
    model = work.model
    model.train(training)
    out: dict[str, float] = {}
    with torch_importer.math_attention():
        out["eager"] = timed(step_fn(model, work, training), iterations, warmup)
        torch._dynamo.reset()
        start = time.perf_counter()
        compiled = torch.compile(model)
        step = step_fn(compiled, work, training)
        step()
        out["compile_s"] = time.perf_counter() - start
        out["compiled"] = timed(step, iterations, warmup)
        torch._dynamo.reset()
        with inductor_config.patch(max_fusion_size=1):
            unfused = torch.compile(model)
            out["unfused"] = timed(step_fn(unfused, work, training), iterations, warmup)
        torch._dynamo.reset()
    return out


def predicted(graph: CompGraph, cluster: Cluster) -> dict[str, float]:
    """The simulator's step with no fusion and with each fuser's bits, all ops on device 0."""
    bare = without_measured(graph)
    zero = Decision().filled(bare.num_ops)
    bits = {
        "none": None,
        "xla": xla_fusion(bare, cluster, zero),
        "greedy": greedy_fusion(bare, cluster, zero),
        "inductor": drop_illegal(bare, inductor_bits(bare, zero)[0])[0],
    }
    out = {}
    for name, fusion in bits.items():
        decision = Decision(fusion=fusion) if fusion is not None else Decision()
        m = simulate(bare, cluster, decision)
        out[name] = m.step_time if m.valid else float("nan")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--modes", default="forward")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--data", type=Path, default=None)
    p.add_argument("--device", default="cpu", help="cpu, or cuda (a GPU: Triton kernels)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    kind = cuda_kind() if args.device.startswith("cuda") else cpu_kind(args.threads)
    data = args.data or Path(__file__).parent / "data" / f"profile-{kind}"
    cluster = Cluster.load(data / "cluster.yaml")
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    graphs = {
        (n, m): CompGraph.load(data / f"{n}-{m}.json.gz")
        for n in MODELS
        for m in ("forward", "train")
        if (data / f"{n}-{m}.json.gz").exists()
    }
    print(
        f"{'graph':<22}{'eager ms':>9}{'comp ms':>9}{'compile s':>10}{'meas':>7}{'no-fuse':>8}"
        f"{'pred ind':>9}{'xla':>6}{'greedy':>7}{'points':>8}"
    )
    points = []
    for name in names:
        for mode in modes:
            graph = graphs[(name, mode)]
            others = [g for g in graphs.values() if source_of(g) != source_of(graph)]
            held_out = on(cluster, calibrate(others, cluster.devices[0]).device)
            with torch_threads(args.threads):
                m = measured(
                    MODELS[name], mode == "train", args.iterations, args.warmup, args.device
                )
            s = predicted(graph, held_out)
            speed = m["eager"] / m["compiled"]
            pred = s["none"] / s["inductor"]
            points.append(100 * (pred - speed))
            print(
                f"{name + '-' + mode:<22}{m['eager'] * 1e3:>9.2f}{m['compiled'] * 1e3:>9.2f}"
                f"{m['compile_s']:>10.1f}{speed:>7.2f}{m['eager'] / m['unfused']:>8.2f}"
                f"{pred:>9.2f}{s['none'] / s['xla']:>6.2f}{s['none'] / s['greedy']:>7.2f}"
                f"{points[-1]:>+8.0f}",
                flush=True,
            )
    print(
        f"\n|predicted - measured| Inductor speed-up, points: median "
        f"{statistics.median(abs(x) for x in points):.0f}, worst {max(abs(x) for x in points):.0f}"
    )


if __name__ == "__main__":
    main()
