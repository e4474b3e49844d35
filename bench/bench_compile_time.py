"""numba's cold compilation, per compiled function: how long each takes and for how many signatures.

Every ``@njit(cache=True)`` function is compiled the first time a process calls it with a new
signature (argument types: dtypes, layouts, readonly or writable arrays, literal constants passed
by a compiled caller, ...). On a fresh clone numba's disk cache is empty, so every signature costs
its full compilation, once per process that needs it (each pytest worker). This bench points
``NUMBA_CACHE_DIR`` at an empty temporary folder (``--cache-dir`` keeps another), runs code that
compiles, and listens to numba's ``numba:compile`` events: one per compiled signature, nested when
compiling a function compiles a non-inlined callee (an ``inline="always"`` callee is typed into its
caller and counted there).

Printed:

- per graphopt function, sorted by CPU time: the signatures compiled; its own CPU seconds (typing,
  lowering and LLVM of its code, its graphopt callees subtracted); of it LLVM's (optimisation and
  machine code; a caller's includes optimising its non-inlined callees' code again, linked into
  its module); ``numba lib``, the numba library functions (``np.zeros``, slice assignment's error
  message, ...) it was the first to need: compiled once a process, never cached on disk; and the
  time with its callees;
- the numba library functions over 0.2 s and the graphopt function that needed each first;
- the functions holding several signatures at the end (compiled or loaded from the cache): the
  callers each was compiled for and the arguments in which they differ;
- the array-to-slice assignments compiled (``a[i] = b``: each needs numba's shape-mismatch message,
  seconds of library compilation once a process);
- the CPU seconds compiling and of the whole process.

Two sources of compiling code:

- default: ``graphopt.warmup``'s parts (:data:`graphopt.warmup.PARTS`), one after the other in this
  process (``--parts simulator,decoders`` for some), with numba's one-off start-up cost (its first
  compilation of anything) measured apart on a trivial function;
- ``--pytest ARGS``: pytest in this process on ``ARGS`` (quoted, e.g. ``--pytest
  "tests/graphopt/sim -q -p no:xdist"``); with a warm cache (``--cache-dir`` a filled one) only
  the signatures are of interest.

Run: ``python bench/bench_compile_time.py [--parts NAME,...] [--pytest ARGS] [--cache-dir DIR]
[--top N]``. The whole warm-up compiles for about 80 s of CPU in one process (123 s before the
rules of :mod:`graphopt.compiled`: 42 signatures then, 33 now).
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Compiled:
    """One function's compilations in this process (CPU seconds)."""

    signatures: int = 0
    own_cpu: float = 0.0
    """Compiling its own code: numba's typing and lowering, LLVM."""
    llvm_cpu: float = 0.0
    """Of ``own_cpu``, LLVM's optimisation and machine code."""
    lib_cpu: float = 0.0
    """The numba library functions (``np.full``, slice assignment, ...) it was first to need."""
    total_cpu: float = 0.0
    """With its graphopt callees and library functions."""
    wall: float = 0.0
    first_by: str = ""
    """For a library function: the graphopt function whose compilation needed it first."""
    callers: list[str] = field(default_factory=list)
    """Per signature compiled, in order: the function whose compilation called it (or Python)."""


@dataclass
class _Frame:
    name: str
    ours: bool
    start_cpu: float
    start_wall: float
    children_cpu: float = 0.0
    lib_cpu: float = 0.0
    llvm_cpu: float = 0.0


def _name(dispatcher) -> str:
    func = dispatcher.py_func
    return f"{func.__module__}.{func.__qualname__}"


