"""The array bundles the compiled engine (:mod:`graphopt.sim.engine`) reads and writes.

Three named tuples, for ``N`` ops, ``E`` edges (numbered in successor order), ``D`` devices, ``C``
device classes, ``K`` kernels and ``T`` transfers:

- :class:`GraphArrays`, read-only, built once per prepared graph
  (:class:`~graphopt.sim.simulator.PreparedGraph`): the graph in CSR form (``int32`` ``succ_ptr``
  and ``pred_ptr`` ``[N+1]``, ``succ_dst`` and ``succ_to_pred`` ``[E]``), ``float64`` per-edge
  bytes ``[E]``, per-op FLOPs and bytes ``[N]``, modelled and measured op times per device class
  ``[N, C]``, every device's class (``int64 [D]``) and specs (``float64 [D]``), the links
  (``float64 [D, D]``), and the cluster's model options as scalars (``contention``, ``host``,
  ``per_consumer``, ``charge_copies``, ``fcfs``). :func:`succ_to_pred` computes its ``succ_to_pred`` field.
- :class:`Workspace`, scratch written by every call, sized once per graph by
  :meth:`Workspace.allocate` for at most ``T`` transfers (``T = E`` unless transfers are routed
  through a host, ``2 E`` then): rows of length ``N + 1`` (``op_int`` ``int32 [7, N+1]``,
  ``op_key`` ``int64 [2, N+1]``, ``op_float`` ``float64 [4, N+1]``), rows of length
  ``max(E, T) + 1`` (``edge_int`` ``int32 [10, T+1]``, ``edge_float`` ``float64 [7, T+1]``),
  ``edge_pair`` ``int32 [2, E+1, 2]``, per-op records ``op_rec`` ``int32 [N+1, 4]``, and per
  memory slot ``slot_int`` ``int32 [N+T+2, 2]`` and ``slot_float`` ``float64 [N+T+2]``.
- :class:`CoreResult`, one simulation's result: ``status``, ``culprit``, ``step`` and ``moved``
  scalars, ``float64 [D]`` busy times and peak memory, and ``int32`` / ``float64`` per-op
  (``[N]``), per-kernel (``[K]``) and per-transfer (``[T]``) views into the workspace.

numba compiles a named tuple to a struct, so inside the engine reading a field costs what reading
an argument does. At the border with Python they travel as plain tuples of the same fields, in the
same order (:func:`~graphopt.sim.engine.simulate_core` says why).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class GraphArrays(NamedTuple):
    """A graph on a cluster as the engine reads it, for ``N`` ops, ``E`` edges (numbered in
    successor order), ``D`` devices and ``C`` device classes. Built once per prepared graph
    (:class:`~graphopt.sim.simulator.PreparedGraph`) and passed whole: each function reads the
    fields it needs (numba compiles a named tuple to a struct, so a field costs no more than an
    argument)."""

    succ_ptr: np.ndarray
    """``int32 [N+1]``: op ``u``'s out-edges are ``succ_ptr[u]:succ_ptr[u+1]``."""
    succ_dst: np.ndarray
    """``int32 [E]``: every edge's consumer."""
    edge_bytes: np.ndarray
    """``float64 [E]``."""
    pred_ptr: np.ndarray
    """``int32 [N+1]``: op ``u``'s in-edges, in predecessor order."""
    succ_to_pred: np.ndarray
    """``int32 [E]``: every edge's position in predecessor order (:func:`succ_to_pred`)."""
    flops: np.ndarray
    """``float64 [N]``."""
    nbytes: np.ndarray
    """``float64 [N]``: bytes every op reads and writes."""
    out_bytes: np.ndarray
    """``float64 [N]``: bytes of every op's output."""
    param_bytes: np.ndarray
    """``float64 [N]``."""
    op_time: np.ndarray
    """``float64 [N, C]``: every op's time on a device of each class."""
    op_meas: np.ndarray
    """``float64 [N, C]``: every op's measured time on a device of each class (NaN if none)."""
    dev_class: np.ndarray
    """``int64 [D]``: every device's class. Devices of one class (kind and specs) share one column
    of ``op_time``: the same values in several times fewer bytes, read with one scattered access
    per op."""
    op_cinv: np.ndarray
    """``float64 [N, C]``: seconds per FLOP of every op on a device of each class:
    ``1 / (peak_flops * compute efficiency)`` (rule 3 of :mod:`graphopt.sim`)."""
    op_binv: np.ndarray
    """``float64 [N, C]``: seconds per byte of every op on a device of each class:
    ``1 / (mem_bandwidth * memory efficiency)``."""
    peak: np.ndarray
    """``float64 [D]``: peak FLOP/s."""
    bw: np.ndarray
    """``float64 [D]``: memory bandwidth, bytes/s."""
    launch: np.ndarray
    """``float64 [D]``: launch overhead per kernel, seconds."""
    capacity: np.ndarray
    """``float64 [D]``: memory, bytes."""
    link_bw: np.ndarray
    """``float64 [D, D]``: bytes/s from one device to another."""
    link_lat: np.ndarray
    """``float64 [D, D]``: seconds."""
    contention: bool
    """True: a link carries one transfer at a time (``contention: link``); False: any number
    (``none``). The model options are scalars, so that the compiled code branches on a value
    in a register (rules 5 and 8 of :mod:`graphopt.sim`)."""
    host: int
    """The device that relays transfers between other devices (``route: via-host``); -1 for
    ``route: direct``."""
    per_consumer: bool
    """True: one send per consuming op (``send: per-consumer``); False: per device."""
    charge_copies: bool
    """True: a received copy uses the receiver's memory (``copies: charged``)."""
    fcfs: bool
    """True: an idle device starts the kernel that became ready first (``dispatch: fcfs``);
    False: the one of lowest priority (``priority``)."""


