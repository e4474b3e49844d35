"""A device's roofline fitted to measured op times: per-op overhead and efficiency per op type.

The simulator prices an op without a measured time by the roofline of rule 3
(:mod:`graphopt.sim`): ``max(flops / (peak_flops * c), bytes / (mem_bandwidth * m)) +
launch_overhead``, ``c`` and ``m`` the device's efficiency for the op's type, else its class
(:class:`~graphopt.hardware.Device`). :func:`calibrate` fits ``launch_overhead`` and that
efficiency table to the measured times of ops of the device's kind (``graph.measured[kind]``,
e.g. written by ``graphopt profile``), so that graphs never measured are priced as the machine
runs them. The peak figures stay as measured or given; only the shares of them change.

The fit, in order (every step minimises the summed absolute error of the ops' predicted times,
so the ops that take the time dominate it):

1. **Ops used**: every op with a finite measured time for the kind that is not of class
   ``source`` (placeholders and parameters: no kernel). At least one is needed.
2. **Entries**: one per op class, and one per op type with at least ``min_ops`` measured ops
   from at least ``min_sources`` sources (model families, :func:`source_of`: a model's forward
   and training graphs, or two sizes of one zoo model, are one source). An entry holds one
   efficiency from :data:`EFFICIENCIES`: the **compute** efficiency for a key whose ops have
   FLOPs (memory left at 1), else the **memory** efficiency. A type seen in fewer sources keeps
   its class's entry: one model's kernels say little about another's.
3. **Overhead**: one ``launch_overhead`` from :data:`OVERHEADS`, the per-op cost every op pays,
   jointly with one efficiency per entry, each op priced by its type's entry, else its class's.
4. **Efficiencies** at that overhead: a type's entry over its ops, a class's over all the ops of
   the class (it prices the types without an entry of their own).

Efficiencies are rounded to four significant digits. :attr:`Calibration.rows` reports every key:
its ops, sources, measured seconds, and the seconds predicted before (the device as given) and
after the fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from graphopt.graph import CompGraph
from graphopt.hardware import Device
from graphopt.op_classes import SOURCE

OVERHEADS = tuple(float(x) * 1e-7 for x in range(0, 401, 2))
"""Per-op overheads tried, seconds: 0 to 40 us in steps of 0.2 us."""

EFFICIENCIES = tuple(float(x) for x in np.logspace(-3, math.log10(5.0), 200))
"""Efficiencies tried: 0.001 to 5, log-spaced (about 4.4% apart)."""


@dataclass(frozen=True)
class CalibrationRow:
    """One fitted key (op class or op type)."""

    key: str
    level: str  # "class" or "type"
    ops: int
    sources: int
    compute: float
    memory: float
    measured_seconds: float
    before_seconds: float
    after_seconds: float


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` fitted.

    Attributes:
        device: the device with the fitted ``launch_overhead`` and ``efficiency``.
        ops: ops the fit used; sources: distinct sources among their graphs.
        rows: one per fitted key, classes first, then types, each by measured seconds.
        measured_seconds / before_seconds / after_seconds: summed over the ops used.
    """

    device: Device
    ops: int
    sources: int
    rows: tuple[CalibrationRow, ...]
    measured_seconds: float
    before_seconds: float
    after_seconds: float


def source_of(graph: CompGraph) -> str:
    """The model family a graph comes from: its zoo model's name (``metadata["zoo"]``, e.g.
    ``resnet``: every depth and width is one family), else its name without a trailing
    ``" (training)"``, so that a model's forward and training graphs share it."""
    zoo = graph.metadata.get("zoo")
    return str(zoo) if zoo else graph.name.removesuffix(" (training)")


def _fit(
    flop_seconds: np.ndarray,
    byte_seconds: np.ndarray,
    overhead: float,
    times: np.ndarray,
    *,
    compute: bool,
) -> tuple[float, float]:
    """The efficiency of :data:`EFFICIENCIES` minimising ``sum |overhead + roofline - times|`` and
    that error. ``compute``: the roofline is ``max(flop_seconds / e, byte_seconds)`` (memory at
    full bandwidth); else ``byte_seconds / e``."""
    effs = np.asarray(EFFICIENCIES)[:, None]
    if compute:
        roofline = np.maximum(flop_seconds[None, :] / effs, byte_seconds[None, :])
    else:
        roofline = byte_seconds[None, :] / effs
    errors = np.abs(overhead + roofline - times[None, :]).sum(axis=1)
    best = int(np.argmin(errors))
    return float(effs[best, 0]), float(errors[best])


def _round(value: float) -> float:
    return float(f"{value:.4g}")


def _check_sums(
    times: np.ndarray,
    flop_seconds: np.ndarray,
    byte_seconds: np.ndarray,
    names: list[str],
    kind: str,
) -> None:
    """Refuse ops whose times the fit cannot sum: the fit adds up measured times and rooflines
    (at the lowest efficiency tried, :data:`EFFICIENCIES`) over every op, and a sum that
    overflows float64 makes every figure meaningless. Names the op with the largest term."""
    slowest = np.maximum(flop_seconds, byte_seconds) / min(EFFICIENCIES)
    terms = np.maximum(times, slowest)
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(np.sum(terms) + np.sum(times) + np.sum(slowest))
    if math.isfinite(total):
        return
    i = int(np.argmax(np.where(np.isfinite(terms), terms, np.inf)))
    raise ValueError(
        f"the measured times of device kind {kind!r} cannot be summed (their sum overflows): op "
        f"{names[i]!r} measured {times[i]:.3g} s, roofline at least {slowest[i]:.3g} s; fix or "
        "drop that op's measurement (or its FLOPs and bytes) and calibrate again"
    )


