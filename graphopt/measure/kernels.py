"""Inductor's compiled kernels measured on this CPU: each kernel's time and the graphopt ops it
computes.

:func:`profile_kernels` captures a zoo model's forward graph as :func:`~graphopt.importers.
profile.profile_graph` does (the same FX graph the importer converts, real weights and inputs),
compiles it with Inductor (CPU, the C++ backend, PyTorch's default kernels, C++ kernel
profiling on) and runs the compiled graph under ``torch.profiler``:

- **Which kernel is which**: while Inductor generates code, every kernel call it writes is
  recorded in order, with the scheduler nodes it runs: a C++ kernel when
  ``CppScheduling.define_kernel`` names it (at each flush, also when two kernels share one
  name), a library call (matmul, convolution, a fallback op) when
  ``Scheduler.codegen_extern_call`` emits it. The compiled graph's top-level profiler events
  (``graph_<i>_cpp_fused_...`` for a C++ kernel, the ATen op for a library call) come in that
  order: the k-th event of a run is the k-th recorded call, checked by name (a C++ kernel's) and
  kind; a run whose events do not line up is refused.
- **Which ops a kernel computes**: the recorded scheduler nodes go through
  :mod:`graphopt.importers.inductor`'s grouping (IR origins, provenance back to the FX node
  names the importer gave the ops, an op assigned to the last kernel it appears in, absorption),
  so the groups are those of :func:`~graphopt.importers.inductor.inductor_groups`' rules on the
  kernels this compilation really runs.
- **Times**: a kernel's time is the median over ``iterations`` runs (after ``warmup``) of its
  event's duration; :attr:`KernelProfile.step_seconds` is the median wall time of the whole
  compiled call, and :attr:`KernelProfile.eager_seconds` that of the model's eager forward step
  (as :func:`~graphopt.measure.profile.profile_graph` times it: ``no_grad``, attention on the
  math backend), the two taking turns in the same process, so that their ratio, the measured
  speed-up of compiling, is not a comparison across sessions of a shared machine.

Forward graphs only: a training graph is compiled by AOTAutograd as two graphs whose backward
inputs come from the forward's run, which this does not replay. This reaches into private
Inductor internals (``CppScheduling.define_kernel``, ``Scheduler.codegen_extern_call``), patched
for the duration of one compilation; written against torch 2.13.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import torch

from graphopt import strict_json
from graphopt.errors import check_integer
from graphopt.file_set import write_file
from graphopt.importers import inductor as inductor_groups_
from graphopt.importers import torch as torch_importer
from graphopt.measure import profile as profiler
from graphopt.measure.machine import cpu_kind, torch_threads
from graphopt.weights import pickle_refusal

KERNELS_VERSION = 1
"""Version of the file :meth:`KernelProfile.save` writes."""

_CALL = "## Call CompiledFxGraph"  # the profiler's event around one call of a compiled graph


@dataclass(frozen=True)
class KernelProfile:
    """The measured kernels of one compiled graph.

    Attributes:
        name: the graph's name (the zoo's canonical name, as the importer gives it).
        kind: the device kind the times belong to (:func:`~graphopt.measure.machine.cpu_kind`).
        groups: per kernel that computes at least one graphopt op, those ops' names, in
            Inductor's launch order.
        seconds: per group, its kernel's median time.
        extern: per group, whether its kernel is a library call (matmul, convolution...).
        kernel_names: per group, the profiler's name of its kernel.
        step_seconds: median time of one call of the compiled graph.
        eager_seconds: median time of the model's eager forward step, measured alongside.
        unmatched_ops: graphopt ops in no kernel (unfused at run time, or removed by Inductor).
        settings: iterations, warmup, threads, torch version.
    """

    name: str
    kind: str
    groups: list[list[str]]
    seconds: list[float]
    extern: list[bool]
    kernel_names: list[str]
    step_seconds: float
    eager_seconds: float
    unmatched_ops: list[str]
    settings: dict[str, Any]

    def save(self, path: str | Path) -> Path:
        """Write the profile as JSON (data only), whole or not at all
        (:func:`graphopt.file_set.write_file`)."""
        text = strict_json.dumps({"version": KERNELS_VERSION, **dataclasses.asdict(self)})
        return write_file(path, text)

    @classmethod
    def load(cls, path: str | Path) -> KernelProfile:
        """Read a file :meth:`save` wrote.

        Raises:
            ValueError: not such a file, or one of another version (both versions named).
        """
        path = Path(path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            pickled = pickle_refusal(path, "give the JSON bench/bench_kernels.py writes")
            if pickled is not None:
                raise ValueError(pickled) from None
            raise ValueError(
                f"{path}: not a kernel profile: not UTF-8 text (a binary or pickled file?); "
                "graphopt reads the JSON bench/bench_kernels.py writes"
            ) from None
        except (OSError, ValueError, RecursionError) as e:
            reason = "nested too deeply" if isinstance(e, RecursionError) else e
            raise ValueError(f"{path}: not a kernel profile: {reason}") from None
        if not isinstance(raw, dict):
            keys = ", ".join(["version", *(f.name for f in dataclasses.fields(cls))])
            raise ValueError(
                f"{path}: a kernel profile must be a JSON object with keys {keys}; this file "
                f"holds a JSON {_JSON_TYPES.get(type(raw), type(raw).__name__)}"
            )
        if raw.get("version") != KERNELS_VERSION:
            got = raw.get("version")
            raise ValueError(
                f"{path}: kernel profile version {got!r}, this graphopt reads version "
                f"{KERNELS_VERSION}; measure it again with bench/bench_kernels.py"
            )
        fields = {f.name for f in dataclasses.fields(cls)}
        missing = fields - set(raw)
        if missing:
            raise ValueError(f"{path}: kernel profile without {sorted(missing)}")
        _check_fields(path, raw)
        return cls(**{k: raw[k] for k in fields})


_JSON_TYPES = {list: "list", str: "string", int: "number", float: "number", bool: "true/false"}
"""How a kernel profile's message names what a file that is not a JSON object holds."""


