"""Measured op times: run a model's imported graph on this machine and time every op.

:func:`profile_graph` imports a model as :func:`~graphopt.importers.torch.from_torch` does (same
capture, same conversion, same op names) and then runs **that very FX graph** for real on the
CPU: the exported core-ATen graph for forward graphs, the AOTAutograd joint forward + backward
graph for training graphs, with real tensors in place of the fake ones the import traced with.
The graph it returns is the imported graph (ops, FLOPs, bytes, edges identical to
:func:`~graphopt.importers.zoo.load_zoo`'s) with each op's median time stored in
``measured[kind]``, ``kind`` naming this CPU and the thread count
(:func:`graphopt.measure.machine.cpu_kind`); the simulator uses it on a device of that kind
(rule 3 of :mod:`graphopt.sim`).

Tensors: parameters and buffers are the model's own (a zoo model is built on the CPU with its
modules' random initialisation, seeded by ``seed``); floating-point inputs are random normal;
integer inputs (token ids, class targets) keep the example's values (the zoo's are zeros, always
valid indices); the tangent of the loss is 1. A tensor that has no real value (a model built on
the meta device, a constant lifted while tracing) is drawn uniform in [0, 1): positive, so that a
batch-norm variance or a log stays finite. Kernels: PyTorch's defaults on this machine (oneDNN
for convolutions and matrix products where PyTorch picks it), as a user's eager step runs, except
that scaled-dot-product attention runs on its math backend
(:func:`graphopt.importers.torch.math_attention`): the imported graph holds attention as its math
ops, so the graph and the eager model run the same ops. (The import itself traces with oneDNN
off; that changes no op of the graph.)

Timing: a first untimed run checks that every op runs; then ``warmup`` rounds, then
``iterations`` timed rounds, each round running the instrumented graph (below), the graph
un-instrumented and the eager model once, in turn, so that a shared machine's slow spells fall on
all three alike. Per op the **median** over the timed rounds:

* ``timer="profiler"`` (default): the graph runs node by node in a ``torch.fx.Interpreter``, each
  FX node inside ``torch.profiler.record_function("graphopt-op/<node name>")``, under
  ``torch.profiler.profile`` (CPU activity; one profiling session per timed round, so that the
  other runs are not profiled). An op is **matched** when its annotation holds at
  least one ATen event; its time is the summed CPU time of the ATen events directly under the
  annotation: the kernel plus ATen's dispatch, as the profiler measures it (the profiler's own
  cost for each nested event included; Python's cost of calling the op not).
* ``timer="clock"``: the same node-by-node run without the profiler; an op's time is
  ``time.perf_counter_ns`` around the call of its ATen op from Python (dispatch from Python
  included, as eager PyTorch pays it). Every op that ran is matched.

An op of the graph without a time is **unmatched**: its measured time is NaN (the simulator
falls back to the roofline for it) and it is listed in :attr:`ProfileReport.unmatched_ops`. The
FX nodes the importer folds away (views, ``getitem``: no op of the graph) run as well; their
summed time is :attr:`ProfileReport.folded_seconds`, part of a real step but of no op.

Whole-step times, each the median over the timed rounds of an un-instrumented run:
:attr:`~ProfileReport.graph_seconds`, the FX graph as one ``GraphModule`` call, and
:attr:`~ProfileReport.eager_seconds`, the ``nn.Module`` itself in eager mode (forward under
``torch.no_grad()``, or ``loss_fn(model(...)).backward()`` for training, the optimizer step not
included, as in the graph). :attr:`~ProfileReport.op_seconds` is the sum of the ops' median times.

On a CUDA GPU (``device="cuda"`` or ``"cuda:N"``): the graph is captured on the CPU as above,
then the placeholder values, the graph's constants, the device arguments of its ops (``full``,
``arange``...) and the eager model are moved to the GPU; only the ``clock`` timer runs there. An
op runs once for its result, then :data:`CUDA_REPEATS` more times back to back between two CUDA
events, and its time is the elapsed time divided by the calls, read after each round's
synchronisation: what the op costs in a pipelined eager step, where the CPU's launches overlap
the GPU's kernels (the larger of its launch and its kernels). One timed call around an op would
add the interpreter's launch of it to the kernels while the GPU waits (the sum of the ops' times
was 1.5 times the eager step on an H200). An op that may write to its inputs (an ATen overload
with a mutable schema, or a callable that is not one) is timed over one call. The whole-step
times synchronise before the clock stops. The kind defaults to
:func:`~graphopt.measure.machine.cuda_kind` (the GPU's name).

Failures raise ``ValueError`` with one clear message: a model torch.export cannot capture, an op
that fails to run (named, with torch's error), a model that fails to run eagerly, no op matched.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_leaves, tree_map

from graphopt.errors import InvalidArgument, check_integer
from graphopt.graph import CompGraph
from graphopt.importers import torch as torch_importer
from graphopt.measure.machine import cpu_kind, cuda_kind, torch_threads

PROFILER_VERSION = 2
"""Bumped whenever what :func:`profile_graph` measures changes (stored in the graph's metadata)."""

ANNOTATION = "graphopt-op/"
"""Prefix of the profiler annotation around each FX node."""

TIMERS = ("profiler", "clock")

CUDA_REPEATS = 8
"""Back-to-back calls an op's CUDA time is the mean of (see the module docstring)."""

MAX_ITERATIONS = 1_000
"""The most timed runs (and, apart, warm-up runs): every timed run keeps its profiler's events
until the medians are taken."""
MAX_THREADS = 1_024
"""The most torch threads."""
DEVICES = ("cpu", "cuda")
"""Devices :func:`profile_graph` runs on (``cuda:N`` names one GPU)."""


@dataclass(frozen=True)
class ProfileReport:
    """What :func:`profile_graph` measured, and what it could not match.

    Attributes:
        name: the graph's name.
        kind: the device kind the ops' times are stored under.
        device: where the graph ran (``"cpu"``).
        training: forward + backward (``True``) or forward graph.
        threads: torch threads.
        iterations: timed runs (per-op times are medians over them).
        warmup: untimed runs before.
        timer: ``"profiler"`` or ``"clock"`` (module docstring).
        op_names: every op of the graph, in its order.
        unmatched_ops: ops with no time (NaN in ``measured``).
        renamed_ops: matched ops whose first ATen event is not the op's own type (e.g. a
            composite op the dispatcher redirected); ``(op, event name)`` pairs.
        folded_nodes: FX nodes that ran but are no op of the graph (views, ``getitem``).
        folded_seconds: their summed median time.
        op_seconds: sum of the ops' median times.
        graph_seconds: median wall time of the FX graph run as one ``GraphModule`` call.
        eager_seconds: median wall time of the eager model step (NaN when the model could not
            run eagerly, e.g. a model on the meta device).
        instrumented_seconds: median wall time of one instrumented node-by-node run.
        capture_seconds: time to capture and convert the graph.
        seconds: total wall time of :func:`profile_graph`.
    """

    name: str
    kind: str
    device: str
    training: bool
    threads: int
    iterations: int
    warmup: int
    timer: str
    op_names: list[str]
    unmatched_ops: list[str] = field(default_factory=list)
    renamed_ops: list[tuple[str, str]] = field(default_factory=list)
    folded_nodes: int = 0
    folded_seconds: float = 0.0
    op_seconds: float = 0.0
    graph_seconds: float = math.nan
    eager_seconds: float = math.nan
    instrumented_seconds: float = math.nan
    capture_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def matched(self) -> int:
        """Ops with a measured time."""
        return len(self.op_names) - len(self.unmatched_ops)

    @property
    def match_rate(self) -> float:
        """Share of the graph's ops with a measured time (1.0 for an empty graph)."""
        return self.matched / len(self.op_names) if self.op_names else 1.0

    def summary(self) -> dict[str, Any]:
        """Counts and times for display (JSON-ready)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "device": self.device,
            "training": self.training,
            "threads": self.threads,
            "iterations": self.iterations,
            "warmup": self.warmup,
            "timer": self.timer,
            "ops": len(self.op_names),
            "matched": self.matched,
            "match_rate": round(self.match_rate, 4),
            "unmatched_ops": list(self.unmatched_ops),
            "renamed_ops": len(self.renamed_ops),
            "folded_nodes": self.folded_nodes,
            "folded_seconds": self.folded_seconds,
            "op_seconds": self.op_seconds,
            "graph_seconds": self.graph_seconds,
            "eager_seconds": None if math.isnan(self.eager_seconds) else self.eager_seconds,
            "instrumented_seconds": self.instrumented_seconds,
            "capture_seconds": round(self.capture_seconds, 3),
            "seconds": round(self.seconds, 3),
        }


# ---------------------------------------------------------------------------- public API
def profile_graph(
    source: str | torch.nn.Module,
    example_inputs: Any = (),
    *,
    training: bool = False,
    name: str | None = None,
    example_kwargs: Mapping[str, Any] | None = None,
    loss_fn: Callable[..., Any] | None = None,
    loss_inputs: Any = (),
    iterations: int = 10,
    warmup: int = 3,
    threads: int = 1,
    timer: str = "profiler",
    device: str = "cpu",
    kind: str | None = None,
    seed: int = 0,
) -> tuple[CompGraph, ProfileReport]:
    """Import ``source`` and measure every op on this machine (see the module docstring).

    Args:
        source: a zoo spec ``torch:NAME?ARG=INT&...`` (without ``mode=``: ``training`` decides),
            built on the CPU with random weights; or a ``torch.nn.Module`` with its example
            inputs, as for :func:`~graphopt.importers.torch.from_torch`.
        example_inputs, example_kwargs, loss_fn, loss_inputs: as for
            :func:`~graphopt.importers.torch.from_torch` (a module ``source`` only).
        training: the forward + backward graph instead of the forward graph.
        name: the graph's name (default: the zoo's canonical name, or the module's class name).
        iterations: timed runs, 1..:data:`MAX_ITERATIONS`; each op's time is the median over
            them.
        warmup: untimed runs first, 0..:data:`MAX_ITERATIONS`.
        threads: ``torch.set_num_threads`` for the runs (restored afterwards), 1..:data:`MAX_THREADS`;
            part of the kind.
        timer: ``"profiler"`` or ``"clock"`` (module docstring).
        device: where to run: ``"cpu"``, or ``"cuda"`` / ``"cuda:N"`` (``timer="clock"`` only;
            module docstring).
        kind: the key of the measured times (default :func:`~graphopt.measure.machine.cpu_kind`
            of ``threads``, or :func:`~graphopt.measure.machine.cuda_kind` on a GPU).
        seed: seeds the weights (zoo models) and the random inputs.

    Returns:
        The graph with ``measured[kind]`` (NaN for unmatched ops), and the report.

    Raises:
        ValueError: a bad argument or spec, a model that cannot be captured, an op that fails to
            run, a model that fails to run eagerly, or no op matched by an event.
        DependencyNotInstalled: a Hugging Face zoo model without ``transformers``.
    """
    _check_arguments(iterations, warmup, threads, timer, device)
    start = time.perf_counter()
    target = torch.device(device)
    if kind is None:
        kind = cuda_kind(target.index or 0) if target.type == "cuda" else cpu_kind(threads)
    metadata: dict[str, Any] = {}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if isinstance(source, str):
            work, name, metadata = _zoo_workload(source, training, name)
            model = work.model
            inputs = torch_importer._as_tuple(work.inputs)
            kwargs = dict(work.kwargs)
            loss_fn = work.loss_fn if training else None
            extra = torch_importer._as_tuple(work.loss_inputs) if training else ()
        elif isinstance(source, torch.nn.Module):
            model = source
            name = name or type(model).__name__
            inputs = torch_importer._as_tuple(example_inputs)
            kwargs = dict(example_kwargs or {})
            extra = torch_importer._as_tuple(loss_inputs)
            if not training and (loss_fn is not None or extra):
                raise ValueError(f"{name!r}: loss_fn / loss_inputs only apply to training graphs")
        else:
            raise ValueError(
                f"profile_graph expects a zoo spec (torch:NAME?...) or a torch.nn.Module, "
                f"got {type(source).__name__}"
            )
        real_args = _real_inputs(inputs + extra)
        real_kwargs = _real_inputs(kwargs)
        captured = _capture(model, inputs, extra, kwargs, loss_fn, training, name)
        values = _placeholder_values(captured, real_args, real_kwargs)
        if target.type != "cpu":
            values, real_args, real_kwargs = _to_device(captured, model, values, real_args,
                                                        real_kwargs, target)  # fmt: skip
        capture_seconds = time.perf_counter() - start
        with torch_threads(threads), torch_importer.math_attention():
            timing = _measure(
                captured,
                values,
                _eager_step(model, real_args, real_kwargs, len(inputs), loss_fn, training),
                iterations=iterations,
                warmup=warmup,
                timer=timer,
                name=name,
                device=target,
            )
    converted = captured.converted
    op_names = list(converted.names)
    measured = np.array([timing.op_times.get(op, math.nan) for op in op_names], dtype=np.float64)
    unmatched = [op for op in op_names if op not in timing.op_times]
    if len(unmatched) == len(op_names):
        raise ValueError(
            f"{name!r}: no profiler event matched an op of the graph ({len(op_names)} ops, "
            f"{timing.events} annotated events); nothing was measured"
        )
    op_set = set(op_names)
    folded = {n: t for n, t in timing.node_times.items() if n not in op_set}
    report = ProfileReport(
        name=name,
        kind=kind,
        device=device,
        training=training,
        threads=threads,
        iterations=iterations,
        warmup=warmup,
        timer=timer,
        op_names=op_names,
        unmatched_ops=unmatched,
        renamed_ops=[
            (op, event)
            for op, op_type in zip(op_names, converted.types, strict=True)
            if (event := timing.first_event.get(op)) and event != _event_name(op_type)
        ],
        folded_nodes=len(folded),
        folded_seconds=float(sum(folded.values())),
        op_seconds=float(np.nansum(measured)),
        graph_seconds=timing.graph_seconds,
        eager_seconds=timing.eager_seconds,
        instrumented_seconds=timing.instrumented_seconds,
        capture_seconds=capture_seconds,
        seconds=time.perf_counter() - start,
    )
    graph = torch_importer.graph_from(
        converted,
        name=name,
        training=training,
        op_names=op_names,
        measured={kind: measured},
        metadata={
            **metadata,
            "profile": {
                "profiler_version": PROFILER_VERSION,
                "kind": kind,
                "device": device,
                "threads": threads,
                "iterations": iterations,
                "warmup": warmup,
                "timer": timer,
                **({"cuda_repeats": CUDA_REPEATS} if target.type == "cuda" else {}),
                "seed": seed,
                "matched": report.matched,
                "unmatched_ops": len(unmatched),
                "op_seconds": report.op_seconds,
                "graph_seconds": report.graph_seconds,
                "eager_seconds": report.summary()["eager_seconds"],
                "folded_seconds": report.folded_seconds,
            },
        },
    )
    return graph, report


def check_device(device: str) -> None:
    """Refuse a device :func:`profile_graph` cannot run on, with a one-line reason.

    Raises:
        ValueError: ``cuda`` (or ``cuda:N``) on a machine without a CUDA device, a GPU index it
            does not have, or any other name.
    """
    if device == "cpu":
        return
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise InvalidArgument(
                "no CUDA device: torch.cuda.is_available() is False (torch {version}); "
                "profile on {device} cpu",
                version=torch.__version__,
            )
        index = device.partition(":")[2]
        if index and (not index.isdigit() or int(index) >= torch.cuda.device_count()):
            raise InvalidArgument(
                "{device} {got!r}: this machine has {count} CUDA device(s), cuda:0 to cuda:{last}",
                got=device,
                count=torch.cuda.device_count(),
                last=torch.cuda.device_count() - 1,
            )
        return
    raise InvalidArgument(
        "unknown {device} {got!r}; choose one of: {choices}, cuda",
        got=device,
        choices=", ".join(DEVICES),
    )


# ---------------------------------------------------------------------------- arguments
def _check_arguments(iterations: int, warmup: int, threads: int, timer: str, device: str) -> None:
    check_integer(iterations, "iterations", 1, MAX_ITERATIONS)
    check_integer(warmup, "warmup", 0, MAX_ITERATIONS)
    check_integer(threads, "threads", 1, MAX_THREADS)
    if timer not in TIMERS:
        raise ValueError(f"unknown timer {timer!r}; choose one of: {', '.join(TIMERS)}")
    check_device(device)
    if device != "cpu" and timer != "clock":
        raise ValueError(
            f"timer {timer!r} times CPU events only; profile on {device} with timer 'clock' "
            "(CUDA events)"
        )


def _zoo_workload(spec: str, training: bool, name: str | None) -> tuple[Any, str, dict[str, Any]]:
    """The zoo model ``spec`` built on the CPU (real, randomly initialised weights)."""
    from graphopt.importers import zoo

    if not spec.strip().startswith(zoo.PREFIX) and ":" in spec.split("?", 1)[0]:
        raise ValueError(
            f"cannot profile {spec!r}: only PyTorch zoo models (torch:NAME?ARG=INT&...) can be "
            "run; see graphopt graphs list"
        )
    work, label, metadata = zoo.zoo_workload(spec, training=training, device="cpu")
    return work, name or label, metadata


# ---------------------------------------------------------------------------- tensors
def _is_real(t: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, torch.Tensor) and not isinstance(t, FakeTensor) and t.device.type != "meta"


def _synthetic(like: Any, *, ones: bool = False) -> Any:
    """A real CPU tensor shaped, strided and typed like ``like``: uniform [0, 1) floats (or
    ones), zero integers; non-tensors are returned as they are."""
    if not isinstance(like, torch.Tensor):
        return like
    out = torch.empty_strided(tuple(like.shape), tuple(like.stride()), dtype=like.dtype)
    if ones:
        return out.fill_(1)
    if like.is_floating_point() or like.is_complex():
        return out.uniform_()
    return out.zero_()


def _real_inputs(tree: Any) -> Any:
    """The example inputs as real CPU tensors: floating-point ones random normal, the others
    the example's values (zeros for an example without values, e.g. on the meta device)."""

    def real(x: Any) -> Any:
        if not isinstance(x, torch.Tensor):
            return x
        if x.is_floating_point():
            return torch.randn(tuple(x.shape), dtype=x.dtype)
        return x.detach().clone() if _is_real(x) else _synthetic(x)

    return tree_map(real, tree)


class _Captured:
    """The graph the importer converts, and where each of its placeholders' values come from."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        converted: Any,
        sources: dict[str, str],
        state: dict[str, Any],
        training: bool,
    ) -> None:
        self.gm = gm
        self.converted = converted
        self.sources = sources  # placeholder -> "input" or a state key
        self.state = state  # state key -> the real tensor (absent when it has no real value)
        self.training = training


def _capture(
    model: torch.nn.Module,
    inputs: tuple[Any, ...],
    extra: tuple[Any, ...],
    kwargs: dict[str, Any],
    loss_fn: Callable[..., Any] | None,
    training: bool,
    name: str,
) -> _Captured:
    """:func:`~graphopt.importers.torch.from_torch`'s capture and conversion, step by step, keeping
    the FX graph and a map from its state placeholders to the model's real tensors."""
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"profile_graph expects a torch.nn.Module, got {type(model).__name__}")
    step = torch_importer._TrainStep(model, loss_fn, n_inputs=len(inputs)) if training else None
    exported = step if step is not None else model
    real_by_fqn = _named_tensors(exported)
    with torch_importer._fake_state(model, training=training) as fake:
        fake_keys = torch_importer._state_keys(exported)  # fqn -> key, as the import computes
        args = fake.inputs(inputs + extra)
        fkwargs = fake.inputs(kwargs)
        with torch_importer._generic_kernels(), torch_importer._quiet_torch():
            ep = torch_importer._export(exported, args, fkwargs, name)
            if training:
                gm, sources = torch_importer._joint_graph(ep, args, fkwargs, name, fake_keys)
                strip = f"{torch_importer._WRAPPED}."
            else:
                gm, sources = torch_importer._forward_graph(ep, fake_keys)
                strip = ""
        converted = torch_importer._convert(
            gm, sources, name=name, strip_prefix=strip, training=training
        )
        constants = {
            f"state-{k}": v for k, v in getattr(ep, "constants", {}).items() if _is_real(v)
        }
    state: dict[str, Any] = dict(constants)
    for fqn, key in fake_keys.items():
        t = real_by_fqn.get(fqn)
        if t is not None and _is_real(t):
            state.setdefault(key, t.detach())
    for fqn, t in real_by_fqn.items():  # constants and tensors the signature names by fqn
        if _is_real(t):
            state.setdefault(f"state-{fqn}", t.detach())
    return _Captured(gm, converted, dict(sources), state, training)


