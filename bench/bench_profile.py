"""The simulator against real execution on this CPU: predicted vs measured step times.

Measures (or, with ``--reuse``, reads back) every zoo model of :data:`MODELS`, forward and
training graph, on this machine, and keeps the measurements as data files in ``--data`` (default
``bench/data/profile-<kind>``, ``kind`` naming the CPU and the thread count):

- ``cluster.yaml``: the probed machine (:func:`graphopt.measure.machine.probe_cpu`: best
  float32 matmul, best copy bandwidth, median eager dispatch), its CPU model in the description;
- ``<model>-<forward|train>.json.gz``: the imported graph with every op's median time under the
  machine's kind and, in ``metadata["profile"]``, the measured eager step (``eager_seconds``),
  the FX graph run as one call (``graph_seconds``) and the settings
  (:func:`graphopt.measure.profile.profile_graph`, ``--timer clock`` by default);
- ``cluster-calibrated.yaml``: the machine calibrated on all of them (:mod:`graphopt.sim.calibrate`).

Printed per graph, all on one device, topological order, no fusion, the errors
``(predicted - measured) / measured`` against the eager step (the reference) of:

- ``roofline``: the simulator from FLOPs and bytes alone on the probed machine (the graph's
  measured times dropped; no efficiency);
- ``calibrated``: the same on the machine calibrated **without the graph's model family** (fitted
  on the other families' measured op times: leave one family out, so that the graph predicted
  was never seen by the fit);
- ``learned``: the simulator with ``op_times: learned``, the per-op model
  (:mod:`graphopt.op_model`) trained **without the graph's model family**
  (:func:`graphopt.costmodel.op_fit.fit_op_model` on the other families' measured ops; leave one
  family out, as for ``calibrated``);
- ``measured``: the simulator from the graph's own measured op times (their sum).

Then the per-op error: the median over every measured op of the held-out graphs of
``|predicted - measured| / measured``, for the calibrated roofline and the learned model (both
left one family out; ``learned``: the model where it prices an op, the calibrated roofline
elsewhere, as the simulator prices them; ``learned only``: the ops the model prices).

``vs graph`` repeats the calibrated error against the FX graph run (the ops the simulator holds;
eager PyTorch may run fused kernels instead, e.g. ``aten::lstm``). Then the median and worst
absolute error of each, and the fitted efficiency table.

The machine is shared and noisy: every time is a median over ``--iterations`` runs, the peak
figures are best-of-repeats; the same step can vary by 10-30% between sessions.

On a GPU, ``--device cuda`` profiles there (CUDA events, :mod:`graphopt.measure.profile`) and
probes the GPU (:func:`graphopt.measure.machine.probe_cuda`); the data go to
``bench/data/profile-cuda-<GPU>``.

Run: ``python bench/bench_profile.py [--models NAME,...] [--threads 1] [--iterations 20]
[--warmup 3] [--timer clock|profiler] [--data DIR] [--reuse] [--device cpu|cuda] [--rounds N]
[--add-shapes]``; ``--add-shapes`` gives graphs measured before graphs held shapes the shapes of
today's import of the same model (:func:`with_shapes`) and reports as ``--reuse`` does.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from graphopt.costmodel.op_fit import fit_op_model, op_errors
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, Device
from graphopt.measure.machine import cpu_kind, cuda_kind, machine_cluster, probe_cpu, probe_cuda
from graphopt.measure.profile import profile_graph
from graphopt.op_model import OpModel
from graphopt.sim import simulate
from graphopt.sim.calibrate import calibrate, source_of

MODELS = {
    "resnet": "torch:resnet?depth=18&width=32&image=64&batch=4",
    "inception": "torch:inception?blocks=1&width=16&image=75&batch=2&classes=100",
    "wavenet": "torch:wavenet?layers=8&stacks=1&residual=32&skip=64&classes=256&seq=1024&batch=2",
    "lstm": "torch:lstm?layers=2&hidden=256&vocab=8000&seq=16&batch=16",
    "transformer": (
        "torch:transformer?layers=2&d_model=256&heads=4&ff=1024&vocab=8000&seq=64&batch=4"
    ),
    "gpt2": "torch:gpt2?n_layer=2&n_head=4&n_embd=256&vocab_size=8000&seq=64&batch=2",
    "bert": (
        "torch:bert?num_hidden_layers=2&hidden_size=256&num_attention_heads=4"
        "&intermediate_size=1024&vocab_size=8000&seq=64&batch=2"
    ),
    "t5": "torch:t5?num_layers=2&d_model=256&num_heads=4&d_ff=1024&vocab_size=8000&seq=64&batch=2",
    "mobilenet": "torch:mobilenet?width=16&blocks=17&image=64&batch=4&classes=100",
    "vit": "torch:vit?layers=2&d_model=256&heads=4&mlp=1024&patch=8&image=64&batch=4&classes=100",
    "gru": "torch:gru?layers=2&hidden=256&vocab=8000&seq=16&batch=16",
    "unet": "torch:unet?depth=3&width=16&image=64&batch=2&classes=10",
}
"""Modest sizes: each graph profiles in seconds on one CPU thread. gpt2, bert and t5 need the
``transformers`` extra (``pip install -e '.[transformers]'``)."""

SIZES = {
    "resnet-small": "torch:resnet?depth=18&width=16&image=32&batch=8&classes=10",
    "resnet-wide": "torch:resnet?depth=18&width=64&image=64&batch=2",
    "inception-small": "torch:inception?blocks=1&width=8&image=75&batch=4&classes=10",
    "inception-wide": "torch:inception?blocks=1&width=32&image=75&batch=1&classes=100",
    "wavenet-small": (
        "torch:wavenet?layers=6&stacks=1&residual=16&skip=32&classes=64&seq=512&batch=4"
    ),
    "wavenet-wide": (
        "torch:wavenet?layers=4&stacks=1&residual=64&skip=128&classes=256&seq=1024&batch=1"
    ),
    "lstm-small": "torch:lstm?layers=1&hidden=128&vocab=4000&seq=8&batch=8",
    "lstm-wide": "torch:lstm?layers=1&hidden=512&vocab=8000&seq=8&batch=32",
    "transformer-small": (
        "torch:transformer?layers=1&d_model=128&heads=2&ff=512&vocab=4000&seq=32&batch=4"
    ),
    "transformer-wide": (
        "torch:transformer?layers=1&d_model=512&heads=8&ff=2048&vocab=8000&seq=32&batch=2"
    ),
    "gpt2-small": "torch:gpt2?n_layer=1&n_head=2&n_embd=128&vocab_size=4000&seq=32&batch=4",
    "gpt2-wide": "torch:gpt2?n_layer=1&n_head=8&n_embd=512&vocab_size=8000&seq=64&batch=1",
    "bert-small": (
        "torch:bert?num_hidden_layers=1&hidden_size=128&num_attention_heads=2"
        "&intermediate_size=512&vocab_size=4000&seq=32&batch=4"
    ),
    "bert-wide": (
        "torch:bert?num_hidden_layers=1&hidden_size=512&num_attention_heads=8"
        "&intermediate_size=2048&vocab_size=8000&seq=64&batch=1"
    ),
    "t5-small": (
        "torch:t5?num_layers=1&d_model=128&num_heads=2&d_ff=512&vocab_size=4000&seq=32&batch=4"
    ),
    "t5-wide": (
        "torch:t5?num_layers=1&d_model=512&num_heads=8&d_ff=2048&vocab_size=8000&seq=64&batch=1"
    ),
    "resnet-batch": "torch:resnet?depth=18&width=32&image=64&batch=16&classes=100",
    "inception-batch": "torch:inception?blocks=1&width=16&image=75&batch=8&classes=100",
    "wavenet-batch": (
        "torch:wavenet?layers=8&stacks=1&residual=32&skip=64&classes=256&seq=256&batch=8"
    ),
    "lstm-batch": "torch:lstm?layers=2&hidden=256&vocab=8000&seq=8&batch=64",
    "transformer-batch": (
        "torch:transformer?layers=1&d_model=256&heads=4&ff=1024&vocab=8000&seq=32&batch=16"
    ),
    "gpt2-batch": "torch:gpt2?n_layer=1&n_head=4&n_embd=256&vocab_size=8000&seq=32&batch=16",
    "bert-batch": (
        "torch:bert?num_hidden_layers=1&hidden_size=256&num_attention_heads=4"
        "&intermediate_size=1024&vocab_size=8000&seq=32&batch=16"
    ),
    "t5-batch": (
        "torch:t5?num_layers=1&d_model=256&num_heads=4&d_ff=1024&vocab_size=8000&seq=32&batch=16"
    ),
    "mobilenet-small": "torch:mobilenet?width=8&blocks=7&image=32&batch=16&classes=10",
    "mobilenet-wide": "torch:mobilenet?width=32&blocks=17&image=64&batch=2",
    "vit-small": (
        "torch:vit?layers=1&d_model=128&heads=2&mlp=512&patch=4&image=32&batch=4&classes=10"
    ),
    "vit-wide": (
        "torch:vit?layers=1&d_model=512&heads=8&mlp=2048&patch=8&image=64&batch=1&classes=100"
    ),
    "gru-small": "torch:gru?layers=1&hidden=128&vocab=4000&seq=8&batch=8",
    "gru-wide": "torch:gru?layers=1&hidden=512&vocab=8000&seq=8&batch=32",
    "unet-small": "torch:unet?depth=2&width=8&image=32&batch=4&classes=4",
    "unet-wide": "torch:unet?depth=3&width=32&image=64&batch=1&classes=10",
}
"""Other sizes of the same families (``--sizes`` measures them): more measured ops to train on,
a smaller and a wider variant of each (and a larger-batch one of the first eight). They share
their family with :data:`MODELS` (``source_of``), so leaving a family out leaves its sizes out
too."""

MODES = ("forward", "train")


def without_measured(graph: CompGraph) -> CompGraph:
    """The graph with its measured times dropped (the simulator falls back to the roofline)."""
    data = graph.to_json_dict()
    data["measured"] = {}
    return CompGraph.from_json_dict(data)


def with_shapes(graph: CompGraph, spec: str, training: bool) -> CompGraph:
    """A graph measured before graphs held shapes (file version 2), with the shapes and dtypes of
    the same model imported now: the import is deterministic, so its ops must be the measured
    graph's own (names, types, FLOPs, bytes), else ``ValueError``. The measured times are kept."""
    from graphopt.importers.zoo import build_zoo

    fresh = build_zoo(spec, training=training)
    same = (
        fresh.op_names == graph.op_names
        and fresh.op_types == graph.op_types
        and np.array_equal(fresh.flops, graph.flops)
        and np.array_equal(fresh.output_bytes, graph.output_bytes)
    )
    if not same:
        raise ValueError(f"{graph.name}: today's import of {spec} differs from the measured graph")
    data = graph.to_json_dict()
    for key in ("shapes", "dtypes", "input_shapes"):
        data["ops"][key] = fresh.to_json_dict()["ops"][key]
    return CompGraph.from_json_dict(data)