def calibrate(
    graphs: Sequence[CompGraph], device: Device, *, min_ops: int = 8, min_sources: int = 2
) -> Calibration:
    """Fit ``device``'s per-op overhead and efficiency table to the measured times of its kind in
    ``graphs`` (module docstring).

    Raises:
        ValueError: ``min_ops`` or ``min_sources`` below 1, no graph holds a measured time for
            ``device.kind`` on an op that is not a source, or the times cannot be summed without
            overflow (the op named).
    """
    if min_ops < 1 or min_sources < 1:
        raise ValueError(f"min_ops and min_sources must be >= 1, got {min_ops}, {min_sources}")
    columns: dict[str, list[np.ndarray]] = {k: [] for k in ("t", "f", "b", "src")}
    types: list[str] = []
    classes: list[str] = []
    names: list[str] = []  # graph/op, to name the op behind a sum that overflows
    for graph in graphs:
        times = graph.measured.get(device.kind)
        if times is None:
            continue
        use = np.isfinite(times) & (np.asarray(graph.op_classes) != SOURCE)
        columns["t"].append(np.asarray(times, dtype=np.float64)[use])
        columns["f"].append(graph.flops[use])
        columns["b"].append(graph.bytes_accessed[use])
        columns["src"].append(np.full(int(use.sum()), source_of(graph), dtype=object))
        types += [t for t, ok in zip(graph.op_types, use, strict=True) if ok]
        classes += [c for c, ok in zip(graph.op_classes, use, strict=True) if ok]
        names += [f"{graph.name}/{n}" for n, ok in zip(graph.op_names, use, strict=True) if ok]
    if not types:
        raise ValueError(
            f"no op of these {len(graphs)} graph(s) has a measured time for device kind "
            f"{device.kind!r}; profile them on that device first (graphopt profile), or pick "
            "the device whose kind they were measured on"
        )
    t, f, b = (np.concatenate(columns[k]) for k in ("t", "f", "b"))
    src = np.concatenate(columns["src"])
    op_type, op_class = np.array(types, dtype=object), np.array(classes, dtype=object)
    flop_seconds, byte_seconds = f / device.peak_flops, b / device.mem_bandwidth
    _check_sums(t, flop_seconds, byte_seconds, names, device.kind)
    has_flops = f > 0

    def fit(mask: np.ndarray, overhead: float) -> tuple[float, float]:
        compute = bool(has_flops[mask].any())
        return _fit(flop_seconds[mask], byte_seconds[mask], overhead, t[mask], compute=compute)

    # Step 2, the entries: every op class, then every op type seen often enough (a type named
    # like a class is left to the class).
    keys: list[tuple[str, str, np.ndarray]] = [
        ("class", name, op_class == name) for name in sorted(set(classes))
    ]
    own = np.zeros(len(t), dtype=bool)  # ops priced by their type's own entry
    for name in sorted(set(types) - set(classes)):
        mask = op_type == name
        if mask.sum() >= min_ops and len(set(src[mask])) >= min_sources:
            keys.append(("type", name, mask))
            own |= mask

    # Step 3: the overhead, jointly with one efficiency per entry that prices the ops (each op
    # by its type's entry, else its class's).
    parts = [mask & ~own if level == "class" else mask for level, _, mask in keys]
    parts = [mask for mask in parts if mask.any()]
    errors = [sum(fit(mask, overhead)[1] for mask in parts) for overhead in OVERHEADS]
    overhead = OVERHEADS[int(np.argmin(errors))]

    # Step 4: every entry's efficiency at that overhead (a class's over all its ops: it prices
    # the types without an entry).
    table: dict[str, dict[str, float]] = {}
    for _, key, mask in keys:
        efficiency = _round(fit(mask, overhead)[0])
        figure = "compute" if has_flops[mask].any() else "memory"
        table[key] = {"compute": 1.0, "memory": 1.0, figure: efficiency}
    fitted = replace(
        device,
        launch_overhead=_round(overhead),
        efficiency=table,  # type: ignore[arg-type]  # converted by Device
    )

    def predicted(dev: Device) -> np.ndarray:
        compute, memory = dev.op_efficiency(list(op_type), list(op_class))
        return np.asarray(dev.roofline_time(f, b, compute, memory))

    before, after = predicted(device), predicted(fitted)
    rows = [
        CalibrationRow(
            key=key,
            level=level,
            ops=int(mask.sum()),
            sources=len(set(src[mask])),
            compute=table[key]["compute"],
            memory=table[key]["memory"],
            measured_seconds=float(t[mask].sum()),
            before_seconds=float(before[mask].sum()),
            after_seconds=float(after[mask].sum()),
        )
        for level, key, mask in keys
    ]
    rows.sort(key=lambda r: (r.level != "class", -r.measured_seconds))
    return Calibration(
        device=fitted,
        ops=len(t),
        sources=len(set(src)),
        rows=tuple(rows),
        measured_seconds=float(t.sum()),
        before_seconds=float(before.sum()),
        after_seconds=float(after.sum()),
    )