def _named_tensors(module: torch.nn.Module) -> dict[str, Any]:
    """Parameters, buffers and plain tensor attributes of ``module`` by fully qualified name."""
    out: dict[str, Any] = {}
    for fqn, t in (
        *module.named_parameters(remove_duplicate=False),
        *module.named_buffers(remove_duplicate=False),
    ):
        out[fqn] = t
    for path, sub in module.named_modules(remove_duplicate=False):
        for key, t in vars(sub).items():
            if isinstance(t, torch.Tensor):
                out.setdefault(f"{path}.{key}" if path else key, t)
    return out


def _placeholder_values(captured: _Captured, real_args: Any, real_kwargs: Any) -> list[Any]:
    """One real value per placeholder of the captured graph, in order (module docstring)."""
    gm = captured.gm
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    user = [
        n
        for n in placeholders
        if captured.sources.get(n.name, "input") == "input" and not _is_tangent(n)
    ]
    leaves = [t for t in tree_leaves((real_args, real_kwargs)) if isinstance(t, torch.Tensor)]
    user_tensors = [n for n in user if isinstance(n.meta.get("val"), torch.Tensor)]
    aligned = len(leaves) == len(user_tensors) and all(
        tuple(t.shape) == tuple(n.meta["val"].shape) and t.dtype == n.meta["val"].dtype
        for t, n in zip(leaves, user_tensors, strict=False)
    )
    given = dict(zip((n.name for n in user_tensors), leaves, strict=False)) if aligned else {}
    values = []
    for n in placeholders:
        val = n.meta.get("val")
        source = captured.sources.get(n.name, "input")
        if _is_tangent(n):
            values.append(_synthetic(val, ones=True))
        elif source != "input" and source in captured.state:
            values.append(captured.state[source])
        elif n.name in given:
            values.append(given[n.name])
        elif source == "input" and isinstance(val, torch.Tensor) and val.is_floating_point():
            values.append(torch.randn(tuple(val.shape), dtype=val.dtype))
        else:
            values.append(_synthetic(val))
    for node in gm.graph.nodes:  # constants the graph reads as attributes
        if node.op == "get_attr":
            attr = getattr(gm, str(node.target), None)
            if isinstance(attr, torch.Tensor) and not _is_real(attr):
                _set_attr(gm, str(node.target), _synthetic(attr))
    return values