def rel(predicted: float, reference: float) -> float:
    if not (math.isfinite(predicted) and math.isfinite(reference)) or reference <= 0:
        return math.nan
    return (predicted - reference) / reference


def median_abs(errors: np.ndarray) -> float:
    """The median of ``|errors|`` over the finite ones (NaN when none is)."""
    finite = np.abs(errors[np.isfinite(errors)])
    return float(np.median(finite)) if len(finite) else math.nan


def on(cluster: Cluster, device, **options: str) -> Cluster:  # noqa: ANN001
    """``cluster`` with its one device replaced (and ``options``: ``op_times``, ``op_model``)."""
    return Cluster(
        cluster.name, (device,), cluster.bandwidth, cluster.latency, cluster.description, **options
    )


def roofline_op_errors(graph: CompGraph, device: Device) -> np.ndarray:
    """Every measured op's relative error under ``device``'s (calibrated) roofline."""
    times = graph.measured[device.kind]
    compute, memory = device.op_efficiency(graph.op_types, graph.op_classes)
    predicted = device.roofline_time(graph.flops, graph.bytes_accessed, compute, memory)
    return (predicted - times) / times


def measure(
    args: argparse.Namespace, data: Path, names: list[str], table: dict[str, str] = MODELS
) -> None:
    """Probe the machine and profile every model of ``table`` named and each mode into ``data``."""
    data.mkdir(parents=True, exist_ok=True)
    device = probe_cuda() if args.device.startswith("cuda") else probe_cpu(args.threads)
    machine_cluster(device).save(data / "cluster.yaml")
    print(
        f"this machine: {device.kind}: peak {device.peak_flops / 1e9:.1f} GFLOP/s, "
        f"{device.mem_bandwidth / 1e9:.1f} GB/s, {device.launch_overhead * 1e6:.2f} us per op",
        flush=True,
    )
    for name in names:
        for mode in MODES:
            start = time.perf_counter()
            graph, report = profile_graph(
                table[name],
                training=mode == "train",
                iterations=args.iterations,
                warmup=args.warmup,
                threads=args.threads,
                timer=args.timer,
                device=args.device,
            )
            graph.save(data / f"{name}-{mode}.json.gz")
            print(
                f"  measured {name} {mode}: {graph.num_ops} ops, eager "
                f"{report.eager_seconds * 1e3:.2f} ms ({time.perf_counter() - start:.1f} s)",
                flush=True,
            )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--models",
        default=",".join(MODELS),
        help="comma-separated names of MODELS (of SIZES with --sizes; default all)",
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--timer", default="clock", choices=("profiler", "clock"))
    p.add_argument("--data", type=Path, default=None, help="measurement directory")
    p.add_argument("--reuse", action="store_true", help="read the measurements in --data back")
    p.add_argument("--device", default="cpu", help="cpu, or cuda (CUDA events; --timer clock)")
    p.add_argument(
        "--sizes",
        action="store_true",
        help="measure the models of SIZES into --data (default bench/data/profile-<kind>-sizes)",
    )
    p.add_argument(
        "--extra",
        type=Path,
        action="append",
        default=[],
        help="a directory of more measured graphs (e.g. --sizes'): training data for the held-out "
        "fits, never predicted",
    )
    p.add_argument(
        "--add-shapes",
        action="store_true",
        help="give the measured graphs in --data (file version 2) today's import's shapes",
    )
    p.add_argument(
        "--rounds", type=int, default=None, help="boosting rounds of the op model (default 300)"
    )
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    table = SIZES if args.sizes else MODELS
    given = args.models if args.models != ",".join(MODELS) or not args.sizes else ",".join(SIZES)
    names = [n.strip() for n in given.split(",") if n.strip()]
    unknown = [n for n in names if n not in table]
    if unknown:
        p.error(f"unknown model(s) {unknown}; choose from {', '.join(table)}")
    kind = cuda_kind() if args.device.startswith("cuda") else cpu_kind(args.threads)
    data = args.data or Path(__file__).parent / "data" / f"profile-{kind}"
    if args.sizes:
        sized = args.data or Path(__file__).parent / "data" / f"profile-{kind}-sizes"
        measure(args, sized, names, SIZES)
        return

    began = time.perf_counter()
    if args.add_shapes:
        for name in names:
            for mode in MODES:
                path = data / f"{name}-{mode}.json.gz"
                with_shapes(CompGraph.load(path), MODELS[name], mode == "train").save(path)
                print(f"  shapes added to {path}", flush=True)
    elif not args.reuse:
        measure(args, data, names)
    cluster = Cluster.load(data / "cluster.yaml")
    device = cluster.devices[0]
    graphs = {f"{n}-{m}": CompGraph.load(data / f"{n}-{m}.json.gz") for n in names for m in MODES}
    fitted = calibrate(list(graphs.values()), device)
    on(cluster, fitted.device).save(data / "cluster-calibrated.yaml")

    settings = next(iter(graphs.values())).metadata["profile"]
    print(
        f"\n{device.kind} ({cluster.description or 'this machine'}): peak "
        f"{device.peak_flops / 1e9:.1f} GFLOP/s, {device.mem_bandwidth / 1e9:.1f} GB/s, "
        f"{device.launch_overhead * 1e6:.2f} us per op; {settings['timer']} timer, medians of "
        f"{settings['iterations']} runs, {settings['threads']} thread(s); data in {data}"
    )
    header = (
        f"{'graph':<22}{'ops':>6}{'eager ms':>10}{'graph ms':>10}{'roofline':>10}{'calibr.':>9}"
        f"{'vs graph':>9}{'learned':>9}{'measured':>10}"
    )
    # Leave one family out: per family, the calibration and the op model fitted on the others.
    families = sorted({source_of(g) for g in graphs.values()})
    extra = [
        CompGraph.load(path) for folder in args.extra for path in sorted(folder.glob("*.json.gz"))
    ]
    if extra:
        print(f"training data: {len(graphs)} graphs and {len(extra)} more from {args.extra}")
    scratch = Path(tempfile.mkdtemp(prefix="graphopt-op-models-"))
    held: dict[str, tuple[Device, Path]] = {}
    fit_start = time.perf_counter()
    for family in families:
        others = [g for g in (*graphs.values(), *extra) if source_of(g) != family]
        rounds = {"rounds": args.rounds} if args.rounds else {}
        # The model learns on the calibrated device: its overhead is the base of the model's
        # target, and its roofline prices the op types the model has not seen.
        fitted_device = calibrate(others, device).device
        model = fit_op_model(others, [fitted_device], **rounds)
        held[family] = (fitted_device, model.save(scratch / f"{family}.json"))
    print(f"fitted {len(families)} held-out op models in {time.perf_counter() - fit_start:.1f} s")
    print(header)
    errors: dict[str, list[float]] = {
        "roofline": [],
        "calibrated": [],
        "learned": [],
        "measured": [],
    }
    op_seconds: list[np.ndarray] = []
    op_errs: dict[str, list[np.ndarray]] = {"calibrated": [], "learned": [], "learned only": []}
    for key, graph in graphs.items():
        profile = graph.metadata["profile"]
        eager, graph_run = profile["eager_seconds"], profile["graph_seconds"]
        held_out, model_path = held[source_of(graph)]
        bare = without_measured(graph)
        learned = on(cluster, held_out, op_times="learned", op_model=str(model_path))
        row = {
            "roofline": simulate(bare, cluster).step_time,
            "calibrated": simulate(bare, on(cluster, held_out)).step_time,
            "learned": simulate(bare, learned).step_time,
            "measured": simulate(graph, cluster).step_time,
        }
        learned_only = op_errors(OpModel.load(model_path), graph, held_out)
        fallback = roofline_op_errors(graph, held_out)
        op_errs["learned only"].append(learned_only)  # the ops the model prices
        op_errs["learned"].append(np.where(np.isnan(learned_only), fallback, learned_only))
        op_errs["calibrated"].append(fallback)
        op_seconds.append(graph.measured[device.kind])
        for name, value in row.items():
            errors[name].append(rel(value, eager))
        print(
            f"{key:<22}{graph.num_ops:>6}{eager * 1e3:>10.2f}{graph_run * 1e3:>10.2f}"
            f"{rel(row['roofline'], eager):>+10.0%}{rel(row['calibrated'], eager):>+9.0%}"
            f"{rel(row['calibrated'], graph_run):>+9.0%}{rel(row['learned'], eager):>+9.0%}"
            f"{rel(row['measured'], eager):>+10.0%}",
            flush=True,
        )
    print("\n|error| against the eager step: median / worst")
    for name, values in errors.items():
        finite = [abs(v) for v in values if math.isfinite(v)]
        print(f"  {name:<11} {statistics.median(finite):6.1%} / {max(finite):6.1%}")
    print("\nper-op |error| (leave one family out): median over measured ops, [ops priced]")
    for name, parts in op_errs.items():
        every = np.abs(np.concatenate(parts))
        priced = every[np.isfinite(every)]
        if not len(priced):
            print(f"  {name:<11}    -    [0 of {len(every):,}: no op priced]")
            continue
        print(
            f"  {name:<11} {float(np.median(priced)):6.1%}  "
            f"[{len(priced):,} of {len(every):,}; 90th percentile {np.percentile(priced, 90):.0%}]"
        )
    seconds = np.concatenate(op_seconds)
    print("  by measured op time: ops, share of the measured time, median |error| of each")
    for low, high in ((0.0, 20e-6), (20e-6, 100e-6), (100e-6, math.inf)):
        inside = (seconds >= low) & (seconds < high)
        shares = " ".join(
            f"{name} {median_abs(np.concatenate(parts)[inside]):6.1%}"
            for name, parts in op_errs.items()
        )
        print(
            f"  {low * 1e6:>5.0f}-{high * 1e6:<5.0f} us: {int(inside.sum()):>5,} ops, "
            f"{np.nansum(seconds[inside]) / np.nansum(seconds):6.1%} of the time; {shares}"
        )

    print(
        f"\ncalibrated on all {len(graphs)} graphs ({fitted.ops} ops, {fitted.sources} families): "
        f"{fitted.device.launch_overhead * 1e6:.2f} us per op; summed op time "
        f"{fitted.measured_seconds * 1e3:.1f} ms measured, roofline "
        f"{fitted.before_seconds * 1e3:.1f} ms before, {fitted.after_seconds * 1e3:.1f} ms after"
    )
    print(
        f"{'key':<40}{'ops':>6}{'fam.':>5}{'compute':>9}{'memory':>8}{'meas ms':>9}{'before':>8}"
        f"{'after':>8}"
    )
    for r in fitted.rows[:25]:
        print(
            f"{r.level + ' ' + r.key:<40}{r.ops:>6}{r.sources:>5}{r.compute:>9.3g}{r.memory:>8.3g}"
            f"{r.measured_seconds * 1e3:>9.2f}{r.before_seconds * 1e3:>8.2f}"
            f"{r.after_seconds * 1e3:>8.2f}"
        )
    print(f"\ntotal {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