@dataclass
class CompileLog:
    """Collects numba's ``numba:compile`` events by function (``module.qualname``): graphopt's in
    ``by_name``, numba's library functions in ``library`` (each once a process: they are not
    cached on disk, only inside the graphopt functions that use them)."""

    by_name: dict[str, Compiled] = field(default_factory=lambda: defaultdict(Compiled))
    library: dict[str, Compiled] = field(default_factory=lambda: defaultdict(Compiled))
    stack: list[_Frame] = field(default_factory=list)

    def listener(self):  # a numba Listener; numba imported only once the cache folder is set
        from numba.core import event

        log = self

        class _Listener(event.Listener):
            def on_start(self, ev):
                name = _name(ev.data["dispatcher"])
                ours = name.startswith("graphopt.")
                log.stack.append(_Frame(name, ours, time.process_time(), time.perf_counter()))

            def on_end(self, ev):
                frame = log.stack.pop()
                cpu = time.process_time() - frame.start_cpu
                parent = log.stack[-1] if log.stack else None
                if frame.ours:
                    entry = log.by_name[frame.name]
                    entry.callers.append(parent.name if parent else "(Python)")
                    entry.own_cpu += cpu - frame.children_cpu - frame.lib_cpu
                    entry.lib_cpu += frame.lib_cpu
                    if parent is not None:
                        parent.children_cpu += cpu
                elif parent is not None and not parent.ours:
                    parent.children_cpu += cpu  # inside another library function: counted there
                    return
                else:
                    entry = log.library[frame.name]
                    entry.own_cpu += cpu
                    if parent is not None:
                        parent.lib_cpu += cpu
                        entry.first_by = entry.first_by or parent.name
                entry.signatures += 1
                entry.total_cpu += cpu
                entry.llvm_cpu += frame.llvm_cpu
                entry.wall += time.perf_counter() - frame.start_wall

        return _Listener()

    def time_llvm(self) -> None:
        """Count LLVM's optimisation and machine-code generation (llvmlite's pass managers and
        object finalisation) in the innermost function being compiled."""
        from llvmlite.binding import executionengine, newpassmanagers

        log = self

        def timed(method):
            def wrapper(*args, **kwargs):
                cpu = time.process_time()
                try:
                    return method(*args, **kwargs)
                finally:
                    if log.stack:
                        log.stack[-1].llvm_cpu += time.process_time() - cpu

            return wrapper

        newpassmanagers.NewPassManager.run = timed(newpassmanagers.NewPassManager.run)
        engine = executionengine.ExecutionEngine
        engine.finalize_object = timed(engine.finalize_object)


def dispatchers() -> dict[str, object]:
    """Every numba dispatcher defined in a loaded graphopt module, by ``module.qualname``."""
    from numba.core.dispatcher import Dispatcher

    found = {}
    for mod_name, module in list(sys.modules.items()):
        if not mod_name.startswith("graphopt") or module is None:
            continue
        for value in vars(module).values():
            if isinstance(value, Dispatcher) and value.py_func.__module__ == mod_name:
                found[f"{mod_name}.{value.py_func.__qualname__}"] = value
    return found


def _flatten(ty, prefix: str = "") -> list[tuple[str, str]]:
    """``(path, type)`` of every leaf of an argument type (tuples and named tuples opened)."""
    from numba.core import types

    if isinstance(ty, types.BaseTuple) and not isinstance(ty, types.Array):
        names = getattr(ty, "fields", None) or [str(i) for i in range(len(ty.types))]
        out = []
        for name, sub in zip(names, ty.types, strict=True):
            out += _flatten(sub, f"{prefix}{name}.")
        return out
    return [(prefix.rstrip("."), str(ty))]


def signature_differences(dispatcher) -> list[str]:
    """Where a function's signatures differ: ``arg path: type | type``."""
    sigs = list(dispatcher.overloads)
    if len(sigs) < 2:
        return []
    params = list(dispatcher.py_func.__code__.co_varnames[: len(sigs[0])])
    flat = []
    for sig in sigs:
        leaves: dict[str, str] = {}
        for name, ty in zip(params, sig, strict=True):
            leaves.update(_flatten(ty, f"{name}."))
        flat.append(leaves)
    lines = []
    for key in flat[0]:
        values = [leaves.get(key, "-") for leaves in flat]
        if len(set(values)) > 1:
            lines.append(f"{key}: " + " | ".join(values))
    return lines


def slice_assignments(held: dict[str, object]) -> list[str]:
    """Every assignment of an array into an array slice (``a[i] = b``, ``a[:, j] = b``) in the
    signatures compiled in this process (not those loaded from the cache), as ``function
    file:line``. Each needs numba's shape-mismatch error message, whose library function takes
    seconds to compile once a process and signature."""
    from numba.core import ir, types

    found = []
    for name, disp in held.items():
        for cres in disp.overloads.values():
            annotation = getattr(cres, "type_annotation", None)
            if annotation is None:
                continue
            for inst, sig in annotation.calltypes.items():
                if (
                    isinstance(inst, (ir.SetItem, ir.StaticSetItem))
                    and sig is not None
                    and isinstance(sig.args[2], types.Array)
                ):
                    where = f"{Path(inst.loc.filename).name}:{inst.loc.line}"
                    found.append(f"{name.removeprefix('graphopt.')} {where}")
    return sorted(set(found))


