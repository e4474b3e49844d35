"""Types shared across graphopt's modules: decisions, measurements, schedules, the cost-model protocol.

Everything that crosses a module border lives here (as SB3's ``common/type_aliases.py`` does), so
that the simulator, the learned cost model, the baselines and the environments agree on one shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Decision:
    """The compiler decisions for one graph; every array is indexed by op in topological order.

    Attributes:
        placement: device index in ``[0, D)`` per op; ``None`` puts every op on device 0.
        priority: scheduling level in ``[0, P)`` per op; among ready kernels on one device the lowest
            level runs first, ties by topological index. ``None`` means all zero (topological order).
        fusion: 0/1 per op; 1 fuses the op into its consumers (see :mod:`graphopt.sim`).
            ``None`` means no fusion.
    """

    placement: IntArray | None = None
    priority: IntArray | None = None
    fusion: IntArray | None = None

    def filled(self, num_ops: int) -> Decision:
        """This decision with every array given as ``int64`` and each missing one replaced by its
        default (zeros: device 0, priority 0, no fusion) for a graph of ``num_ops`` ops."""

        def arr(value: IntArray | None) -> IntArray:
            if value is None:
                return np.zeros(num_ops, dtype=np.int64)
            return np.asarray(value, dtype=np.int64)

        return Decision(arr(self.placement), arr(self.priority), arr(self.fusion))

    def to_dict(self) -> dict[str, list[int] | None]:
        """JSON-ready form (lists of ints, ``None`` for arrays left out)."""
        return {
            key: None if value is None else [int(v) for v in value]
            for key, value in (
                ("placement", self.placement),
                ("priority", self.priority),
                ("fusion", self.fusion),
            )
        }

    @classmethod
    def from_dict(cls, data: dict[str, list[int] | None]) -> Decision:
        """Inverse of :meth:`to_dict`; unknown keys raise ``ValueError``."""
        unknown = set(data) - {"placement", "priority", "fusion"}
        if unknown:
            raise ValueError(
                f"unknown decision keys {sorted(unknown)}; allowed: placement, priority, fusion"
            )

        def arr(key: str) -> IntArray | None:
            value = data.get(key)
            return None if value is None else np.asarray(value, dtype=np.int64)

        return cls(placement=arr("placement"), priority=arr("priority"), fusion=arr("fusion"))


@dataclass(frozen=True)
class DecisionRecord:
    """A decision as a decision file holds it (:mod:`graphopt.decisions.format`): every array keyed
    by op name, with what it is for and what it measured.

    Attributes:
        graph: the graph's name.
        graph_fingerprint: :attr:`graphopt.graph.CompGraph.fingerprint` of the graph.
        cluster: the cluster's name.
        cluster_fingerprint: :attr:`graphopt.hardware.Cluster.fingerprint` of the cluster.
        devices: the cluster's device names; a placement's device ``d`` is ``devices[d]``.
        op_names: every op, in the graph file's order (the order of the maps in the file).
        placement: device index per op name; ``None`` when the decision leaves it out.
        priority: scheduling level per op name, or ``None``.
        fusion: fusion bit (0 or 1) per op name, or ``None``.
        kernels: the fused kernels of two or more ops, each its op names in the graph's
            topological order (derived from ``fusion``; empty without fusion).
        method: what made the decision (``heft``, ``annealing@256``, a policy).
        task: the task it was made for, or ``None``.
        seed: the seed of the method, or ``None``.
        step_time: seconds per step as measured when saved; ``None`` when not finite or unknown.
        valid: whether that measurement was valid; ``None`` when unknown.
        reason: why it was invalid (empty when valid).
    """

    graph: str
    graph_fingerprint: str
    cluster: str
    cluster_fingerprint: str
    devices: tuple[str, ...]
    op_names: tuple[str, ...]
    placement: Mapping[str, int] | None = None
    priority: Mapping[str, int] | None = None
    fusion: Mapping[str, int] | None = None
    kernels: tuple[tuple[str, ...], ...] = ()
    method: str = ""
    task: str | None = None
    seed: int | None = None
    step_time: float | None = None
    valid: bool | None = None
    reason: str = ""


@dataclass(frozen=True)
class KernelRecord:
    """One kernel of a simulated schedule: a fused group of ops (a single op when unfused)."""

    ops: tuple[int, ...]
    """Topological indices of the ops in the kernel, ascending; the last one is the root."""
    device: int
    start: float
    end: float


@dataclass(frozen=True)
class TransferRecord:
    """One tensor sent over a link: the output of ``producer`` from ``src`` to ``dst``."""

    producer: int
    src: int
    dst: int
    nbytes: float
    start: float
    end: float


@dataclass(frozen=True)
class Schedule:
    """The full simulated timeline, returned on request by the simulator."""

    kernels: tuple[KernelRecord, ...]
    transfers: tuple[TransferRecord, ...]


@dataclass(frozen=True)
class Measurement:
    """What a cost model says about one decision.

    Attributes:
        step_time: seconds for one step (makespan); ``inf`` when the decision cannot run at all
            (illegal fusion). An OOM decision still has its simulated step time.
        busy_time: seconds each device spends running kernels, shape ``(D,)``.
        peak_memory: peak bytes resident on each device (parameters plus live activations), ``(D,)``.
        bytes_moved: total bytes sent over links.
        valid: ``False`` when the decision is out of memory or its fusion is illegal.
        reason: empty when valid, else what went wrong (e.g. ``"OOM on device 1 (gpu1): ..."``).
        schedule: the full timeline when it was requested, else ``None``.
    """

    step_time: float
    busy_time: FloatArray
    peak_memory: FloatArray
    bytes_moved: float
    valid: bool
    reason: str = ""
    schedule: Schedule | None = field(default=None, compare=False)


class Measured(Protocol):
    """What a saved decision records of its measurement: a :class:`Measurement`, or a row of a
    results table that copies these three fields."""

    @property
    def step_time(self) -> float: ...

    @property
    def valid(self) -> bool: ...

    @property
    def reason(self) -> str: ...


@runtime_checkable
class CostModel(Protocol):
    """Anything that can price a decision: the simulator, or a learned model.

    ``graph`` is a :class:`graphopt.graph.CompGraph` and ``cluster`` a
    :class:`graphopt.hardware.Cluster`; both are typed ``Any`` here because those modules import
    this one (tests/test_layers.py refuses an import cycle, even one only for type checking).
    """

    def evaluate(self, graph: Any, cluster: Any, decision: Decision) -> Measurement:
        """Return the :class:`Measurement` of ``decision`` for ``graph`` on ``cluster``."""
        ...


@dataclass(frozen=True)
class ListInputs:
    """What HEFT's list schedule, and the decoders that generalise it, read of a graph on a
    cluster (:func:`graphopt.baselines.heft.list_inputs`).

    Shapes: ``N`` ops, ``D`` devices, ``E`` edges.
    """

    comp: FloatArray
    """``(N, D)`` seconds of every op on every device (the simulator's)."""
    csr: tuple[IntArray, IntArray, IntArray, IntArray, FloatArray]
    """``(succ_ptr, succ_dst, pred_ptr, pred_src, pred_data)``: the successor CSR (slot = edge id)
    and the predecessor CSR carrying each edge's bytes."""
    links: tuple[FloatArray, FloatArray]
    """``(latency, bandwidth)``, ``(D, D)``: :func:`graphopt.sim.links.link_arrays` on the
    cluster's route."""
    w_mean: FloatArray
    """``(N,)`` HEFT's ``w̄``: each op's mean time over the devices."""
    rank: FloatArray
    """``(N,)`` HEFT's upward rank (mean op times, mean link cost per edge)."""


@dataclass(frozen=True)
class ClusterModel:
    """A cluster's model options decoded once (:attr:`graphopt.hardware.Cluster.model`): what the
    simulator, the estimates and every heuristic that prices a transfer read, never the option
    strings themselves. The option values and their meaning are in :mod:`graphopt.hardware`;
    :data:`graphopt.hardware.MODEL_OPTIONS` lists them.
    """

    queued: bool
    """``contention: link``: a link carries one transfer at a time, the others queue; False for
    ``none``: every transfer lands ``latency + bytes / bandwidth`` after it is sent."""
    host: int
    """``route: via-host``: the index of the device that relays a transfer between two other
    devices (two hops, each on its own link); -1 for ``route: direct``."""
    per_consumer: bool
    """``send: per-consumer``: one send per consuming op on another device, with that edge's
    bytes; False for ``per-device``: one send per other device (the largest of its edges)."""
    charge_copies: bool
    """``copies: charged``: a received (or relayed) copy uses the receiver's memory."""
    fcfs: bool
    """``dispatch: fcfs``: an idle device starts the kernel ready first; False for ``priority``."""
    enforce_colocation: bool
    """``colocation: enforce``: each colocation group runs on one device; False for ``hint``."""
    op_times: str
    """``op_times``: ``"roofline"``, ``"calibrated"`` or ``"learned"`` (how ops without a measured
    time are priced)."""

    @property
    def routed(self) -> bool:
        """Whether transfers between non-host devices take two hops (``route: via-host``)."""
        return self.host >= 0

    @property
    def default_links(self) -> bool:
        """Whether the link options are all at their defaults (``contention: link``, ``route:
        direct``, ``send: per-device``): the link model the heuristics were first written for."""
        return self.queued and self.host < 0 and not self.per_consumer


class LinkModel(NamedTuple):
    """What HEFT-lc's list schedule and the estimate's contention schedule read of the
    cluster's links (:func:`graphopt.sim.links.link_model`): the direct link arrays and the link
    options of :class:`ClusterModel`, in one value passed whole to the compiled code, which reads
    its fields by name and prices a hop with :func:`graphopt.sim.links.hop_time` (or
    :func:`~graphopt.sim.links.hop_time_by_inverse`). A new link option is a new field here,
    filled and priced in :mod:`graphopt.sim.links`; these callers hand the value on unchanged.
    (The simulator's engine reads the same options as scalars of its
    :class:`~graphopt.sim.arrays.GraphArrays`.)

    Shapes: ``D`` devices.
    """

    latency: FloatArray
    """``(D, D)`` seconds a send on each direct link pays whatever its size (``0`` on the
    diagonal)."""
    bandwidth: FloatArray
    """``(D, D)`` bytes per second of each direct link (``inf`` on the diagonal)."""
    inv_bandwidth: FloatArray
    """``(D, D)`` seconds per byte, ``1 / bandwidth`` (``0`` on the diagonal): what the
    multiplying form of the transfer time reads."""
    queued: bool
    """:attr:`ClusterModel.queued` (``contention: link``)."""
    host: int
    """:attr:`ClusterModel.host` (``route: via-host``: the relaying device; ``-1``: direct)."""
    per_consumer: bool
    """:attr:`ClusterModel.per_consumer` (``send: per-consumer``)."""
