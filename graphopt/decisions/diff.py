"""What differs between two decisions for one graph: ops moved, priorities changed, kernels split
or merged, and the step time.

Both decisions are :class:`~graphopt.typing.DecisionRecord` s (read from decision files, or built
for a graph with :func:`graphopt.decisions.format.record_of`), compared op by op through their op
names. An array a record leaves out counts as its default (device 0, priority 0, no fusion), as
the simulator reads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from graphopt.typing import DecisionRecord


@dataclass(frozen=True)
class DecisionDiff:
    """The differences from decision ``a`` to decision ``b``.

    Attributes:
        num_ops: ops of the graph.
        moved: ``(op, device in a, device in b)`` for every op placed differently, in the graph
            file's op order; devices by index into ``devices_a`` / ``devices_b``.
        reprioritised: ``(op, priority in a, priority in b)`` for every op whose level differs.
        split: the fused kernels of ``a`` that ``b`` does not keep whole, each as the pieces ``b``
            makes of it (a piece of one op: that op runs unfused).
        merged: the fused kernels of ``b`` that ``a`` does not have, each as the pieces of ``a``
            it joins.
        step_time_a: ``a``'s step time, seconds (``None`` when unknown or not comparable).
        step_time_b: ``b``'s step time.
        devices_a: device names of ``a``'s cluster.
        devices_b: device names of ``b``'s cluster.
        step_time_note: why the step-time delta is missing (``""`` when it is not).
    """

    num_ops: int
    moved: list[tuple[str, int, int]] = field(default_factory=list)
    reprioritised: list[tuple[str, int, int]] = field(default_factory=list)
    split: list[list[tuple[str, ...]]] = field(default_factory=list)
    merged: list[list[tuple[str, ...]]] = field(default_factory=list)
    step_time_a: float | None = None
    step_time_b: float | None = None
    devices_a: tuple[str, ...] = ()
    devices_b: tuple[str, ...] = ()
    step_time_note: str = ""

    @property
    def step_time_delta(self) -> float | None:
        """``b``'s step time minus ``a``'s, seconds; ``None`` when either is unknown."""
        if self.step_time_a is None or self.step_time_b is None:
            return None
        return self.step_time_b - self.step_time_a

    @property
    def same(self) -> bool:
        """Whether the two decisions are the same."""
        return not (self.moved or self.reprioritised or self.split or self.merged)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: every field, the devices by name, and ``step_time_delta``; where that
        is missing (``null``), ``step_time_note`` says why."""

        def named(devices: tuple[str, ...], d: int) -> str:
            return devices[d] if d < len(devices) else str(d)

        return {
            "num_ops": self.num_ops,
            "moved": [
                {"op": op, "a": named(self.devices_a, x), "b": named(self.devices_b, y)}
                for op, x, y in self.moved
            ],
            "reprioritised": [{"op": op, "a": x, "b": y} for op, x, y in self.reprioritised],
            "split": [[list(p) for p in pieces] for pieces in self.split],
            "merged": [[list(p) for p in pieces] for pieces in self.merged],
            "step_time_a": self.step_time_a,
            "step_time_b": self.step_time_b,
            "step_time_delta": self.step_time_delta,
            **({"step_time_note": self.step_time_note} if self.step_time_note else {}),
        }


def _kernel_of(record: DecisionRecord) -> dict[str, frozenset[str]]:
    """Each fused op's kernel (ops not listed run alone)."""
    return {op: frozenset(kernel) for kernel in record.kernels for op in kernel}


def _pieces(kernel: tuple[str, ...], kernel_of: dict[str, frozenset[str]]) -> list[tuple[str, ...]]:
    """The parts of ``kernel`` (op names in order) by the kernels of the other decision."""
    out: dict[frozenset[str], list[str]] = {}
    for op in kernel:
        out.setdefault(kernel_of.get(op, frozenset((op,))), []).append(op)
    return [tuple(ops) for ops in out.values()]


def diff_records(
    a: DecisionRecord,
    b: DecisionRecord,
    *,
    step_times: tuple[float | None, float | None] | None = None,
) -> DecisionDiff:
    """The differences from ``a`` to ``b`` (see :class:`DecisionDiff`).

    Args:
        step_times: the two step times to report (re-simulated by the caller; ``None`` for an
            invalid decision); default: those the records saved, when both are for the same
            cluster (else none). A step time that is not a finite number is reported as unknown.

    Raises:
        ValueError: the records are for different graphs (one line naming both).
    """
    if a.graph_fingerprint != b.graph_fingerprint:
        raise ValueError(
            f"the decisions are for different graphs: {a.graph!r} (fingerprint "
            f"{a.graph_fingerprint[:12]}) and {b.graph!r} (fingerprint "
            f"{b.graph_fingerprint[:12]}); compare decisions of one graph"
        )
    names = a.op_names or b.op_names

    def changes(x: Any, y: Any) -> list[tuple[str, int, int]]:
        if x is None and y is None:
            return []
        return [
            (op, u, v)
            for op in names
            if (u := 0 if x is None else x.get(op, 0)) != (v := 0 if y is None else y.get(op, 0))
        ]

    kernels_a, kernels_b = _kernel_of(a), _kernel_of(b)
    set_a, set_b = set(kernels_a.values()), set(kernels_b.values())
    split = [_pieces(k, kernels_b) for k in a.kernels if frozenset(k) not in set_b]
    merged = [_pieces(k, kernels_a) for k in b.kernels if frozenset(k) not in set_a]
    note = ""
    if step_times is None:
        same_cluster = a.cluster_fingerprint == b.cluster_fingerprint
        step_times = (a.step_time, b.step_time) if same_cluster else (None, None)
        if not same_cluster:
            note = "the decisions are for different clusters; simulate both on one to compare"
    known = tuple(t if t is not None and math.isfinite(t) else None for t in step_times)
    unknown = [tag for tag, t in zip("AB", known, strict=True) if t is None]
    if unknown and not note:
        note = (
            f"the step time of {' and '.join(unknown)} is unknown (not saved, or an invalid "
            "decision)"
        )
    return DecisionDiff(
        num_ops=len(names),
        moved=changes(a.placement, b.placement),
        reprioritised=changes(a.priority, b.priority),
        split=split,
        merged=merged,
        step_time_a=known[0],
        step_time_b=known[1],
        devices_a=a.devices,
        devices_b=b.devices,
        step_time_note=note,
    )