def _seconds(value: Any) -> bool:
    """A measured time: a finite number >= 0 (not a bool)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _check_fields(path: Path, raw: dict[str, Any]) -> None:
    """The schema of a kernel profile file: every field of :class:`KernelProfile` of its type,
    the per-group lists one entry per group.

    Raises:
        ValueError: one line naming the file and the key.
    """

    def strings(value: Any) -> bool:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)

    checks: dict[str, tuple[Any, str]] = {
        "name": (lambda v: isinstance(v, str), "a string"),
        "kind": (lambda v: isinstance(v, str), "a string"),
        "groups": (
            lambda v: isinstance(v, list) and all(strings(g) for g in v),
            "a list of lists of op names",
        ),
        "seconds": (
            lambda v: isinstance(v, list) and all(_seconds(t) for t in v),
            "a list of seconds (finite numbers >= 0)",
        ),
        "extern": (
            lambda v: isinstance(v, list) and all(isinstance(b, bool) for b in v),
            "a list of true/false",
        ),
        "kernel_names": (strings, "a list of names"),
        "step_seconds": (_seconds, "seconds (a finite number >= 0)"),
        "eager_seconds": (_seconds, "seconds (a finite number >= 0)"),
        "unmatched_ops": (strings, "a list of op names"),
        "settings": (lambda v: isinstance(v, dict), "an object"),
    }
    for key, (ok, what) in checks.items():
        if not ok(raw[key]):
            shown = json.dumps(raw[key], default=str)
            raise ValueError(
                f"{path}: kernel profile key {key!r} must be {what}, got "
                f"{shown[:60]}{'...' if len(shown) > 60 else ''}"
            )
    for key in ("seconds", "extern", "kernel_names"):
        if len(raw[key]) != len(raw["groups"]):
            raise ValueError(
                f"{path}: kernel profile key {key!r} has {len(raw[key])} entries for "
                f"{len(raw['groups'])} groups; one per group"
            )


class _Launched:
    """A recorded C++ kernel call: the scheduler nodes it runs (what ``_kernels`` reads)."""

    def __init__(self, nodes: list[Any]) -> None:
        self.nodes = nodes

    def get_nodes(self) -> list[Any]:
        return self.nodes


@contextmanager
def _recording(calls: list[tuple[str, Any]]) -> Iterator[None]:
    """Record, in order, each kernel call Inductor writes: ``("cpp", kernel name)`` with a
    :class:`_Launched`, or ``("extern", None)`` with the extern scheduler node."""
    from torch._inductor import ir
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.scheduler import Scheduler

    define_kernel = CppScheduling.define_kernel
    extern_call = Scheduler.codegen_extern_call

    def recorded_define(self: Any, src_code: Any, nodes: Any, kernel_args: Any = None) -> Any:
        name = define_kernel(self, src_code, nodes, kernel_args)
        calls.append((f"cpp:{name}", _Launched(list(nodes))))
        return name

    def recorded_extern(self: Any, node: Any) -> Any:
        if not isinstance(getattr(node, "node", None), ir.MultiOutput):  # indexing, no call
            calls.append(("extern:", node))
        return extern_call(self, node)

    with (
        mock.patch.object(CppScheduling, "define_kernel", recorded_define),
        mock.patch.object(Scheduler, "codegen_extern_call", recorded_extern),
    ):
        yield


def profile_kernels(
    spec: str, *, iterations: int = 20, warmup: int = 3, threads: int = 1
) -> KernelProfile:
    """Compile the forward graph of zoo model ``spec`` with Inductor and measure its kernels
    (see the module docstring).

    Args:
        spec: a zoo model (``torch:NAME?...``).
        iterations: timed runs, 1..:data:`graphopt.measure.profile.MAX_ITERATIONS`; a
            kernel's time is the median over them.
        warmup: untimed runs first, 0..:data:`~graphopt.measure.profile.MAX_ITERATIONS`.
        threads: torch threads, 1..:data:`~graphopt.measure.profile.MAX_THREADS`.

    Raises:
        ValueError: a bad spec or argument (an argument out of its range is refused before any
            work, naming it: :class:`graphopt.errors.InvalidArgument`), a model that cannot be
            captured, Inductor failing, or profiler events that do not line up with the
            recorded kernel calls.
    """
    check_integer(iterations, "iterations", 1, profiler.MAX_ITERATIONS)
    check_integer(warmup, "warmup", 0, profiler.MAX_ITERATIONS)
    check_integer(threads, "threads", 1, profiler.MAX_THREADS)
    import torch._inductor.config as inductor_config
    from torch._inductor.compile_fx import compile_fx

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the weights and inputs profile_graph's default seed gives
        work, name, _ = profiler._zoo_workload(spec, False, None)
    inputs = torch_importer._as_tuple(work.inputs)
    kwargs = dict(work.kwargs)
    with torch_threads(threads):
        captured = profiler._capture(work.model, inputs, (), kwargs, None, False, name)
        values = profiler._placeholder_values(
            captured, profiler._real_inputs(inputs), profiler._real_inputs(kwargs)
        )
        converted = captured.converted
        calls: list[tuple[str, Any]] = []
        compiled: list[Any] = []

        def schedule(gm: Any, label: str) -> list[Any]:
            with (
                _recording(calls),
                inductor_config.patch({"fx_graph_cache": False, "cpp.enable_kernel_profile": True}),
                torch_importer._quiet_torch(),
                torch.no_grad(),
            ):
                try:
                    compiled.append(compile_fx(gm, values))
                except Exception as e:
                    raise ValueError(
                        f"{label}: Inductor could not compile the graph: {type(e).__name__}: "
                        f"{torch_importer._headline(e)}"
                    ) from e
            return [node for _, node in calls]

        edges = list(zip(converted.edge_src.tolist(), converted.edge_dst.tolist(), strict=True))
        found = inductor_groups_._groups(
            [("forward", captured.gm)],
            list(converted.names),
            list(converted.types),
            edges,
            name,
            schedule=schedule,
        )
        eager = profiler._eager_step(
            work.model, profiler._real_inputs(inputs), profiler._real_inputs(kwargs),
            len(inputs), None, False,
        )  # fmt: skip
        if eager is None:
            raise ValueError(f"{name!r}: the model has tensors without values")
        with torch_importer.math_attention():
            times, step, eager_step, events = _measure(
                compiled[0], values, eager, calls, name, iterations, warmup
            )
    positions = [at for _, at in found.positions]
    return KernelProfile(
        name=name,
        kind=cpu_kind(threads),
        groups=found.groups,
        seconds=[times[at] for at in positions],
        extern=[calls[at][0].startswith("extern:") for at in positions],
        kernel_names=[events[at] for at in positions],
        step_seconds=step,
        eager_seconds=eager_step,
        unmatched_ops=found.unmatched_ops,
        settings={
            "iterations": iterations,
            "warmup": warmup,
            "threads": threads,
            "torch": torch.__version__,
            "spec": spec,
        },
    )


def _measure(
    compiled: Any,
    values: list[Any],
    eager: Any,
    calls: list[tuple[str, Any]],
    name: str,
    iterations: int,
    warmup: int,
) -> tuple[list[float], float, float, list[str]]:
    """Each recorded call's median time, the compiled and the eager step's medians (seconds,
    taking turns) and each call's profiler event name."""
    walls: dict[str, list[float]] = {"compiled": [], "eager": []}
    with torch.no_grad():
        for _ in range(warmup):
            compiled(*values)
            eager()
        for _ in range(iterations):
            for what, run in (("compiled", lambda: compiled(*values)), ("eager", eager)):
                start = time.perf_counter()
                run()
                walls[what].append(time.perf_counter() - start)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(iterations):
                compiled(*values)
    events = [
        e for e in prof.events() if e.cpu_parent is not None and e.cpu_parent.name.startswith(_CALL)
    ]
    if len(events) != len(calls) * iterations:
        raise ValueError(
            f"{name!r}: {len(events) // iterations} kernel events per run against "
            f"{len(calls)} kernel calls Inductor wrote; the kernels cannot be told apart"
        )
    per_call: list[list[float]] = [[] for _ in calls]
    for i, event in enumerate(events):
        k = i % len(calls)
        label = calls[k][0]
        kernel = label.split(":", 1)[1]
        if (label.startswith("cpp:") and not event.name.endswith(kernel)) or (
            label.startswith("extern:") and not event.name.startswith("aten::")
        ):
            raise ValueError(
                f"{name!r}: profiler event {event.name!r} where Inductor wrote {label!r}; "
                "the kernels cannot be told apart"
            )
        per_call[k].append(event.cpu_time_total * 1e-6)
    names = [e.name for e in events[: len(calls)]]
    return (
        [statistics.median(t) for t in per_call],
        statistics.median(walls["compiled"]),
        statistics.median(walls["eager"]),
        names,
    )
