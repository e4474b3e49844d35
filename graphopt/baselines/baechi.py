"""Baechi's memory-constrained placers m-TOPO and m-ETF (Jeon, Cai, Jeon, Byun, Kim, Song and Gu,
"Baechi: Fast Device Placement of Machine Learning Graphs", ACM SoCC 2020).

Both place ops one at a time and never put an op on a device whose memory it would overflow:

- **m-TOPO** walks the ops in topological order and fills the devices one after the other, moving
  to the next device once the current one holds its share of the graph's memory (the charge below
  for parameters and outputs, without copies, split in proportion to device capacity: ``total /
  D`` on a homogeneous cluster). An op that does not fit on the current device goes to the next
  one with room (wrapping around to the first).
- **m-ETF** is ETF list scheduling (Hwang, Chow, Anger and Lee, SIAM J. Comput. 1989): among all
  (ready op, device) pairs it repeatedly takes the one with the earliest start time, ties by the
  op's static level (longest path of mean op times to a sink, larger first), then op index, then
  device index. Start time = ``max(device free, data ready)``; data is ready when every producer
  has finished and, from another device, its tensor has crossed the link
  (``latency + bytes / bandwidth``, no link contention). A pair whose device lacks the memory is
  dropped for good when it comes up (a device's charge only grows; a copy placed there later
  could shrink the op's demand, so this errs on the safe side); an op that fits on no device makes
  the placement fail.

**Memory model.** Placing op ``v`` on device ``d`` charges ``d`` with ``param_bytes[v] +
alpha_d * (output_bytes[v] + new incoming copies)``, where an incoming copy of producer ``u``'s
output on ``d`` is charged once per ``(u, d)`` at the largest edge size from ``u`` to ``d``
(the simulator's transfer size). The charge never decreases, and ``d`` accepts ``v`` only while
its total stays within ``memory[d]``.

- ``alpha = 1`` is Baechi's model: parameters plus every activation the device ever holds. It
  bounds the simulator's peak (:mod:`graphopt.sim`, rule 8) under *any* priorities, so a
  placement found with ``alpha = 1`` is always memory-valid (without fusion: fusion moves ops to
  their kernel root's device).
- Training graphs often hold far more activation bytes in total than any device (``gnmt-8``:
  294 GB of outputs, 12 GB simulated peak on one V100), so ``alpha = 1`` can reject graphs that
  run. With ``activation_fraction=None`` (the default) the placers then relax ``alpha`` (the
  fraction of a device's activations assumed live at its peak) by halving it until the placement
  succeeds, and check the result with the simulator (default priorities, no fusion); on an OOM
  they tighten ``alpha`` on the overflowing device and retry (:data:`MAX_REPAIRS` times). A
  returned placement is therefore memory-valid in the simulator with the default schedule (other
  priorities change the peak; only ``alpha = 1`` covers them all); when none is found they raise
  ``ValueError`` saying why and by how much the graph misses: its parameters alone (an op's over
  the largest device, or all of them over the cluster's memory: no relaxing is tried then), its
  parameters not packing onto the devices even with no activations, or its activations (an op's
  output that does not fit beside its parameters, the received copies where they outweigh the
  op outputs, or the totals).

Colocation groups are not enforced (the simulator does not require them). The loops are compiled
with numba; m-ETF keeps per-device heaps so one step costs ``O(D log N)``, not a scan of every
ready op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit

from graphopt.baselines._costs import (
    descending_rank_order,
    longest_path_to_sink,
    op_times,
    positions,
)
from graphopt.compiled import INTERNAL
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import PreparedGraph
from graphopt.sim.heaps import fheap_pop, fheap_push, iheap_pop, iheap_push
from graphopt.sim.links import link_arrays, transfer_time
from graphopt.typing import Decision, FloatArray, IntArray

MAX_REPAIRS = 8
"""Simulator checks after relaxing ``alpha`` before the placers give up."""
MIN_ALPHA = 2.0**-16
"""Smallest activation fraction tried when relaxing ``alpha``."""


@njit(cache=True, inline="always")
def _demand(v, d, pred_ptr, pred_src, pred_bytes, dev, copy, params, out, alpha):
    """Bytes that placing ``v`` on ``d`` adds to ``d`` (module docstring)."""
    act = out[v]
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        u = pred_src[e]
        if dev[u] != d and pred_bytes[e] > copy[u, d]:
            act += pred_bytes[e] - copy[u, d]
    return params[v] + alpha[d] * act


@njit(cache=True, inline="always")
def _commit(v, d, pred_ptr, pred_src, pred_bytes, dev, copy, used, amount):
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        u = pred_src[e]
        if dev[u] != d and pred_bytes[e] > copy[u, d]:
            copy[u, d] = pred_bytes[e]
    used[d] += amount
    dev[v] = d


@njit(cache=True, inline="always")
def _fits(used, amount, capacity, d):
    return used[d] + amount <= capacity[d]


@njit(cache=True)
def _m_topo_core(pred_ptr, pred_src, pred_bytes, params, out, alpha, capacity, target):
    """Returns ``(dev, failed op or -1, its smallest shortfall in bytes)``."""
    n = len(params)
    num_dev = len(capacity)
    dev = np.full(n, -1, dtype=np.int64)
    copy = np.zeros((n, num_dev), dtype=np.float64)
    used = np.zeros(num_dev, dtype=np.float64)
    load = np.zeros(num_dev, dtype=np.float64)  # the share counted against `target`: no copies
    k = 0
    for v in range(n):
        if k < num_dev - 1:
            own = params[v] + alpha[k] * out[v]
            if load[k] > 0.0 and load[k] + own > target[k]:
                k += 1  # the current device holds its share: move on
        chosen = -1
        chosen_amount = 0.0
        shortfall = np.inf
        for t in range(num_dev):
            d = (k + t) % num_dev
            amount = _demand(v, d, pred_ptr, pred_src, pred_bytes, dev, copy, params, out, alpha)
            if _fits(used, amount, capacity, d):
                chosen = d
                chosen_amount = amount
                break
            shortfall = min(shortfall, used[d] + amount - capacity[d])
        if chosen < 0:
            return dev, v, shortfall
        _commit(v, chosen, pred_ptr, pred_src, pred_bytes, dev, copy, used, chosen_amount)
        load[chosen] += params[v] + alpha[chosen] * out[v]
    return dev, -1, 0.0


@njit(cache=True, **INTERNAL)
def _push_ready(w, pred_ptr, pred_src, pred_bytes, placed, links, level_pos, pending):
    """Queue the ready op ``w`` on every device's pending heap, keyed by its data-ready time there
    (``placed`` is ``(dev, finish)``, ``links`` ``(latency, bandwidth)``, ``pending`` the heaps'
    ``(time, tie, op, base, size)``). A function of its own, not a closure: numba inlines a
    closure at every call, typing and lowering it again (graphopt.compiled)."""
    dev, finish = placed
    latency, bandwidth = links
    p_time, p_tie, p_op, base, p_size = pending
    for d in range(p_size.shape[0]):
        ready = 0.0
        for e in range(pred_ptr[w], pred_ptr[w + 1]):
            u = pred_src[e]
            arrival = finish[u]
            if dev[u] != d:
                arrival += transfer_time(latency, bandwidth, dev[u], d, pred_bytes[e])
            ready = max(ready, arrival)
        fheap_push(p_time, p_tie, p_op, base, p_size, d, ready, level_pos[w], w)


@njit(cache=True)
def _m_etf_core(
    succ_ptr,
    succ_dst,
    pred_ptr,
    pred_src,
    pred_bytes,
    times,
    latency,
    bandwidth,
    level_pos,
    params,
    out,
    alpha,
    capacity,
):
    """ETF with memory; returns ``(dev, start, failed op or -1, its smallest shortfall)``.

    Per device ``d``: ``pending`` is a heap of ready ops keyed by ``(data-ready time on d, level
    position)``; ops whose data is ready by the time ``d`` is free move to ``avail``, keyed by
    level position alone (they would all start when ``d`` is free). Entries are deleted lazily: an
    op already placed, or one that does not fit on ``d`` (the charge on ``d`` only grows), is
    dropped when it reaches the top.
    """
    n, num_dev = times.shape
    dev = np.full(n, -1, dtype=np.int64)
    start = np.zeros(n, dtype=np.float64)
    finish = np.zeros(n, dtype=np.float64)
    copy = np.zeros((n, num_dev), dtype=np.float64)
    used = np.zeros(num_dev, dtype=np.float64)
    free = np.zeros(num_dev, dtype=np.float64)
    missing = np.zeros(n, dtype=np.int64)  # producers not yet placed
    for v in range(n):
        missing[v] = pred_ptr[v + 1] - pred_ptr[v]
    rejected = np.zeros(n, dtype=np.int64)  # devices that dropped the op for lack of memory
    shortfall = np.full(n, np.inf)
    op_at = np.empty(n, dtype=np.int64)
    for v in range(n):
        op_at[level_pos[v]] = v
    cap = max(n, 1)
    base = np.arange(num_dev, dtype=np.int64) * cap
    p_time = np.empty(num_dev * cap, dtype=np.float64)
    p_tie = np.empty(num_dev * cap, dtype=np.int64)
    p_op = np.empty(num_dev * cap, dtype=np.int64)
    p_size = np.zeros(num_dev, dtype=np.int64)
    a_key = np.empty(num_dev * cap, dtype=np.int64)
    a_size = np.zeros(num_dev, dtype=np.int64)

    pending = (p_time, p_tie, p_op, base, p_size)
    placed = (dev, finish)
    links = (latency, bandwidth)
    for v in range(n):
        if missing[v] == 0:
            _push_ready(v, pred_ptr, pred_src, pred_bytes, placed, links, level_pos, pending)
    for _ in range(n):
        best_d = -1
        best_t = np.inf
        best_pos = n
        best_amount = 0.0
        best_from_avail = False
        for d in range(num_dev):
            # data-ready by the time d is free: those all start at free[d]
            while p_size[d] > 0 and p_time[base[d]] <= free[d]:
                w = fheap_pop(p_time, p_tie, p_op, base, p_size, d)
                if dev[w] < 0:
                    iheap_push(a_key, base, a_size, d, level_pos[w])
            cand = -1
            cand_t = 0.0
            from_avail = False
            amount = 0.0
            while a_size[d] > 0:
                w = op_at[a_key[base[d]]]
                if dev[w] >= 0:
                    iheap_pop(a_key, base, a_size, d)
                    continue
                amount = _demand(
                    w, d, pred_ptr, pred_src, pred_bytes, dev, copy, params, out, alpha
                )
                if _fits(used, amount, capacity, d):
                    cand, cand_t, from_avail = w, free[d], True
                    break
                iheap_pop(a_key, base, a_size, d)
                rejected[w] += 1
                shortfall[w] = min(shortfall[w], used[d] + amount - capacity[d])
                if rejected[w] == num_dev:
                    return dev, start, w, shortfall[w]
            if cand < 0:
                while p_size[d] > 0:
                    w = p_op[base[d]]
                    if dev[w] >= 0:
                        fheap_pop(p_time, p_tie, p_op, base, p_size, d)
                        continue
                    amount = _demand(
                        w, d, pred_ptr, pred_src, pred_bytes, dev, copy, params, out, alpha
                    )
                    if _fits(used, amount, capacity, d):
                        cand, cand_t = w, p_time[base[d]]
                        break
                    fheap_pop(p_time, p_tie, p_op, base, p_size, d)
                    rejected[w] += 1
                    shortfall[w] = min(shortfall[w], used[d] + amount - capacity[d])
                    if rejected[w] == num_dev:
                        return dev, start, w, shortfall[w]
            if cand >= 0 and (cand_t < best_t or (cand_t == best_t and level_pos[cand] < best_pos)):
                best_d, best_t, best_pos = d, cand_t, level_pos[cand]
                best_amount, best_from_avail = amount, from_avail
        if best_d < 0:  # every remaining op was dropped by some device; cannot happen
            return dev, start, -2, 0.0
        d = best_d
        if best_from_avail:
            v = op_at[iheap_pop(a_key, base, a_size, d)]
        else:
            v = fheap_pop(p_time, p_tie, p_op, base, p_size, d)
        _commit(v, d, pred_ptr, pred_src, pred_bytes, dev, copy, used, best_amount)
        start[v] = best_t
        finish[v] = best_t + times[v, d]
        free[d] = finish[v]
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ_dst[e]
            missing[w] -= 1
            if missing[w] == 0:
                _push_ready(w, pred_ptr, pred_src, pred_bytes, placed, links, level_pos, pending)
    return dev, start, -1, 0.0


@dataclass(frozen=True)
class _Inputs:
    """Per-(graph, cluster) arrays shared by the attempts of one placer call."""

    graph: CompGraph
    cluster: Cluster
    pred_ptr: IntArray
    pred_src: IntArray
    pred_bytes: FloatArray
    params: FloatArray
    out: FloatArray
    capacity: FloatArray

    @classmethod
    def of(cls, graph: CompGraph, cluster: Cluster) -> _Inputs:
        pred_ptr, pred_src, pred_edge = graph.predecessors_csr
        return cls(
            graph,
            cluster,
            pred_ptr,
            pred_src,
            np.ascontiguousarray(graph.edge_bytes[pred_edge]),
            np.ascontiguousarray(graph.param_bytes, dtype=np.float64),
            np.ascontiguousarray(graph.output_bytes, dtype=np.float64),
            np.ascontiguousarray(cluster.memory, dtype=np.float64),
        )


_Core = Callable[[_Inputs, FloatArray], tuple[IntArray, int, float]]
"""``(inputs, alpha per device) -> (placement, failed op or -1, shortfall in bytes)``."""


def _m_topo_attempt(inputs: _Inputs, alpha: FloatArray) -> tuple[IntArray, int, float]:
    total = float(inputs.params.sum()) + float(alpha.mean()) * float(inputs.out.sum())
    target = total * inputs.capacity / inputs.capacity.sum()
    dev, failed, short = _m_topo_core(
        inputs.pred_ptr,
        inputs.pred_src,
        inputs.pred_bytes,
        inputs.params,
        inputs.out,
        alpha,
        inputs.capacity,
        target,
    )
    return dev, int(failed), float(short)


def _m_etf_attempt_factory(inputs: _Inputs) -> _Core:
    graph, cluster = inputs.graph, inputs.cluster
    times = op_times(graph, cluster)
    latency, bandwidth = link_arrays(cluster)
    succ_ptr, succ_dst = graph.successors_csr
    level = longest_path_to_sink(succ_ptr, succ_dst, times.mean(axis=1), np.zeros(graph.num_edges))
    level_pos = positions(descending_rank_order(level))

    def attempt(inputs: _Inputs, alpha: FloatArray) -> tuple[IntArray, int, float]:
        dev, _, failed, short = _m_etf_core(
            succ_ptr,
            succ_dst,
            inputs.pred_ptr,
            inputs.pred_src,
            inputs.pred_bytes,
            times,
            latency,
            bandwidth,
            level_pos,
            inputs.params,
            inputs.out,
            alpha,
            inputs.capacity,
        )
        if failed == -2:  # pragma: no cover - internal invariant
            raise AssertionError("m-ETF ran out of candidates without a failing op")
        return dev, int(failed), float(short)

    return attempt


def _gb(nbytes: float) -> str:
    """Bytes for a message: GB to 3 decimals, or bytes where that would read 0.000 GB."""
    if 0 < abs(nbytes) < 5e5:
        return f"{nbytes:.3g} bytes"
    return f"{nbytes / 1e9:.3f} GB"


def _parameter_cause(inputs: _Inputs) -> str | None:
    """Why the graph's parameters alone cannot fit, whatever the placement; ``None`` if they
    could (as far as sizes tell)."""
    g, params, capacity = inputs.graph, inputs.params, inputs.capacity
    heavy = int(np.argmax(params))
    if params[heavy] > capacity.max():
        return (
            f"its parameters alone do not fit: op {g.op_names[heavy]!r} has "
            f"{_gb(params[heavy])} of parameters, more than the largest device's "
            f"{_gb(capacity.max())}"
        )
    if params.sum() > capacity.sum():
        return (
            f"its parameters alone do not fit: {_gb(params.sum())} of parameters against "
            f"{_gb(capacity.sum())} of device memory in all"
        )
    return None


def _received_copies(inputs: _Inputs, dev: IntArray, failed: int = -1) -> float:
    """Bytes of received copies that the memory model charges under the placement ``dev`` (``-1``:
    not placed yet): each producer's output once per other device that consumes it, at the largest
    edge there. With ``failed`` (the op that found no room), plus the least that op would receive
    on any device."""
    g, num_dev = inputs.graph, inputs.cluster.num_devices
    src, dst = g.edge_src, g.edge_dst
    cross = (dev[src] >= 0) & (dev[dst] >= 0) & (dev[src] != dev[dst])
    copy = np.zeros((g.num_ops, num_dev))
    np.maximum.at(copy, (src[cross], dev[dst[cross]]), g.edge_bytes[cross])
    total = float(copy.sum())
    if failed >= 0:
        lo, hi = inputs.pred_ptr[failed], inputs.pred_ptr[failed + 1]
        preds, nbytes = inputs.pred_src[lo:hi], inputs.pred_bytes[lo:hi]
        remote = [(dev[preds] >= 0) & (dev[preds] != d) for d in range(num_dev)]
        total += min(
            float(np.maximum(nbytes - copy[preds, d], 0.0)[remote[d]].sum()) for d in range(num_dev)
        )
    return total


def _activation_cause(inputs: _Inputs, copies: float) -> tuple[str, float]:
    """The activations as the cause, and their bytes: the op whose parameters and own output fit
    no device, if there is one; else received ``copies`` (bytes, :func:`_received_copies`) where
    they outweigh the op outputs; else the op outputs."""
    g, params, out, capacity = inputs.graph, inputs.params, inputs.out, inputs.capacity
    own = params + out  # an op's output is on its device while it runs, beside its parameters
    worst = int(np.argmax(own))
    outputs = float(out.sum())
    if own[worst] > capacity.max():
        return (
            f"its activations do not fit: op {g.op_names[worst]!r} needs its "
            f"{_gb(params[worst])} of parameters and its {_gb(out[worst])} output on one device, "
            f"more than the largest device's {_gb(capacity.max())}"
        ), outputs
    if copies > outputs:
        return (
            f"its parameters ({_gb(params.sum())}) fit, its activations do not: mostly received "
            f"copies ({_gb(copies)} of tensors copied from another device, charged to the device "
            f"that receives them, against {_gb(outputs)} of op outputs)"
        ), outputs + copies
    return (
        f"its parameters ({_gb(params.sum())}) fit, its activations ({_gb(outputs)} of op "
        "outputs) do not"
    ), outputs


def _no_fit_error(
    name: str,
    core: _Core,
    inputs: _Inputs,
    alpha: float,
    dev: IntArray,
    failed: int,
    short: float,
) -> str:
    """The message of a placer that found no op-by-op placement (``dev``, ``-1`` for the ops not
    placed): the real cause first (the parameters alone, their packing, or the activations), then
    the op that found no room."""
    g, c = inputs.graph, inputs.cluster
    params, have = float(inputs.params.sum()), float(inputs.capacity.sum())
    where = (
        f"op {g.op_names[failed]!r} fits on no device (short by {_gb(short)} on the device "
        "closest to taking it)"
    )
    with_alpha = f"{where} with activation fraction {alpha:g}"
    cause = _parameter_cause(inputs)
    if cause is not None:
        with_alpha = where  # the activations play no part
    else:
        _, bare, bare_short = core(inputs, np.zeros(c.num_devices))
        if bare >= 0:  # no room for the parameters even with no activations at all
            cause = (
                f"its parameters ({_gb(params)}, against {_gb(have)} of device memory in all) "
                f"do not pack onto the devices: with no activations at all, op "
                f"{g.op_names[bare]!r} fits on no device (short by {_gb(bare_short)})"
            )
        else:
            activations, activation_bytes = _activation_cause(
                inputs, _received_copies(inputs, dev, failed)
            )
            if alpha <= MIN_ALPHA:  # relaxed as far as it goes
                cause = (
                    f"{activations}: the parameters fill the devices, leaving no room for "
                    f"activations; even with activation fraction {alpha:g}, {where}"
                )
            else:
                need = params + alpha * activation_bytes
                cause = (
                    f"{activations}: {with_alpha}; the graph needs {_gb(need)} (parameters "
                    f"{_gb(params)} + {alpha:g} x activations {_gb(activation_bytes)}) against "
                    f"{_gb(have)} of device memory"
                )
        with_alpha = ""  # said in the cause
    return (
        f"{name}: graph {g.name!r} does not fit on cluster {c.name!r}: {cause}"
        f"{'; ' + with_alpha if with_alpha else ''}; use a cluster with more or larger devices"
    )


def _place_within_memory(
    name: str,
    core: _Core,
    inputs: _Inputs,
    activation_fraction: float | None,
    verify: bool,
) -> IntArray:
    """Run ``core`` under Baechi's model, relaxing it and checking with the simulator as the
    module docstring describes."""
    g, c = inputs.graph, inputs.cluster
    num_dev = c.num_devices
    if g.num_ops == 0:
        return np.zeros(0, dtype=np.int64)
    if activation_fraction is not None and not 0.0 <= activation_fraction <= 1.0:
        raise ValueError(
            f"activation_fraction must be in [0, 1] or None, got {activation_fraction}"
        )
    alpha_value = 1.0 if activation_fraction is None else float(activation_fraction)
    alpha = np.full(num_dev, alpha_value)
    dev, failed, short = core(inputs, alpha)
    if failed >= 0 and (activation_fraction is not None or not verify):
        raise ValueError(_no_fit_error(name, core, inputs, alpha_value, dev, failed, short))
    if failed < 0 and (alpha_value == 1.0 or not verify):
        return dev  # Baechi's sound model (or an unchecked explicit fraction)
    if failed >= 0 and _parameter_cause(inputs) is not None:  # relaxing cannot help
        raise ValueError(_no_fit_error(name, core, inputs, alpha_value, dev, failed, short))
    while failed >= 0 and alpha_value > MIN_ALPHA:  # relax: assume less of the activations live
        alpha_value /= 2.0
        alpha = np.full(num_dev, alpha_value)
        dev, failed, short = core(inputs, alpha)
    if failed >= 0:
        raise ValueError(_no_fit_error(name, core, inputs, alpha_value, dev, failed, short))

    prepared = PreparedGraph(g, c)
    for _ in range(MAX_REPAIRS + 1):
        measurement = prepared.evaluate(Decision(placement=dev))
        over = measurement.peak_memory - inputs.capacity
        if measurement.valid:
            return dev
        # tighten alpha on every overflowing device, in proportion to the overflow
        for d in np.flatnonzero(over > 0):
            factor = max(1.25, float(measurement.peak_memory[d] / inputs.capacity[d]))
            alpha[d] = min(1.0, alpha[d] * factor)
        new_dev, failed, short = core(inputs, alpha)
        if failed >= 0:
            break
        dev = new_dev
    worst = int(np.argmax(over))
    last = (
        f"(last one: device {worst} peaks {_gb(over[worst])} above its "
        f"{_gb(inputs.capacity[worst])})"
    )
    cause = _parameter_cause(inputs)
    if cause is None and not (inputs.out.any() or inputs.pred_bytes.any()):
        cause = (
            f"its parameters ({_gb(inputs.params.sum())}) fit the devices' "
            f"{_gb(inputs.capacity.sum())} in all, but the placements found overflow in the "
            f"simulator {last}"
        )
    elif cause is None:
        cause = (
            f"{_activation_cause(inputs, _received_copies(inputs, dev))[0]}; Baechi's model "
            "(all activations resident) needs more memory than the devices have, and the relaxed "
            f"placements overflow in the simulator {last}"
        )
    else:
        cause += f"; the placements found overflow in the simulator {last}"
    raise ValueError(
        f"{name}: found no memory-valid placement of graph {g.name!r} on cluster {c.name!r}: "
        f"{cause}; use a cluster with more or larger devices"
    )


def m_topo(
    graph: CompGraph,
    cluster: Cluster,
    *,
    activation_fraction: float | None = None,
    verify: bool = True,
) -> IntArray:
    """Baechi's m-TOPO placement (module docstring).

    Args:
        graph: the graph.
        cluster: the devices; their ``memory`` bounds the placement.
        activation_fraction: ``alpha`` of the memory model; ``None`` starts from 1 (Baechi's
            model) and relaxes it when the graph does not fit that way.
        verify: with ``activation_fraction=None``, check relaxed placements in the simulator (and
            repair them); ``False`` fails instead of relaxing.

    Raises:
        ValueError: the graph does not fit (the message says why and by how much).
    """
    inputs = _Inputs.of(graph, cluster)
    return _place_within_memory("m-TOPO", _m_topo_attempt, inputs, activation_fraction, verify)


def m_etf(
    graph: CompGraph,
    cluster: Cluster,
    *,
    activation_fraction: float | None = None,
    verify: bool = True,
) -> IntArray:
    """Baechi's m-ETF placement (module docstring); arguments as for :func:`m_topo`.

    Raises:
        ValueError: the graph does not fit (the message says why and by how much).
    """
    inputs = _Inputs.of(graph, cluster)
    core = _m_etf_attempt_factory(inputs)
    return _place_within_memory("m-ETF", core, inputs, activation_fraction, verify)
