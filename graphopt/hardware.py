"""Hardware: devices, the directed links between them, and cluster presets.

A :class:`Cluster` is what cost models price a decision on: ``D`` :class:`Device` s and one
directed link for every ordered pair of devices. Contract (the simulator relies on it):

- Every ordered pair ``(src, dst)``, ``src != dst``, is its own link with its own bandwidth
  (bytes/s) and latency (s); a transfer takes ``latency + nbytes / bandwidth``
  (:func:`graphopt.sim.links.transfer_time` prices it, the one place it is written); by default
  transfers on one link run one at a time (the simulator serialises them: ``contention`` below).
- Devices with no direct link still get an entry for the slower route real systems take (PCIe
  through the host, across sockets). The diagonal is unused: bandwidth ``inf``, latency ``0``,
  so a "transfer" to the same device costs nothing.
- An op without a measured time takes :meth:`Device.roofline_time`; ``Device.kind`` is the key of
  the ops' measured times (``CompGraph.measured``).

File format (YAML or JSON by suffix; :meth:`Cluster.load`, :meth:`Cluster.save`)::

    name: dgx-pair                      # required
    description: two V100 over NVLink   # optional
    devices:                            # required, non-empty, in device-index order
      - name: gpu                       # required; device names are unique
        preset: V100-SXM2-16GB          # optional: start from DEVICE_SPECS[preset] ...
        count: 2                        # optional: k copies named gpu0 .. gpu{k-1}
        memory: 32.0e+9                 # ... fields given here override the preset's
      - {name: cpu, kind: CPU, peak_flops: 6.0e+12, mem_bandwidth: 2.5e+11,
         memory: 3.8e+11, launch_overhead: 1.0e-5}
    links:                              # needed when D > 1, unless `pairs` covers every pair
      default: {bandwidth: 12.0e+9, latency: 1.0e-5}    # every ordered pair not in `pairs`
      pairs:                                             # optional, by device name
        - {src: gpu0, dst: gpu1, bandwidth: 50.0e+9, latency: 5.0e-6}   # both directions
        - {src: cpu, dst: gpu0, bandwidth: 10.0e+9, latency: 1.0e-5, bidirectional: false}
    contention: link                    # optional model options, each shown at its default
    route: direct
    send: per-device
    copies: charged
    dispatch: priority
    colocation: hint
    contiguous: false

Model options (:data:`MODEL_OPTIONS`; the first value of each is the default, and a file that
leaves an option out behaves, and fingerprints, as before the option existed). Rules 5, 6 and 8
of :mod:`graphopt.sim` apply them:

- ``contention``: ``link``, a link carries one transfer at a time, the others queue; ``none``,
  every transfer starts as soon as it is sent (when its producer's kernel ends, or its first hop
  arrives) and takes ``latency + nbytes / bandwidth``, any number at once on one link.
- ``route``: ``direct``, every transfer takes the link from its source to its destination;
  ``via-host``, a transfer between two devices that are both not the *host* goes through the
  host's memory in two hops: ``src -> host``, then ``host -> dst`` once the first hop has
  arrived, each hop on its own link at that link's figures. Transfers to or from the host are
  direct. The host is the device named by ``host: <device name>``, else the first device of
  kind ``CPU``; ``via-host`` with neither is refused, and so is ``host`` with ``route: direct``.
- ``send``: ``per-device``, an op's output is sent once to each other device that hosts a
  consumer (the largest of those edges' bytes); under ``via-host`` its first hop to the host is
  shared: one upload per op, then one ``host -> dst`` hop per device; ``per-consumer``, once for
  every consuming op on another device (that edge's bytes), each send routed on its own.
- ``copies``: ``charged``, a received copy (and, under ``via-host``, the copy relayed through
  the host) uses the receiver's memory; ``free``, it uses none.
- ``dispatch``: what an idle device starts among its ready kernels. ``priority``, the one with
  the lowest ``(priority, root index)`` of the decision; ``fcfs``, first come first served: the
  one that became ready first, ties by root index; the decision's priorities are ignored (a
  runtime that launches ops in the order their inputs arrive).
- ``colocation``: ``hint``, an op's colocation group (``CompGraph.colocation``) is a hint that
  placers may follow; ``enforce``, every op of a group must run on one device: a placement that
  splits a group is invalid, and every method moves a group as one
  (:mod:`graphopt.constraints`, which also holds the per-op allowed device kinds of the graph).
- ``contiguous``: ``false``, any placement; ``true``, the placement must be a contiguous split
  of the block DAG (:mod:`graphopt.blocks`: colour classes, i.e. colocation group else layer,
  contracted, mutually reachable classes fused): every block runs on one device, and each
  accelerator holds one contiguous set of blocks in pipeline order, no edge of the block DAG
  running from a later stage to an earlier one (the pipeline setting of Tarnawski et al. and
  PipeDream). Devices of kind ``CPU`` in a cluster that also has other kinds run their blocks one
  by one, each a stage of its own; in a cluster of one kind every device is a stage. A placement
  that breaks this is invalid, naming the op (:mod:`graphopt.constraints`). A boolean, written
  only when true.

Op times (:data:`OP_TIMES`; not a model option of the event loop: they choose the time of every
op that has no measured time for its device's kind, rule 3 of :mod:`graphopt.sim`):

- ``op_times: roofline`` (the default): the roofline, with the device's ``efficiency`` table when
  it has one;
- ``op_times: calibrated``: the same, and every device must carry an ``efficiency`` table (fit
  one with ``graphopt calibrate``);
- ``op_times: learned`` with ``op_model: FILE`` (a path relative to the cluster file): the
  learned per-op model of :mod:`graphopt.op_model` (``graphopt costmodel ops train``) prices
  every op it can (a device kind and an op type it was trained on), the roofline the rest.

Size: a cluster has at most :data:`MAX_DEVICES` (4,096) devices, ``count`` included; a larger
one is refused with a ``ValueError`` naming the limit (the reasons are at :data:`MAX_DEVICES`).

Device fields: ``name``, ``kind``, ``peak_flops`` (FLOP/s), ``mem_bandwidth`` (bytes/s),
``memory`` (bytes), ``launch_overhead`` (s per kernel), and the optional ``efficiency``: the
share of ``peak_flops`` (``compute``) and of ``mem_bandwidth`` (``memory``) that ops reach, per
op type or op class (:mod:`graphopt.op_classes`); an op's own type wins over its class, and an
op that neither names runs at the full figures (``1.0``)::

        efficiency:                     # optional; e.g. fitted by `graphopt calibrate`
          mm: {compute: 0.86}           # an op type: ``CompGraph.op_types``
          native_dropout: {memory: 0.045}
          elementwise: {memory: 0.9}    # an op class: every op of it without its own entry

An efficiency is finite and positive; above 1 is allowed (an op whose data stays in cache beats
the measured streaming bandwidth). Figures must be finite and positive
(latency and launch overhead may be 0). A number may be a string such as ``"12e9"`` (YAML 1.1
reads ``12e9``, with no dot and no exponent sign, as a string). Each direction of a pair may be
listed once.

Presets (:data:`PRESETS`, :func:`list_presets`, :func:`get_cluster`) are cluster files in
``graphopt/hardware_presets/`` (the file stem is the preset name), each figure cited beside it:
``v100-nvlink-2``, ``v100-nvlink-4``, ``v100-nvlink-8`` (GPUs of an NVIDIA DGX-1V),
``v100-pcie-4`` and ``hetero-cpu-2gpu``; and the settings of published placement work, each
file naming its paper and marking the figures it assumes: ``doppler-4`` and ``doppler-8``
(DOPPLER, ICLR 2026, and GiPH's simulators: ``contention: none``, ``send: per-consumer``,
``dispatch: fcfs``) and ``accel-host`` (Tarnawski et al., NeurIPS 2020: ``route: via-host``,
``copies: free``). Named device specs are in :data:`DEVICE_SPECS`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import numbers
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import astuple, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from graphopt import strict_json
from graphopt.file_set import write_file
from graphopt.typing import ClusterModel, FloatArray, IntArray
from graphopt.weights import pickle_refusal

# Kernel launch overhead from the host: a few microseconds per CUDA kernel (an estimate, not a
# datasheet figure).
GPU_LAUNCH = 5e-6

DEVICE_SPECS: dict[str, dict[str, Any]] = {
    # NVIDIA Tesla V100 datasheet: SXM2 15.7 TFLOP/s FP32, 900 GB/s HBM2, 16 GB (taken as 16e9
    # bytes, a little under the 16 GiB stack, leaving room for the CUDA context).
    "V100-SXM2-16GB": {
        "kind": "V100",
        "peak_flops": 15.7e12,
        "mem_bandwidth": 900e9,
        "memory": 16e9,
        "launch_overhead": GPU_LAUNCH,
    },
    # NVIDIA Tesla V100 datasheet: PCIe 14 TFLOP/s FP32, 900 GB/s HBM2, 16 GB. Same kind as the
    # SXM2 part (same chip, lower clock) so that ops' measured "V100" times apply to it.
    "V100-PCIe-16GB": {
        "kind": "V100",
        "peak_flops": 14e12,
        "mem_bandwidth": 900e9,
        "memory": 16e9,
        "launch_overhead": GPU_LAUNCH,
    },
    # NVIDIA Tesla P100 datasheet: SXM2 10.6 TFLOP/s FP32, 732 GB/s HBM2, 16 GB.
    "P100-SXM2-16GB": {
        "kind": "P100",
        "peak_flops": 10.6e12,
        "mem_bandwidth": 732e9,
        "memory": 16e9,
        "launch_overhead": GPU_LAUNCH,
    },
    # NVIDIA A100 datasheet: SXM4 40 GB, 19.5 TFLOP/s FP32 (no tensor cores), 1555 GB/s HBM2.
    "A100-SXM4-40GB": {
        "kind": "A100",
        "peak_flops": 19.5e12,
        "mem_bandwidth": 1555e9,
        "memory": 40e9,
        "launch_overhead": GPU_LAUNCH,
    },
    # NVIDIA H100 and H200 datasheets (SXM): 67 TFLOP/s FP32 (no tensor cores); HBM3 3.35 TB/s,
    # 80 GB (H100), HBM3e 4.8 TB/s, 141 GB (H200). Checked on an H200 (bench/gpu_check.sh, data
    # in bench/data/profile-cuda-nvidia-h200/): a float32 matmul reached 51.0 TFLOP/s (0.76 of
    # the datasheet), a device copy 4.24 TB/s (0.88), and eager PyTorch dispatched 6.4-10.2 us
    # per op (GPU_LAUNCH is 5 us); the calibrated roofline's shares absorb the gaps.
    "H100-SXM5-80GB": {
        "kind": "H100",
        "peak_flops": 67e12,
        "mem_bandwidth": 3.35e12,
        "memory": 80e9,
        "launch_overhead": GPU_LAUNCH,
    },
    "H200-SXM-141GB": {
        "kind": "H200",
        "peak_flops": 67e12,
        "mem_bandwidth": 4.8e12,
        "memory": 141e9,
        "launch_overhead": GPU_LAUNCH,
    },
    # 2x Intel Xeon Platinum 8180 (ark.intel.com: 28 cores, 6 channels DDR4-2666; Intel Xeon
    # Scalable specification update: AVX-512 all-core base clock 1.7 GHz; 2 AVX-512 FMA units):
    # 2 sockets x 28 cores x (2 FMA x 16 lanes x 2) FLOP/cycle x 1.7e9 = 6.09e12 FP32 FLOP/s;
    # 2 x 6 channels x 2666e6 x 8 bytes = 256 GB/s DRAM. Memory: one 32 GB DIMM per channel,
    # 384 GB (an assumed configuration). Per-op dispatch in a CPU executor: ~10 us (estimate).
    "Xeon-8180-2S": {
        "kind": "CPU",
        "peak_flops": 2 * 28 * 64 * 1.7e9,
        "mem_bandwidth": 2 * 6 * 2666e6 * 8,
        "memory": 384e9,
        "launch_overhead": 10e-6,
    },
}
"""Named device specs (every :class:`Device` field but ``name``), usable as ``preset:`` in files."""

MAX_DEVICES = 4096
"""The most devices a cluster may have. Why 4,096: a cluster holds two ``(D, D)`` float64 link
matrices, ``8 * D**2`` bytes each (128 MiB apiece at 4,096, 2 GiB at 16,384), and loading or
saving one touches every ordered pair; 4,096 loads in seconds and stays far above any machine a
placement is searched for. The simulator and the heuristics take any cluster up to this size;
the learned policies (``graphopt.encoding.MAX_DEVICES``) take at most 16 devices."""

PRESET_DIR = Path(__file__).with_name("hardware_presets")
DEFAULT_CLUSTER = "v100-nvlink-4"

_DEVICE_FIELDS = ("name", "kind", "peak_flops", "mem_bandwidth", "memory", "launch_overhead")
OP_TIMES = ("roofline", "calibrated", "learned")
"""How a cluster prices ops without a measured time (``op_times``, module docstring)."""

MODEL_OPTIONS: dict[str, tuple[str, ...]] = {
    "contention": ("link", "none"),
    "route": ("direct", "via-host"),
    "send": ("per-device", "per-consumer"),
    "copies": ("charged", "free"),
    "dispatch": ("priority", "fcfs"),
    "colocation": ("hint", "enforce"),
}
"""The model options of a cluster file and their values, the default first (module docstring)."""
HOST_KIND = "CPU"
"""The kind of the device that relays transfers under ``route: via-host`` when ``host`` names
none: the first device of this kind."""
MAX_EFFICIENCY_ENTRIES = 4096
"""The most entries a device's ``efficiency`` table may have (one per op type or class)."""
_UNITS = {"peak_flops": "FLOP/s", "mem_bandwidth": "bytes/s", "memory": "bytes"}
_UNITS.update(launch_overhead="s", bandwidth="bytes/s", latency="s")