def _is_tangent(node: torch.fx.Node) -> bool:
    return type(node.meta.get("desc")).__name__ == "TangentAOTInput" or node.name.startswith(
        "tangents_"
    )


def _set_attr(gm: torch.nn.Module, target: str, value: Any) -> None:
    *path, leaf = target.split(".")
    owner = gm
    for part in path:
        owner = getattr(owner, part)
    if isinstance(getattr(owner, leaf, None), torch.nn.Parameter):
        value = torch.nn.Parameter(value, requires_grad=False)
    setattr(owner, leaf, value)


def _to_device(
    captured: _Captured,
    model: torch.nn.Module,
    values: list[Any],
    real_args: Any,
    real_kwargs: Any,
    device: torch.device,
) -> tuple[list[Any], Any, Any]:
    """Move a CPU-captured graph's run to ``device``: its placeholder values, the tensors it
    reads as attributes, the ``device`` arguments of its ops, and the eager model and inputs."""

    def move(x: Any) -> Any:
        return x.to(device) if isinstance(x, torch.Tensor) else x

    gm = captured.gm
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            attr = getattr(gm, str(node.target), None)
            if isinstance(attr, torch.Tensor):
                _set_attr(gm, str(node.target), move(attr))
        elif node.op == "call_function" and isinstance(node.kwargs.get("device"), torch.device):
            node.kwargs = {**node.kwargs, "device": device}
    gm.recompile()
    model.to(device)
    return [move(v) for v in values], tree_map(move, real_args), tree_map(move, real_kwargs)