# Rows of the workspace. Per-op rows have length N + 1, per-edge rows length E + 1.
_OP_INT_ROWS = 7  # kernel_of, roots, member_ptr, members, k_dev, need, kmark
_OP_KEY_ROWS = 2  # k_key, ready
_OP_FLOAT_ROWS = 4  # dur, k_start, k_end, k_alloc
# t_op, t_src, t_dst, t_link, l_tie, l_tid, then for routed sends t_parent, t_edge, t_clo, t_chi
_EDGE_INT_ROWS = 10
_EDGE_FLOAT_ROWS = 7  # t_bytes, t_dur, l_time, l_dur, l_bytes, t_start, t_end
_EDGE_PAIR_ROWS = 2  # e_cons, p_slot


class Workspace(NamedTuple):
    """Scratch arrays for :func:`~graphopt.sim.engine.simulate_core`, sized for one graph
    (:meth:`allocate`), reused across calls; the engine's functions take it whole and slice the
    rows they use.

    Not thread-safe: one workspace serves one call at a time.
    """

    op_int: np.ndarray
    op_key: np.ndarray
    op_float: np.ndarray
    edge_int: np.ndarray
    edge_float: np.ndarray
    # values read together are kept side by side (one cache line, not one per array):
    # pairs per edge, the event loop's four values per op, and per memory slot its
    # (count, device) (bytes apart: only read on release)
    edge_pair: np.ndarray
    op_rec: np.ndarray
    slot_int: np.ndarray
    slot_float: np.ndarray

    @classmethod
    def allocate(cls, num_ops: int, num_edges: int, num_transfers: int | None = None) -> Workspace:
        """Scratch for a graph of ``num_ops`` ops and ``num_edges`` edges on which a decision
        makes at most ``num_transfers`` transfers (default ``num_edges``: one per edge at most,
        unless transfers are routed in two hops)."""
        num_t = num_edges if num_transfers is None else max(num_transfers, num_edges)
        n1, e1, t1 = num_ops + 1, num_edges + 1, num_t + 1
        return cls(
            op_int=np.empty((_OP_INT_ROWS, n1), dtype=np.int32),
            op_key=np.empty((_OP_KEY_ROWS, n1), dtype=np.int64),
            op_float=np.empty((_OP_FLOAT_ROWS, n1), dtype=np.float64),
            edge_int=np.empty((_EDGE_INT_ROWS, t1), dtype=np.int32),
            edge_float=np.empty((_EDGE_FLOAT_ROWS, t1), dtype=np.float64),
            edge_pair=np.empty((_EDGE_PAIR_ROWS, e1, 2), dtype=np.int32),
            op_rec=np.empty((n1, 4), dtype=np.int32),
            slot_int=np.empty((n1 + t1, 2), dtype=np.int32),
            slot_float=np.empty(n1 + t1, dtype=np.float64),
        )


class CoreResult(NamedTuple):
    """What :func:`~graphopt.sim.engine.simulate_core` returns, for ``N`` ops, ``K`` kernels,
    ``T`` transfers and ``D`` devices. The arrays of length ``N``, ``K`` and ``T`` are views into
    the workspace, valid until its next use."""

    status: int
    """One of :mod:`graphopt.sim.engine`'s ``STATUS_*``."""
    culprit: int
    """The device out of memory, or -1."""
    step: float
    """The step time; ``inf`` for an illegal fusion."""
    busy: np.ndarray
    """``[D]``: every device's busy time."""
    peak_mem: np.ndarray
    """``[D]``: every device's peak memory, parameters included."""
    moved: float
    """Bytes moved over links."""
    kernel_of: np.ndarray
    """``[N]``: every op's kernel."""
    roots: np.ndarray
    """``[K]``: every kernel's root, its highest member."""
    member_ptr: np.ndarray
    """``[K+1]``: kernel ``k``'s ops are ``members[member_ptr[k]:member_ptr[k+1]]``."""
    members: np.ndarray
    """``[N]``: the kernels' ops, ascending within a kernel."""
    k_dev: np.ndarray
    """``[K]``: every kernel's device."""
    k_start: np.ndarray
    """``[K]``: every kernel's start (NaN if it never ran)."""
    k_end: np.ndarray
    """``[K]``: every kernel's end (NaN if it never ran)."""
    t_op: np.ndarray
    """``[T]``: every transfer's producer op."""
    t_src: np.ndarray
    """``[T]``: every transfer's source device."""
    t_dst: np.ndarray
    """``[T]``: every transfer's destination device."""
    t_bytes: np.ndarray
    """``[T]``: every transfer's bytes."""
    t_start: np.ndarray
    """``[T]``: every transfer's start."""
    t_end: np.ndarray
    """``[T]``: every transfer's end."""


def succ_to_pred(pred_edge_ids: np.ndarray) -> np.ndarray:
    """Position in predecessor order of every edge (edges are numbered in successor order, and
    ``pred_edge_ids`` lists them in predecessor order): the inverse permutation, as ``int32``."""
    out = np.empty(len(pred_edge_ids), dtype=np.int32)
    out[pred_edge_ids] = np.arange(len(pred_edge_ids), dtype=np.int32)
    return out