def _figure(value: object, where: str, name: str, *, allow_zero: bool = False) -> float:
    """``value`` as a float, or ``ValueError`` naming ``where`` and the field ``name``."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):  # else reported below, as the original string
            value = float(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = float(value)
        if math.isfinite(value) and (value > 0 or (allow_zero and value == 0)):
            return value
    bound = "non-negative" if allow_zero else "positive"
    raise ValueError(
        f"{where}: {name} must be a finite {bound} number "
        f"({_UNITS.get(name, 'a share of the peak figure')}), got {value!r}"
    )


def _check_keys(
    data: Any, where: str, required: tuple[str, ...], optional: tuple[str, ...]
) -> None:
    """Raise ``ValueError`` unless ``data`` is a mapping with all ``required`` and no other keys."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{where} must be a mapping, got {type(data).__name__}: {data!r}")
    allowed = required + optional
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; allowed: {', '.join(allowed)}")
    missing = [k for k in required if k not in data]
    if missing:
        raise ValueError(f"{where}: missing required field(s) {missing}")


def _too_many(count: int, where: str) -> ValueError:
    return ValueError(
        f"{where}: {count:,} devices; a cluster may have at most {MAX_DEVICES:,} "
        "(graphopt.hardware.MAX_DEVICES: its D x D link matrices grow with the square of D)"
    )