def report(log: CompileLog, top: int, start_cpu: float, startup_cpu: float) -> None:
    rows = sorted(log.by_name.items(), key=lambda kv: -kv[1].own_cpu - kv[1].lib_cpu)
    print(
        f"{'function':<44} {'sigs':>4} {'own CPU s':>9} {'of it LLVM':>10} {'numba lib':>9} "
        f"{'with callees':>12} {'wall s':>7}"
    )
    for name, c in rows[:top]:
        print(
            f"{name.removeprefix('graphopt.'):<44} {c.signatures:>4} {c.own_cpu:>9.2f} "
            f"{c.llvm_cpu:>10.2f} {c.lib_cpu:>9.2f} {c.total_cpu:>12.2f} {c.wall:>7.2f}"
        )
    own = sum(c.own_cpu for c in log.by_name.values())
    llvm = sum(c.llvm_cpu for c in log.by_name.values())
    lib = sum(c.own_cpu for c in log.library.values())
    print(
        f"{len(rows)} functions, {sum(c.signatures for c in log.by_name.values())} signatures "
        f"compiled: {own:.1f} s CPU (of it {llvm:.1f} s in LLVM) + {lib:.1f} s of numba library "
        f"functions = {own + lib:.1f} s (+ numba's start-up {startup_cpu:.1f} s)"
    )
    print("\nnumba library functions over 0.2 s CPU (compiled once a process), first needed by:")
    for name, c in sorted(log.library.items(), key=lambda kv: -kv[1].own_cpu):
        if c.own_cpu >= 0.2:
            print(
                f"  {c.own_cpu:6.2f} s  {c.signatures:>2} sigs  {name[-50:]:<50} "
                f"{c.first_by.removeprefix('graphopt.')}"
            )
    held = dispatchers()
    several = {n: d for n, d in held.items() if len(d.overloads) > 1}
    print(f"\nsignatures held at the end: {sum(len(d.overloads) for d in held.values())} "
          f"in {sum(1 for d in held.values() if d.overloads)} functions; several:")  # fmt: skip
    for name, disp in sorted(several.items()):
        print(f"  {name.removeprefix('graphopt.')}: {len(disp.overloads)}")
        callers = log.by_name[name].callers if name in log.by_name else []
        if callers:
            shown = ", ".join(c.removeprefix("graphopt.") for c in callers)
            print(f"      compiled here, called by: {shown}")
        for line in signature_differences(disp):
            print(f"      {line[:160]}")
    assignments = slice_assignments(held)
    print(f"\narray-to-slice assignments compiled: {len(assignments)}")
    for line in assignments:
        print(f"  {line}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"\nprocess CPU {usage.ru_utime + usage.ru_stime:.1f} s "
        f"(user {usage.ru_utime:.1f}, sys {usage.ru_stime:.1f}; since the first graphopt import "
        f"{time.process_time() - start_cpu:.1f} s)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="", help="graphopt.warmup parts, comma-separated (all)")
    ap.add_argument("--pytest", default=None, help="run pytest on these arguments instead")
    ap.add_argument("--cache-dir", default=None, help="numba's cache folder (default: a new one)")
    ap.add_argument("--top", type=int, default=60, help="rows of the table")
    args = ap.parse_args()
    cache = args.cache_dir or tempfile.mkdtemp(prefix="numba-cold-")
    os.environ["NUMBA_CACHE_DIR"] = cache
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"NUMBA_CACHE_DIR={cache}")

    import numba
    from numba.core import event

    # numba's one-off start-up (its first compilation of anything), apart from graphopt's
    cpu0 = time.process_time()
    numba.njit(lambda a: a[0] + 1.0)(__import__("numpy").zeros(1))
    startup_cpu = time.process_time() - cpu0
    log = CompileLog()
    event.register("numba:compile", log.listener())
    log.time_llvm()
    start_cpu = time.process_time()
    if args.pytest is not None:
        import pytest

        sys.path.insert(0, str(ROOT))  # as `python -m pytest` from the root: graphopt, not tests'
        code = pytest.main(shlex.split(args.pytest))
        print(f"pytest exit status {code}")
    else:
        from graphopt import warmup

        names = [p for p in args.parts.split(",") if p] or list(warmup.PARTS)
        for name in names:
            cpu = time.process_time()
            seconds = warmup.run_part(name)
            print(f"part {name}: {seconds:.1f} s wall, {time.process_time() - cpu:.1f} s CPU")
    report(log, args.top, start_cpu, startup_cpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