# ---------------------------------------------------------------------------- running
class _OpFailed(Exception):
    def __init__(self, node: torch.fx.Node, error: BaseException) -> None:
        super().__init__(str(error))
        self.node = node
        self.error = error


class _Runner(torch.fx.Interpreter):
    """Runs the graph node by node: each ``call_function`` node inside a profiler annotation
    (``clock`` off), or timed with ``perf_counter_ns`` around its op's call (``clock`` on)."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        clock: bool,
        times: dict[str, list[int]],
        cuda: bool = False,
    ) -> None:
        super().__init__(gm, garbage_collect_values=True)
        self.clock = clock
        self.times = times
        self.cuda = cuda
        # (node, start, end, calls between them): read by :meth:`sync`
        self.events: list[tuple[str, Any, Any, int]] = []
        self.node_name = ""

    def run_node(self, n: torch.fx.Node) -> Any:
        if n.op != "call_function":
            return super().run_node(n)
        self.node_name = n.name
        try:
            if self.clock:
                return super().run_node(n)
            with torch.profiler.record_function(ANNOTATION + n.name):
                return super().run_node(n)
        except _OpFailed:
            raise
        except Exception as e:
            raise _OpFailed(n, e) from e

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        if not self.clock:
            return target(*args, **kwargs)
        if self.cuda:
            return self._cuda_call(target, args, kwargs)
        start = time.perf_counter_ns()
        out = target(*args, **kwargs)
        self.times.setdefault(self.node_name, []).append(time.perf_counter_ns() - start)
        return out

    def _cuda_call(self, target: Any, args: Any, kwargs: Any) -> Any:
        """Run the op, then time :data:`CUDA_REPEATS` more calls of it back to back between two
        CUDA events; an op that may mutate its inputs runs once, between the events."""
        once = _mutates(target)
        calls = 1 if once else CUDA_REPEATS
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        if once:
            begin.record()
            out = target(*args, **kwargs)
            end.record()
        else:
            out = target(*args, **kwargs)
            begin.record()
            for _ in range(calls):
                target(*args, **kwargs)
            end.record()
        self.events.append((self.node_name, begin, end, calls))
        return out

    def sync(self) -> None:
        """Wait for the GPU and store every op's CUDA-event time per call, nanoseconds."""
        if not self.events:
            return
        torch.cuda.synchronize()
        for node, begin, end, calls in self.events:
            self.times.setdefault(node, []).append(int(begin.elapsed_time(end) * 1e6 / calls))
        self.events.clear()