def _duplicates(names: list[str]) -> list[str]:
    return sorted(name for name, k in Counter(names).items() if k > 1)


def _some(names: list[str], shown: int = 12) -> str:
    """``names`` joined, or the first and last few of a long list and how many there are."""
    if len(names) <= shown:
        return ", ".join(names)
    head, tail = names[: shown - 2], names[-2:]
    return f"{', '.join(head)}, ..., {', '.join(tail)} ({len(names):,} devices)"


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class Device:
    """One compute device.

    Attributes:
        name: unique within a cluster, e.g. ``"gpu0"``.
        kind: device kind, e.g. ``"V100"`` or ``"CPU"``; the key of ops' measured times.
        peak_flops: peak FLOP/s.
        mem_bandwidth: memory bandwidth, bytes/s.
        memory: memory capacity, bytes.
        launch_overhead: seconds added to every kernel (launch / dispatch cost); may be 0.
        efficiency: ``(key, compute, memory)`` triples sorted by key: the share of
            ``peak_flops`` and of ``mem_bandwidth`` that ops of type or class ``key`` reach
            (module docstring); empty: every op at the full figures. A mapping
            ``{key: {"compute": c, "memory": m}}`` (either figure optional, default 1) is
            accepted and converted.

    Raises:
        ValueError: an empty name or kind, a figure that is not finite and positive, or a bad
            efficiency entry (empty key, unknown figure name, figure not finite and positive).
    """

    name: str
    kind: str
    peak_flops: float
    mem_bandwidth: float
    memory: float
    launch_overhead: float
    efficiency: tuple[tuple[str, float, float], ...] = ()

    def __post_init__(self) -> None:
        for key in ("name", "kind"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value:
                raise ValueError(f"device {key} must be a non-empty string, got {value!r}")
        for key in _DEVICE_FIELDS[2:]:
            zero_ok = key == "launch_overhead"
            value = _figure(getattr(self, key), f"device {self.name!r}", key, allow_zero=zero_ok)
            object.__setattr__(self, key, value)
        table = _parse_efficiency(self.efficiency, f"device {self.name!r}")
        object.__setattr__(self, "efficiency", table)

    def efficiency_table(self) -> dict[str, dict[str, float]]:
        """``efficiency`` as the file format writes it: ``{key: {"compute": c, "memory": m}}``,
        figures equal to 1 left out."""
        out: dict[str, dict[str, float]] = {}
        for key, compute, memory in self.efficiency:
            entry = {"compute": compute, "memory": memory}
            out[key] = {name: value for name, value in entry.items() if value != 1.0}
        return out

    def op_efficiency(
        self, op_types: Sequence[str], op_classes: Sequence[str]
    ) -> tuple[FloatArray, FloatArray]:
        """``(compute, memory)``: ``float64 [N]`` efficiency of each op (its type's entry, else
        its class's, else 1), for ``N`` ops given by their types and classes."""
        n = len(op_types)
        compute, memory = np.ones(n), np.ones(n)
        if not self.efficiency:
            return compute, memory
        table = {key: (c, m) for key, c, m in self.efficiency}
        for u, (op_type, op_class) in enumerate(zip(op_types, op_classes, strict=True)):
            entry = table.get(op_type) or table.get(op_class)
            if entry is not None:
                compute[u], memory[u] = entry
        return compute, memory

    def roofline_time(
        self,
        flops: float | FloatArray,
        nbytes: float | FloatArray,
        compute: float | FloatArray = 1.0,
        memory: float | FloatArray = 1.0,
    ) -> Any:
        """Roofline time of a kernel, seconds: ``max(flops / (peak_flops * compute), nbytes /
        (mem_bandwidth * memory)) + launch_overhead``, ``compute`` and ``memory`` the kernel's
        efficiencies (:meth:`op_efficiency`). Floats give a float; arrays give an array
        (broadcast)."""
        time = np.maximum(
            np.divide(flops, np.multiply(self.peak_flops, compute)),
            np.divide(nbytes, np.multiply(self.mem_bandwidth, memory)),
        )
        time = time + self.launch_overhead
        return float(time) if np.ndim(time) == 0 else time


@dataclass(frozen=True, eq=False)
class Cluster:
    """Devices and the directed links between them (the contract is in the module docstring).

    Equality and hashing go by :attr:`fingerprint` (content), so a cluster can key a cache.

    Attributes:
        name: cluster name.
        devices: the devices; a device's index here is its index in decisions.
        bandwidth: ``(D, D)`` bytes/s of the directed link ``src -> dst``; diagonal ``inf``.
        latency: ``(D, D)`` seconds of each link; diagonal ``0``.
        description: free text; not part of the fingerprint.
        contention: ``"link"`` (one transfer at a time per link) or ``"none"``.
        route: ``"direct"`` or ``"via-host"`` (transfers between non-host devices in two hops
            through the host's memory).
        host: under ``route="via-host"``, the name of the device that relays; ``None`` there
            means the first device of kind :data:`HOST_KIND` (the name is filled in). Must be
            ``None`` under ``route="direct"``.
        send: ``"per-device"`` (one send per destination device) or ``"per-consumer"`` (one per
            consuming op).
        copies: ``"charged"`` (a received copy uses the receiver's memory) or ``"free"``.
        dispatch: ``"priority"`` (an idle device starts its ready kernel of lowest priority) or
            ``"fcfs"`` (the one ready first; priorities ignored).
        colocation: ``"hint"`` (colocation groups are a hint) or ``"enforce"`` (each group runs
            on one device).
        contiguous: whether a placement must be a contiguous split of the block DAG (module
            docstring).
        op_times: how ops without a measured time are priced: ``"roofline"``, ``"calibrated"``
            (every device has an efficiency table) or ``"learned"`` (module docstring).
        op_model: the op model file of ``op_times="learned"`` (:mod:`graphopt.op_model`).

    The model options are described in the module docstring; their defaults leave the cluster,
    its fingerprint and every simulated figure as they were before the options existed.
    The link arrays are copied, their diagonals reset, and made read-only.

    Raises:
        ValueError: no devices, more than :data:`MAX_DEVICES`, duplicate device names, link
            arrays of the wrong shape, an off-diagonal bandwidth not finite and positive /
            latency not finite and >= 0, an unknown model option value, ``via-host`` without a
            host device, or a ``host`` that is no device of the cluster or is given without
            ``via-host``.
    """

    name: str
    devices: tuple[Device, ...]
    bandwidth: FloatArray
    latency: FloatArray
    description: str = ""
    contention: str = "link"
    route: str = "direct"
    host: str | None = None
    send: str = "per-device"
    copies: str = "charged"
    dispatch: str = "priority"
    colocation: str = "hint"
    contiguous: bool = False
    op_times: str = "roofline"
    """How ops without a measured time are priced: :data:`OP_TIMES` (module docstring)."""
    op_model: str | None = None
    """The op model file of ``op_times: learned``; ``None`` otherwise."""

    def __post_init__(self) -> None:
        devices = tuple(self.devices)
        if not devices or not all(isinstance(d, Device) for d in devices):
            raise ValueError(f"cluster {self.name!r}: devices must be a non-empty list of Device")
        if len(devices) > MAX_DEVICES:
            raise _too_many(len(devices), f"cluster {self.name!r}")
        names = [d.name for d in devices]
        dup = _duplicates(names)
        if dup:
            raise ValueError(f"cluster {self.name!r}: duplicate device names {dup}; rename them")
        n = len(devices)
        for key, zero_ok in (("bandwidth", False), ("latency", True)):
            array = np.array(getattr(self, key), dtype=np.float64)
            if array.shape != (n, n):
                raise ValueError(
                    f"cluster {self.name!r}: {key} has shape {array.shape}; expected ({n}, {n}), "
                    "one entry per ordered (src, dst) device pair"
                )
            with np.errstate(invalid="ignore"):  # NaN compares False: bad, as it should
                good = np.isfinite(array) & ((array >= 0) if zero_ok else (array > 0))
            np.fill_diagonal(good, True)
            if not good.all():  # the first bad link, in row-major order, raises
                i, j = np.argwhere(~good)[0]
                where = f"cluster {self.name!r}: link {names[i]}->{names[j]}"
                _figure(array[i, j], where, key, allow_zero=zero_ok)
            np.fill_diagonal(array, np.inf if key == "bandwidth" else 0.0)
            object.__setattr__(self, key, _readonly(array))
        object.__setattr__(self, "devices", devices)
        self._check_model(names)
        self._check_op_times()

    def _check_op_times(self) -> None:
        """Check ``op_times`` and ``op_model`` (``__post_init__``)."""
        where = f"cluster {self.name!r}"
        if self.op_times not in OP_TIMES:
            raise ValueError(
                f"{where}: unknown op_times {self.op_times!r}; choose one of: {', '.join(OP_TIMES)}"
            )
        if self.op_model is not None and not isinstance(self.op_model, str):
            raise ValueError(
                f"{where}: op_model must be the path of an op model file (a string), got "
                f"{self.op_model!r}"
            )
        if self.op_times == "learned" and not self.op_model:
            raise ValueError(
                f"{where}: op_times: learned needs op_model: FILE, a model trained by "
                "graphopt costmodel ops train GRAPH... --cluster CLUSTER.yaml -o MODEL.json"
            )
        if self.op_times != "learned" and self.op_model is not None:
            raise ValueError(
                f"{where}: op_model is only read with op_times: learned; remove it or set "
                "op_times: learned"
            )
        bare = [d.name for d in self.devices if not d.efficiency]
        if self.op_times == "calibrated" and bare:
            raise ValueError(
                f"{where}: op_times: calibrated, but device(s) {_some(bare)} have no efficiency "
                "table; fit one with graphopt calibrate GRAPH... --cluster FILE -o FIT.yaml"
            )

    def _check_model(self, names: list[str]) -> None:
        """Check the model options and fill in the host (``__post_init__``)."""
        where = f"cluster {self.name!r}"
        for key, choices in MODEL_OPTIONS.items():
            value = getattr(self, key)
            if not isinstance(value, str) or value not in choices:
                raise ValueError(
                    f"{where}: unknown {key} {value!r}; choose one of: {', '.join(choices)}"
                )
        if not isinstance(self.contiguous, bool):
            raise ValueError(f"{where}: contiguous must be true or false, got {self.contiguous!r}")
        if self.route == "direct":
            if self.host is not None:
                raise ValueError(
                    f"{where}: host {self.host!r} is only used with route: via-host; "
                    "remove it or set route: via-host"
                )
            return
        if self.host is None:
            cpus = [d.name for d in self.devices if d.kind == HOST_KIND]
            if not cpus:
                raise ValueError(
                    f"{where}: route 'via-host' needs a host device, and no device is of kind "
                    f"{HOST_KIND!r} (devices: {_some(names)}); name one with `host: <device name>`"
                    " or set route: direct"
                )
            object.__setattr__(self, "host", cpus[0])
        elif self.host not in names:
            raise ValueError(
                f"{where}: host {self.host!r} is no device of the cluster; "
                f"devices are: {_some(names)}"
            )

    @property
    def host_index(self) -> int:
        """The index of the device that relays transfers under ``route: via-host``; -1 under
        ``route: direct``."""
        if self.route == "direct":
            return -1
        assert self.host is not None  # filled in by __post_init__
        return [d.name for d in self.devices].index(self.host)

    @cached_property
    def model(self) -> ClusterModel:
        """The model options decoded once (:class:`~graphopt.typing.ClusterModel`): the one
        place that reads their strings; the simulator, the estimates and the heuristics read
        this."""
        return ClusterModel(
            queued=self.contention == "link",
            host=self.host_index,
            per_consumer=self.send == "per-consumer",
            charge_copies=self.copies == "charged",
            fcfs=self.dispatch == "fcfs",
            enforce_colocation=self.colocation == "enforce",
            op_times=self.op_times,
        )

    def model_options(self) -> dict[str, str | bool]:
        """The model options that differ from their defaults, with ``host`` under ``via-host``
        and ``contiguous`` when true: what the file format writes and the fingerprint hashes
        (nothing for a default cluster)."""
        out: dict[str, str | bool] = {
            key: getattr(self, key)
            for key, choices in MODEL_OPTIONS.items()
            if getattr(self, key) != choices[0]
        }
        if self.route == "via-host":
            assert self.host is not None  # filled in by __post_init__
            out["host"] = self.host
        if self.contiguous:
            out["contiguous"] = True
        return out

    # ------------------------------------------------------------------ views
    @property
    def num_devices(self) -> int:
        return len(self.devices)

    @cached_property
    def kinds(self) -> tuple[str, ...]:
        """Distinct device kinds, in device order of first appearance."""
        return tuple(dict.fromkeys(d.kind for d in self.devices))

    @cached_property
    def kind_index(self) -> IntArray:
        """``(D,)`` index of each device's kind in :attr:`kinds`."""
        index = {kind: k for k, kind in enumerate(self.kinds)}
        return _readonly(np.array([index[d.kind] for d in self.devices], dtype=np.int64))

    def _column(self, key: str) -> FloatArray:
        return _readonly(np.array([getattr(d, key) for d in self.devices], dtype=np.float64))

    @cached_property
    def peak_flops(self) -> FloatArray:
        """``(D,)`` peak FLOP/s per device."""
        return self._column("peak_flops")

    @cached_property
    def mem_bandwidth(self) -> FloatArray:
        """``(D,)`` memory bandwidth per device, bytes/s."""
        return self._column("mem_bandwidth")

    @cached_property
    def memory(self) -> FloatArray:
        """``(D,)`` memory capacity per device, bytes."""
        return self._column("memory")

    @cached_property
    def launch_overhead(self) -> FloatArray:
        """``(D,)`` seconds of launch overhead per kernel, per device."""
        return self._column("launch_overhead")

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the name, devices, model options and link arrays: equal content, equal
        hash."""
        # A device without an efficiency table, and a cluster with the default model options,
        # hash as before the table and the options existed.
        rows = [astuple(d) if d.efficiency else astuple(d)[:-1] for d in self.devices]
        options = self.model_options()
        if self.op_times != "roofline":  # the default hashes as before op_times existed
            options = {**options, "op_times": self.op_times, "op_model": self.op_model or ""}
        h = hashlib.sha256(json.dumps([self.name, rows, *([options] if options else [])]).encode())
        h.update(self.bandwidth.tobytes())
        h.update(self.latency.tobytes())
        return h.hexdigest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cluster) and self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        """The file-format dict (module docstring), lossless: devices written out in full, the
        most common link as ``links.default``, every other link in ``links.pairs``."""
        names, n = [d.name for d in self.devices], self.num_devices
        bw, lat = self.bandwidth, self.latency
        links: dict[str, Any] = {}
        pairs = []
        if n > 1:
            off = ~np.eye(n, dtype=bool)
            figures = np.stack([bw[off], lat[off]], axis=1)  # row-major (src, dst) order
            # The default: the most common (bandwidth, latency); on a tie the first in order.
            values, first, counts = np.unique(
                figures, axis=0, return_index=True, return_counts=True
            )
            best = np.flatnonzero(counts == counts.max())
            default = values[best[np.argmin(first[best])]]
            links["default"] = {"bandwidth": float(default[0]), "latency": float(default[1])}
            same = (bw == bw.T) & (lat == lat.T)
            below = np.tril(off)  # src > dst: written with its reverse when symmetric
            skip = ((bw == default[0]) & (lat == default[1])) | (same & below)
            for i, j in np.argwhere(off & ~skip):  # skip: the default covers it, or its reverse
                both = bool(same[i, j])
                pair = {"src": names[i], "dst": names[j]}
                pair.update(bandwidth=float(bw[i, j]), latency=float(lat[i, j]))
                pairs.append({**pair, "bidirectional": both})
        if pairs:
            links["pairs"] = pairs
        devices = []
        for d in self.devices:
            entry: dict[str, Any] = {key: getattr(d, key) for key in _DEVICE_FIELDS}
            if d.efficiency:
                entry["efficiency"] = d.efficiency_table()
            devices.append(entry)
        return {
            "name": self.name,
            "description": self.description,
            "devices": devices,
            "links": links,
            **self.model_options(),
            **({"op_times": self.op_times} if self.op_times != "roofline" else {}),
            **({"op_model": self.op_model} if self.op_model is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cluster:
        """Build a cluster from the file-format dict (module docstring).

        Raises:
            ValueError: naming the culprit: unknown or missing keys, an unknown device preset, a
                bad ``count``, a bad figure, duplicate device names, a link naming an unknown
                device, a link given twice, an ordered pair left without figures, or a bad model
                option (an unknown value, ``via-host`` without a host device).
        """
        optional = ("description", "links", *MODEL_OPTIONS, "host", "contiguous")
        optional += ("op_times", "op_model")
        _check_keys(data, "cluster", ("name", "devices"), optional)
        devices = _parse_devices(data["devices"])
        bandwidth, latency = _parse_links(data.get("links"), [d.name for d in devices])
        description = str(data.get("description") or "")
        keys = (*MODEL_OPTIONS, "host", "contiguous", "op_times", "op_model")
        options = {key: data[key] for key in keys if key in data}
        return cls(
            str(data["name"]), devices, bandwidth, latency, description=description, **options
        )

    def save(self, path: str | os.PathLike) -> None:
        """Write :meth:`to_dict` to ``path``: YAML for ``.yaml`` / ``.yml``, else JSON; whole or
        not at all, missing folders made (:func:`graphopt.file_set.write_file`).

        Raises:
            ValueError: the file cannot be written (one line naming it); ``path`` is as it was.
        """
        path = Path(path)
        write_file(path, self.file_content(path.suffix))

    def file_content(self, suffix: str = ".json") -> str:
        """What :meth:`save` writes to a file ending in ``suffix``: YAML for ``.yaml`` /
        ``.yml`` (any case), else JSON."""
        if suffix.lower() in (".yaml", ".yml"):
            return yaml.safe_dump(self.to_dict(), sort_keys=False)
        return strict_json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def load(cls, path: str | os.PathLike) -> Cluster:
        """Read a cluster file (JSON for ``.json``, else YAML).

        Raises:
            ValueError: the file does not exist, does not parse, or is not a valid cluster.
        """
        path = Path(path)
        if not path.is_file():
            raise ValueError(
                f"cluster file '{path}' does not exist; give the path to a .yaml/.yml/.json "
                f"cluster file or a preset name ({', '.join(PRESETS)})"
            )
        is_json = path.suffix.lower() == ".json"
        try:
            text = path.read_text()
            data = json.loads(text) if is_json else yaml.safe_load(text)
        except (OSError, ValueError, yaml.YAMLError) as e:  # UnicodeDecodeError is a ValueError
            pickled = pickle_refusal(path, "give a cluster file (.yaml, .yml or .json)")
            if pickled is not None:
                raise ValueError(pickled) from None
            kind = "JSON" if is_json else "YAML"
            raise ValueError(f"cluster file '{path}' does not parse as {kind}: {e}") from e
        if isinstance(data, dict) and isinstance(data.get("op_model"), str):
            data["op_model"] = str(path.parent / data["op_model"])  # relative to the file
        try:
            return cls.from_dict(data)
        except ValueError as e:
            raise ValueError(f"cluster file '{path}': {e}") from e


def _parse_efficiency(table: object, where: str) -> tuple[tuple[str, float, float], ...]:
    """An efficiency table (a mapping, or :attr:`Device.efficiency`'s triples) as sorted
    ``(key, compute, memory)`` triples; ``ValueError`` naming ``where`` and the entry."""
    if table is None:
        return ()
    if isinstance(table, Mapping):
        items: list[tuple[object, object, object]] = []
        for key, entry in table.items():
            _check_keys(entry, f"{where}: efficiency[{key!r}]", (), ("compute", "memory"))
            assert isinstance(entry, Mapping)
            items.append((key, entry.get("compute", 1.0), entry.get("memory", 1.0)))
    elif isinstance(table, (tuple, list)) and all(
        isinstance(t, (tuple, list)) and len(t) == 3 for t in table
    ):
        items = [(t[0], t[1], t[2]) for t in table]
    else:
        raise ValueError(
            f"{where}: efficiency must be a mapping of op type or class to "
            f"{{compute: c, memory: m}}, got {type(table).__name__}"
        )
    if len(items) > MAX_EFFICIENCY_ENTRIES:
        raise ValueError(
            f"{where}: efficiency has {len(items):,} entries; the limit is "
            f"{MAX_EFFICIENCY_ENTRIES:,} (one per op type or class)"
        )
    out = []
    for key, compute, memory in items:
        if not isinstance(key, str) or not key:
            raise ValueError(f"{where}: efficiency keys must be non-empty strings, got {key!r}")
        name = f"efficiency[{key!r}]"
        out.append(
            (
                key,
                _figure(compute, where, f"{name}.compute"),
                _figure(memory, where, f"{name}.memory"),
            )
        )
    keys = [key for key, _, _ in out]
    dup = _duplicates(keys)
    if dup:
        raise ValueError(f"{where}: efficiency lists {dup} more than once")
    return tuple(sorted(out))


def _parse_devices(entries: object) -> tuple[Device, ...]:
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"devices must be a non-empty list of device entries, got {entries!r}")
    devices: list[Device] = []
    for k, entry in enumerate(entries):
        optional = (*_DEVICE_FIELDS[1:], "efficiency", "count", "preset")
        _check_keys(entry, f"devices[{k}]", ("name",), optional)
        where = f"devices[{k}] ({entry['name']!r})"
        figures: dict[str, Any] = {}
        if "preset" in entry:
            if entry["preset"] not in DEVICE_SPECS:
                raise ValueError(
                    f"{where}: unknown device preset {entry['preset']!r}; "
                    f"choose one of: {', '.join(DEVICE_SPECS)}"
                )
            figures.update(DEVICE_SPECS[entry["preset"]])
        figures.update((key, entry[key]) for key in _DEVICE_FIELDS[1:] if key in entry)
        missing = [key for key in _DEVICE_FIELDS[1:] if key not in figures]
        if missing:
            raise ValueError(
                f"{where}: missing field(s) {missing}; give them, or a `preset` "
                f"(one of: {', '.join(DEVICE_SPECS)})"
            )
        if "efficiency" in entry:
            figures["efficiency"] = _parse_efficiency(entry["efficiency"], where)
        count = entry.get("count")
        if count is None:
            count = 1
        elif not (isinstance(count, int) and not isinstance(count, bool) and count >= 1):
            raise ValueError(f"{where}: count must be a positive integer, got {count!r}")
        if len(devices) + count > MAX_DEVICES:  # before building a single one of them
            raise _too_many(len(devices) + count, f"{where}: devices up to here")
        if "count" in entry:
            names = [f"{entry['name']}{i}" for i in range(count)]
        else:
            names = [entry["name"]]
        devices += [Device(name=name, **figures) for name in names]
    names = [d.name for d in devices]
    dup = _duplicates(names)
    if dup:  # checked here too, so that links naming the devices do not fail first
        raise ValueError(f"devices: duplicate device names {dup}; make every name unique")
    return tuple(devices)


def _parse_links(links: Any, names: list[str]) -> tuple[FloatArray, FloatArray]:
    n = len(names)
    bandwidth, latency = np.full((n, n), np.nan), np.full((n, n), np.nan)
    links = {} if links is None else links
    _check_keys(links, "links", (), ("default", "pairs"))
    if "default" in links:
        default = links["default"]
        _check_keys(default, "links.default", ("bandwidth", "latency"), ())
        bandwidth[:] = _figure(default["bandwidth"], "links.default", "bandwidth")
        latency[:] = _figure(default["latency"], "links.default", "latency", allow_zero=True)
    pairs = links.get("pairs") or []
    if not isinstance(pairs, list):
        raise ValueError(f"links.pairs must be a list of pair entries, got {pairs!r}")
    index = {name: i for i, name in enumerate(names)}
    seen: set[tuple[int, int]] = set()
    for k, pair in enumerate(pairs):
        where = f"links.pairs[{k}]"
        _check_keys(pair, where, ("src", "dst", "bandwidth", "latency"), ("bidirectional",))
        for key in ("src", "dst"):
            if pair[key] not in index:
                raise ValueError(
                    f"{where}: unknown device name {pair[key]!r} in `{key}`; "
                    f"devices are: {_some(names)}"
                )
        i, j = index[pair["src"]], index[pair["dst"]]
        if i == j:
            raise ValueError(f"{where}: src and dst are both {names[i]!r}; a link joins two")
        both = pair.get("bidirectional", True)
        if not isinstance(both, bool):
            raise ValueError(f"{where}: bidirectional must be true or false, got {both!r}")
        bw = _figure(pair["bandwidth"], where, "bandwidth")
        lat = _figure(pair["latency"], where, "latency", allow_zero=True)
        for s, d in ((i, j), (j, i)) if both else ((i, j),):
            if (s, d) in seen:
                raise ValueError(
                    f"{where}: link {names[s]}->{names[d]} is given twice in links.pairs; "
                    "list each direction once"
                )
            seen.add((s, d))
            bandwidth[s, d], latency[s, d] = bw, lat
    np.fill_diagonal(bandwidth, np.inf)
    np.fill_diagonal(latency, 0.0)
    if np.isnan(bandwidth).any():
        i, j = np.argwhere(np.isnan(bandwidth))[0]
        raise ValueError(
            f"links: no figures for {names[i]}->{names[j]}; add links.default "
            "{bandwidth, latency} or a links.pairs entry for every ordered device pair"
        )
    return bandwidth, latency


# ---------------------------------------------------------------------------------- presets
@functools.cache
def _load_preset(name: str) -> Cluster:
    return Cluster.load(PRESET_DIR / f"{name}.yaml")


PRESETS: dict[str, Callable[[], Cluster]] = {
    path.stem: functools.partial(_load_preset, path.stem)
    for path in sorted(PRESET_DIR.glob("*.yaml"))
}
"""Preset name -> zero-argument function returning that (cached, immutable) :class:`Cluster`."""


def list_presets() -> dict[str, str]:
    """Preset name -> one-line description."""
    return {name: build().description for name, build in PRESETS.items()}


def get_cluster(spec: str | os.PathLike | Cluster) -> Cluster:
    """Resolve ``spec`` to a cluster.

    Args:
        spec: a :class:`Cluster` (returned as is), a preset name (see :func:`list_presets`), or a
            path to a ``.yaml`` / ``.yml`` / ``.json`` cluster file.

    Raises:
        ValueError: an unknown preset name (the valid ones are listed), or a bad cluster file.
        TypeError: ``spec`` is none of the above types.
    """
    if isinstance(spec, Cluster):
        return spec
    if isinstance(spec, str) and spec in PRESETS:
        return PRESETS[spec]()
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"cluster spec must be a Cluster, preset name or path, got {spec!r}")
    if isinstance(spec, os.PathLike) or Path(spec).suffix.lower() in (".yaml", ".yml", ".json"):
        return Cluster.load(spec)
    raise ValueError(
        f"unknown cluster preset {spec!r}; choose one of: {', '.join(PRESETS)} "
        "(or give a path to a .yaml/.json cluster file)"
    )
