"""A whole decision from a network's per-op outputs: the channels each task reads and one decode.

A network steering the decoders emits ``C`` real numbers per op (``outputs``, shape ``(C, N)``).
The channels of each task, in order (:func:`channels`):

| task | channels |
| --- | --- |
| placement | ``shift``, ``gate``, ``affinity:0`` ... ``affinity:D-1`` |
| scheduling | ``priority`` |
| fusion | ``fusion`` |
| joint | the placement channels, then ``priority``, then ``fusion`` |

Decoding (:func:`decode`) starts from the task's reference decision (the best heuristic, as the
one-shot environments use it):

- placement: :func:`~graphopt.decoders.placement.decode_placement` with ``shift``, ``affinity``,
  the reference placement as the anchor (``anchor=True``, the default) and ``gate`` releasing ops
  from it; ``anchor=False`` ignores the gate and places every op (HEFT when all else is zero);
- scheduling: :func:`~graphopt.decoders.scheduling.decode_priorities` shifting the reference's
  priorities (placement and fusion are the reference's);
- fusion: :func:`~graphopt.decoders.fusion.decode_fusion` for the reference's placement and
  priorities, from the reference's bits (``anchor=True``) or by the XLA pass (``anchor=False``);
- joint: one decode of all three in turn: the placement, then priorities (the reference's when
  the placement is unchanged, else the reference's scheduler, e.g. critical-path, on the new
  placement) shifted, then the fusion pass on the result.

With all outputs zero every task reproduces the reference exactly (with ``anchor=False``:
placement is HEFT's and fusion the XLA pass's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphopt.baselines.scheduling import SCHEDULERS
from graphopt.decoders.fusion import decode_fusion
from graphopt.decoders.placement import PlacementInputs, decode_placement
from graphopt.decoders.scheduling import decode_priorities
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.tasks import ONE_SHOT_TASKS, get_task
from graphopt.typing import Decision, FloatArray

LIMIT = 8.0
"""Outputs are clipped to ``[-LIMIT, LIMIT]`` before decoding (an infinite output becomes
``+-LIMIT``; NaN is refused)."""
DECODERS = ("heft", "heft-lc")
"""The placement decoder's timing model: HEFT's (no link contention) or ``heft-lc``'s."""


@dataclass(frozen=True)
class DecoderSettings:
    """How outputs are decoded.

    Attributes:
        model: ``"heft"`` or ``"heft-lc"``: the placement list scheduler's model of transfers.
        anchor: start from the reference: ops stay on its device unless the network releases
            them (gate > 0), and fusion starts from its bits.
        memory: released ops avoid devices their parameters would overflow.
    """

    model: str = "heft-lc"
    anchor: bool = True
    memory: bool = True

    def __post_init__(self) -> None:
        if self.model not in DECODERS:
            raise ValueError(
                f"unknown decoder {self.model!r}; choose one of: {', '.join(DECODERS)}"
            )
        for name in ("anchor", "memory"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"decoder setting {name} must be true or false")


def channels(task: str, num_devices: int) -> tuple[str, ...]:
    """The per-op output channels ``task`` reads, in order (module docstring)."""
    blocks = get_task(task, ONE_SHOT_TASKS).blocks
    out: list[str] = []
    if "placement" in blocks:
        out += ["shift", "gate", *(f"affinity:{d}" for d in range(num_devices))]
    if "scheduling" in blocks:
        out.append("priority")
    if "fusion" in blocks:
        out.append("fusion")
    return tuple(out)


def clean_outputs(outputs: object, graph: CompGraph, num_channels: int) -> FloatArray:
    """``outputs`` as a ``(C, N)`` float array clipped to ``[-LIMIT, LIMIT]``.

    Raises:
        ValueError: a wrong shape, or a NaN (naming the op and channel).
    """
    arr = np.asarray(outputs, dtype=np.float64)
    n = graph.num_ops
    if arr.shape != (num_channels, n):
        raise ValueError(
            f"decoder outputs have shape {arr.shape}; expected ({num_channels}, {n}) for "
            f"{graph.name!r}"
        )
    nan = np.argwhere(np.isnan(arr))
    if len(nan):
        c, op = (int(x) for x in nan[0])
        raise ValueError(
            f"decoder output {c} of op {graph.op_names[op]!r} (index {op}) is NaN; the network "
            "diverged: resume from an earlier checkpoint or lower the learning rate"
        )
    return np.clip(arr, -LIMIT, LIMIT)


def scheduler_of(reference_name: str) -> str:
    """The scheduler of a best-heuristic chain's name (``heft+critical-path+xla``);
    ``critical-path`` when it names none."""
    parts = reference_name.split("+")
    return parts[1] if len(parts) > 1 and parts[1] in SCHEDULERS else "critical-path"


def decode(
    task: str,
    graph: CompGraph,
    cluster: Cluster,
    outputs: object,
    reference: Decision,
    reference_name: str = "",
    settings: DecoderSettings | None = None,
) -> Decision:
    """The decision ``outputs`` ``(C, N)`` steer for ``task`` (module docstring).

    Args:
        task: placement, scheduling, fusion or joint.
        graph, cluster: what is decided.
        outputs: ``(len(channels(task, D)), N)`` per-op outputs.
        reference: the reference decision (filled: every array set).
        reference_name: the reference chain's name (joint: its scheduler is reused).
        settings: the decoder settings (default :class:`DecoderSettings`).
    """
    settings = settings or DecoderSettings()
    names = channels(task, cluster.num_devices)
    out = clean_outputs(outputs, graph, len(names))
    ref = reference.filled(graph.num_ops)
    assert ref.placement is not None and ref.priority is not None
    placement, priority = ref.placement, ref.priority
    if "shift" in names:
        inputs = PlacementInputs(
            shift=out[0],
            gate=out[1],
            affinity=out[2 : 2 + cluster.num_devices].T,
            anchor=ref.placement if settings.anchor else None,
        )
        placement = decode_placement(
            graph,
            cluster,
            inputs,
            contention=settings.model == "heft-lc",
            memory=settings.memory,
        )
        if task == "placement":
            return Decision(placement=placement)
    if "priority" in names:
        if not np.array_equal(placement, ref.placement):
            priority = SCHEDULERS[scheduler_of(reference_name)](graph, cluster, placement)
        priority = decode_priorities(priority, out[names.index("priority")])
    fusion = ref.fusion
    if "fusion" in names:
        fusion = decode_fusion(
            graph,
            cluster,
            Decision(placement, priority),
            out[names.index("fusion")],
            anchor=ref.fusion if settings.anchor else None,
        )
    return Decision(placement=placement, priority=priority, fusion=fusion)