def _mutates(target: Any) -> bool:
    """Whether ``target`` (an FX node's callable) may write to its inputs: an ATen overload whose
    schema says so, or any callable that is not an ATen overload (its effects are unknown)."""
    schema = getattr(target, "_schema", None)
    return schema is None or bool(schema.is_mutable)


def _flat_module(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` as a module called with its placeholders' values as flat positional arguments (a
    joint graph's own signature takes nested lists)."""
    graph = torch.fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    return torch.fx.GraphModule(gm, graph)


def _eager_step(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    n_inputs: int,
    loss_fn: Callable[..., Any] | None,
    training: bool,
) -> Callable[[], None] | None:
    """One eager step of the model (module docstring), or ``None`` for a model that has tensors
    without values (on the meta device)."""
    tensors = [*model.parameters(), *model.buffers()]
    if not all(_is_real(t) for t in tensors):
        return None
    if not training:

        def forward() -> None:
            if model.training:
                model.eval()
            with torch.no_grad():
                model(*args[:n_inputs], **kwargs)

        return forward
    step = torch_importer._TrainStep(model, loss_fn, n_inputs=n_inputs)

    def train() -> None:
        if not model.training:
            model.train()
        with torch.enable_grad():
            step(*args, **kwargs).backward()
        for p in model.parameters():
            p.grad = None

    return train


class _Timing:
    def __init__(self) -> None:
        self.op_times: dict[str, float] = {}  # FX node -> median seconds (matched nodes only)
        self.node_times: dict[str, float] = {}  # every timed node, graph op or folded
        self.first_event: dict[str, str] = {}
        self.events = 0
        self.graph_seconds = math.nan
        self.eager_seconds = math.nan
        self.instrumented_seconds = math.nan


def _measure(
    captured: _Captured,
    values: list[Any],
    eager: Callable[[], None] | None,
    *,
    iterations: int,
    warmup: int,
    timer: str,
    name: str,
    device: torch.device | None = None,
) -> _Timing:
    gm = captured.gm
    clock = timer == "clock"
    cuda = device is not None and device.type == "cuda"
    where = "the CPU" if not cuda else str(device)

    def synchronize() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    clock_times: dict[str, list[int]] = {}
    timing = _Timing()

    def instrumented() -> None:
        try:
            runner = _Runner(gm, clock, clock_times, cuda=cuda)
            runner.run(*values)
            runner.sync()
        except _OpFailed as e:
            op_type = torch_importer._op_type(e.node.target)
            raise ValueError(
                f"{name!r}: op {e.node.name!r} ({op_type}) failed to run on {where}: "
                f"{type(e.error).__name__}: {torch_importer._headline(e.error)}"
            ) from e.error

    def eager_step() -> None:
        assert eager is not None
        try:
            eager()
        except Exception as e:
            raise ValueError(
                f"{name!r}: the model fails to run eagerly on {where}: "
                f"{type(e).__name__}: {torch_importer._headline(e)}"
            ) from e

    flat = _flat_module(gm)
    walls: dict[str, list[float]] = {"graph": [], "eager": [], "instrumented": []}

    def wall(what: str, fn: Callable[[], Any], grad: bool = False) -> None:
        with torch.enable_grad() if grad else torch.no_grad():
            synchronize()
            start = time.perf_counter()
            fn()
            synchronize()
            walls[what].append(time.perf_counter() - start)

    profilers: list[Any] = []

    def profiled() -> None:
        if clock:
            wall("instrumented", instrumented)
            return
        profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        with _quiet_kineto():
            profiler.start()
        try:
            wall("instrumented", instrumented)
        finally:
            with _quiet_kineto():
                profiler.stop()
        profilers.append(profiler)

    # The three kinds of run take turns, so that a shared machine's slow spells hit them alike.
    with torch_importer._quiet_torch():
        with torch.no_grad():
            instrumented()  # the check run: an op that fails is named
        for _ in range(warmup):
            wall("instrumented", instrumented)
            wall("graph", lambda: flat(*values))
            if eager is not None:
                wall("eager", eager_step, grad=True)
        for values_of in walls.values():
            values_of.clear()
        clock_times.clear()
        for _ in range(iterations):
            wall("graph", lambda: flat(*values))
            if eager is not None:
                wall("eager", eager_step, grad=True)
            profiled()
    timing.graph_seconds = statistics.median(walls["graph"])
    timing.instrumented_seconds = statistics.median(walls["instrumented"])
    if walls["eager"]:
        timing.eager_seconds = statistics.median(walls["eager"])
    if clock:
        samples = {n: [t * 1e-9 for t in ts] for n, ts in clock_times.items()}
        timing.events = sum(len(ts) for ts in samples.values())
    else:
        samples = {}
        for profiler in profilers:
            for node, seconds in _profiler_samples(profiler, timing).items():
                samples.setdefault(node, []).extend(seconds)
    timing.node_times = {n: statistics.median(ts) for n, ts in samples.items() if ts}
    ops = set(captured.converted.names)
    timing.op_times = {n: t for n, t in timing.node_times.items() if n in ops}
    return timing


def _profiler_samples(profiler: Any, timing: _Timing) -> dict[str, list[float]]:
    """Per FX node, the seconds of each run: the summed CPU time of the ATen events directly
    under the node's annotation; nodes whose annotation holds no event get no sample."""
    samples: dict[str, list[float]] = {}
    for event in profiler.events():
        if not event.name.startswith(ANNOTATION):
            continue
        timing.events += 1
        node = event.name[len(ANNOTATION) :]
        children = list(event.cpu_children)
        if not children:
            continue
        timing.first_event.setdefault(node, children[0].name)
        samples.setdefault(node, []).append(sum(c.cpu_time_total for c in children) * 1e-6)
    return samples


def _event_name(op_type: str) -> str:
    """The profiler's name of an op type's ATen event: ``aten::addmm``, ``ns::op``."""
    if "." in op_type:
        ns, _, op = op_type.partition(".")
        return f"{ns}::{op}"
    return f"aten::{op_type}"


@contextlib.contextmanager
def _quiet_kineto() -> Iterator[None]:
    """Kineto writes ``USDT:`` / ``STAGE:`` lines to the process's stderr (file descriptor 2)
    when a profile starts and stops; keep them out, and pass anything else through."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # pragma: no cover - no file descriptor 2
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode(errors="replace")
            rest = [line for line in text.splitlines() if not line.startswith(("USDT:", "STAGE:"))]
            if rest:
                sys.stderr.write("\n".join(rest) + "\n")
