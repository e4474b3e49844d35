"""What a transfer costs on the cluster's links, and where a list schedule books a busy interval:
the one home of both for the simulator, the estimates, the heuristics, the decoders and the cost
model's features.

**Link arrays** (:func:`link_arrays`), one contract for every caller, both ``(D, D)`` contiguous
float64 indexed ``[source device, destination device]``:

- ``latency``: seconds a send pays whatever its size; ``0`` on the diagonal;
- ``bandwidth``: bytes per second; ``inf`` on the diagonal (a tensor on its own device costs
  nothing).

``route="direct"`` gives the cluster's own links. ``route="via-host"`` folds in rule 5b of
:mod:`graphopt.sim`: a send between two devices that are both not the host ``h`` goes ``s -> h ->
t``, so its entry is the two hops one after the other, ``latency[s, h] + latency[h, t]`` and the
bandwidth whose inverse is ``1 / bandwidth[s, h] + 1 / bandwidth[h, t]`` (what the simulator's
relayed send takes when nothing else is in its way); sends to or from the host keep their link.
The default follows the cluster's ``route``. :func:`inverse_bandwidth` turns ``bandwidth`` into
seconds per byte (``0`` on the diagonal) for the callers that multiply.

**Relay rule** (:func:`first_hop`): where a send from ``s`` to ``t`` goes first, the host ``h``
under ``via-host`` when neither end is the host (the send is *relayed*: a second hop ``h -> t``
follows once the first has landed), else ``t`` itself. Written here only: the fold of
:func:`link_arrays`, the simulator's transfer plan (:func:`graphopt.sim.engine.plan_routes`),
:func:`modelled_ready` (HEFT-lc) and the estimate's
:func:`~graphopt.sim.estimate.contention_schedule` all ask it.

**Link model** (:func:`link_model`, :class:`~graphopt.typing.LinkModel`): the direct link arrays
and the link options (``contention``, ``route``, ``send`` of :attr:`Cluster.model
<graphopt.hardware.Cluster.model>`) in one value, built here and handed whole to two of the
three schedules that take a relayed send hop by hop: HEFT-lc (:func:`modelled_ready`) and the
estimate's ``contention_schedule``. Each prices every hop with :func:`hop_time` (dividing) or
:func:`hop_time_by_inverse` (multiplying): the seconds of the hop ``src -> dst`` of a send that
left ``origin`` (``src == origin`` for a direct send and for the first hop of a relayed one, the
host for its second hop). A new link option is a field of the link model, filled by
:func:`link_model` and applied by the hop prices (and, for the per-edge figures, by
:func:`link_arrays`' fold): these two schedules hand the value on unchanged. The third, the
simulator's engine, still reads the options as scalars of its
:class:`~graphopt.sim.arrays.GraphArrays` and prices each transfer of its plan with
:func:`transfer_time` (``_close_plan`` of :mod:`graphopt.sim.engine`): passed the link model
whole, its best time on ``bench/bench_sim.py``'s decision was up to 7% higher in interleaved
runs on a loaded machine, more than the 2% the simulator's speed may give up.

**Transfer time** of ``b`` bytes from ``s`` to ``t``: ``latency[s, t] + b / bandwidth[s, t]``,
``0`` when ``s == t``. Written here only, in two numerically distinct forms that the callers'
exact twins pin down:

- dividing by the bandwidth (:func:`transfer_time` compiled, :func:`transfer_times` elementwise):
  the simulator's engine, HEFT, HEFT-lc, the placement and step-wise decoders, m-ETF, the
  critical-path scheduler, the PipeDream planner and the exact (CP-SAT) model;
- multiplying by the inverse bandwidth (:func:`transfer_time_by_inverse` compiled,
  :func:`transfer_times_by_inverse` elementwise): the analytic estimates
  (:mod:`graphopt.sim.estimate`) and the cost model's features, where the hot loop multiplies.
  The two forms can differ in the last bit of a result.

:func:`mean_link_figures` gives the averages over the directed links, and
:func:`mean_transfer_times` the time HEFT's mean edge cost and Tarnawski et al.'s model price a
transfer of ``b`` bytes with: ``mean latency + b * mean(1 / bandwidth)`` (``0`` on one device).

**Gap search** (insertion policy of HEFT's earliest-finish-time rule): a resource ``r`` keeps its
busy intervals sorted by start in row ``r`` of two ``(R, capacity)`` tables ``starts``, ``ends``,
``count[r]`` of them. :func:`earliest_gap` finds where a new interval of ``duration`` seconds,
ready at ``ready``, starts: in the first idle gap before interval ``j`` (``first <= j < stop``)
that begins at or after ``ready`` and holds it, else after the last interval.
:func:`find_slot` is HEFT's bounded search (from the first interval starting at or after
``ready``, at most ``max_gaps`` gaps); :func:`book_interval` inserts the interval found. The
readable twins are in ``tests/graphopt/sim/test_links.py`` and must agree exactly.

Performance: the compiled functions are small ``numba`` functions that the callers' compiled
loops call; numba compiles them into the caller, so a call costs what the inline formula did.
The hop prices are inlined by numba itself (``inline="always"``), so that reading the link
model's fields costs what reading the arrays did.
They use ``error_model="numpy"`` (a division by a zero bandwidth gives ``inf``, no check per
division), as the simulator's engine does.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from graphopt.compiled import INTERNAL
from graphopt.hardware import Cluster
from graphopt.typing import ClusterModel, FloatArray, LinkModel

ROUTES = ("direct", "via-host")
"""The routes :func:`link_arrays` prices (``route`` of :mod:`graphopt.hardware`)."""


def link_arrays(cluster: Cluster, *, route: str | None = None) -> tuple[FloatArray, FloatArray]:
    """``(latency, bandwidth)`` of every directed link on ``route`` (module docstring).

    Args:
        cluster: the devices and links.
        route: ``"direct"`` (the cluster's own links), ``"via-host"`` (two hops through the host
            between non-host devices; needs a host) or ``None`` (the cluster's route,
            :attr:`~graphopt.typing.ClusterModel.host`).

    Returns:
        ``(latency, bandwidth)``: ``(D, D)`` contiguous float64 seconds and bytes/s, diagonals
        ``0`` and ``inf``.

    Raises:
        ValueError: an unknown route, or ``"via-host"`` on a cluster without a host.
    """
    if route is None:
        route = "via-host" if cluster.model.routed else "direct"
    if route not in ROUTES:
        raise ValueError(f"unknown route {route!r}; choose one of: {', '.join(ROUTES)}")
    latency = np.array(cluster.latency, dtype=np.float64)
    bandwidth = np.array(cluster.bandwidth, dtype=np.float64)
    if route == "direct":
        return np.ascontiguousarray(latency), np.ascontiguousarray(bandwidth)
    h = cluster.host_index
    if h < 0:
        raise ValueError(
            f"route 'via-host' needs a host device and cluster {cluster.name!r} has none; "
            "use route 'direct' or give the cluster a host"
        )
    d = len(latency)
    relayed = np.array(
        [[s != t and first_hop(h, s, t) != t for t in range(d)] for s in range(d)], dtype=bool
    ).reshape(d, d)
    two_hops = latency[:, h, None] + latency[None, h, :]
    inverse = 1.0 / bandwidth[:, h, None] + 1.0 / bandwidth[None, h, :]
    latency = np.where(relayed, two_hops, latency)
    bandwidth = np.where(relayed, 1.0 / np.where(relayed, inverse, 1.0), bandwidth)
    return np.ascontiguousarray(latency), np.ascontiguousarray(bandwidth)


def link_model(cluster: Cluster) -> LinkModel:
    """The cluster's link model (module docstring): its direct links and its link options,
    decoded once (:attr:`Cluster.model <graphopt.hardware.Cluster.model>`). A relayed send is
    priced hop by hop on the direct links (:func:`hop_time`)."""
    latency, bandwidth = link_arrays(cluster, route="direct")
    return link_model_of(latency, bandwidth, cluster.model)


def link_model_of(
    latency: FloatArray, bandwidth: FloatArray, model: ClusterModel | None = None
) -> LinkModel:
    """The link model of explicit ``(D, D)`` link arrays (used as they are, not copied) under
    ``model``'s link options; ``None`` gives the defaults (``contention: link``, ``route:
    direct``, ``send: per-device``), which also describe route-folded arrays
    (:func:`link_arrays`), whose every send is one figure."""
    return LinkModel(
        latency=latency,
        bandwidth=bandwidth,
        inv_bandwidth=inverse_bandwidth(bandwidth),
        queued=True if model is None else model.queued,
        host=-1 if model is None else model.host,
        per_consumer=False if model is None else model.per_consumer,
    )


@njit(cache=True, inline="always")
def first_hop(host, src, dst):
    """The device a send from ``src`` to ``dst != src`` goes to first (module docstring, rule 5b
    of :mod:`graphopt.sim`): ``host`` when the route is via the host (``host >= 0``) and neither
    end is the host, the send then relayed (a second hop ``host -> dst`` once this one has
    landed); else ``dst``, the direct link."""
    if host >= 0 and src != host and dst != host:
        return host
    return dst


def inverse_bandwidth(bandwidth: FloatArray) -> FloatArray:
    """``(D, D)`` seconds per byte, ``1 / bandwidth`` (``0`` on the diagonal, where the bandwidth
    is ``inf``): the link figure the multiplying form of the transfer time takes."""
    with np.errstate(divide="ignore"):
        inv = 1.0 / np.asarray(bandwidth, dtype=np.float64)
    np.fill_diagonal(inv, 0.0)
    return np.ascontiguousarray(inv)


@njit(cache=True, error_model="numpy")
def transfer_time(latency, bandwidth, src, dst, nbytes):
    """Seconds to send ``nbytes`` from device ``src`` to ``dst``: ``latency[src, dst] + nbytes /
    bandwidth[src, dst]``, ``0.0`` when ``src == dst``."""
    if src == dst:
        return 0.0
    return latency[src, dst] + nbytes / bandwidth[src, dst]


@njit(cache=True, error_model="numpy")
def transfer_time_by_inverse(latency, inv_bandwidth, src, dst, nbytes):
    """:func:`transfer_time` with ``inv_bandwidth`` (:func:`inverse_bandwidth`): ``latency[src,
    dst] + nbytes * inv_bandwidth[src, dst]``, ``0.0`` when ``src == dst``."""
    if src == dst:
        return 0.0
    return latency[src, dst] + nbytes * inv_bandwidth[src, dst]


@njit(cache=True, inline="always", error_model="numpy")
def hop_time(links, origin, src, dst, nbytes):
    """Seconds of the hop ``src -> dst`` (``src != dst``) of a send of ``nbytes`` that left
    device ``origin`` (``src == origin`` for a direct send and for the first hop of a relayed
    one, the host for its second hop), on :class:`~graphopt.typing.LinkModel` ``links``'s
    direct links: :func:`transfer_time`, each hop paying its link's latency. The price of every
    hop HEFT-lc and the placement decoder book (module docstring)."""
    return transfer_time(links.latency, links.bandwidth, src, dst, nbytes)


@njit(cache=True, inline="always", error_model="numpy")
def hop_time_by_inverse(links, origin, src, dst, nbytes):
    """:func:`hop_time` in the multiplying form (:func:`transfer_time_by_inverse` on
    ``links.inv_bandwidth``): the price of every hop the estimate's ``contention_schedule``
    books."""
    return transfer_time_by_inverse(links.latency, links.inv_bandwidth, src, dst, nbytes)


def transfer_times(
    latency: FloatArray, bandwidth: FloatArray, src: object, dst: object, nbytes: object
) -> FloatArray:
    """:func:`transfer_time` elementwise over broadcast device index and byte arrays."""
    src, dst = np.asarray(src), np.asarray(dst)
    return np.where(src == dst, 0.0, latency[src, dst] + nbytes / bandwidth[src, dst])


def transfer_times_by_inverse(
    latency: FloatArray, inv_bandwidth: FloatArray, src: object, dst: object, nbytes: object
) -> FloatArray:
    """:func:`transfer_time_by_inverse` elementwise over broadcast device index and byte
    arrays."""
    src, dst = np.asarray(src), np.asarray(dst)
    return np.where(src == dst, 0.0, latency[src, dst] + nbytes * inv_bandwidth[src, dst])


@njit(cache=True)
def mean_link_figures(latency, bandwidth):
    """``(mean latency, mean 1 / bandwidth)`` over the off-diagonal (directed) links; ``(0, 0)``
    for one device. Summed sequentially in row-major order (the tests' twins do the same)."""
    num_dev = latency.shape[0]
    lat_sum = 0.0
    inv_sum = 0.0
    for p in range(num_dev):
        for q in range(num_dev):
            if p != q:
                lat_sum += latency[p, q]
                inv_sum += 1.0 / bandwidth[p, q]
    links = num_dev * (num_dev - 1)
    if links == 0:
        return 0.0, 0.0
    return lat_sum / links, inv_sum / links


@njit(cache=True)
def mean_transfer_times(latency, bandwidth, nbytes):
    """``(E,)`` seconds of each transfer of ``nbytes[e]`` bytes on the mean link
    (:func:`mean_link_figures`): ``mean latency + nbytes[e] * mean(1 / bandwidth)``, ``0.0`` on
    one device."""
    lat_mean, inv_mean = mean_link_figures(latency, bandwidth)
    one_device = latency.shape[0] <= 1
    out = np.empty(len(nbytes), dtype=np.float64)
    for e in range(len(nbytes)):
        out[e] = 0.0 if one_device else lat_mean + nbytes[e] * inv_mean
    return out


@njit(cache=True)
def earliest_gap(starts, ends, count, r, ready, duration, first, stop):
    """``(start, insert position)`` of an interval of ``duration`` ready at ``ready`` on resource
    ``r``: the first gap before interval ``j``, ``first <= j < stop``, that begins at or after
    ``ready`` (after interval ``j - 1``, at ``ready`` for ``j == 0``) and holds it; else after
    the last of the ``count[r]`` intervals (position ``count[r]``)."""
    m = count[r]
    for j in range(first, stop):
        begin = max(ready, ends[r, j - 1]) if j > 0 else ready
        if begin + duration <= starts[r, j]:
            return begin, j
    return (max(ready, ends[r, m - 1]) if m > 0 else ready), m


@njit(cache=True)
def find_slot(starts, ends, count, r, ready, duration, max_gaps):
    """HEFT's insertion search on resource ``r``: :func:`earliest_gap` from the first interval
    starting at or after ``ready`` (binary search), at most ``max_gaps`` gaps, then the end of
    the timeline. ``max_gaps`` above ``count[r]`` is the paper's exhaustive search; ``0`` is
    non-insertion HEFT."""
    m = count[r]
    j = np.searchsorted(starts[r, :m], ready)  # first interval starting at or after `ready`
    return earliest_gap(starts, ends, count, r, ready, duration, j, min(m, j + max_gaps))


@njit(cache=True)
def book_interval(starts, ends, count, r, pos, begin, end):
    """Insert the busy interval ``[begin, end)`` at position ``pos`` of resource ``r`` (later
    ones move up one place) and count it. Row ``r`` must have room for one more."""
    m = count[r]
    for j in range(m, pos, -1):
        starts[r, j] = starts[r, j - 1]
        ends[r, j] = ends[r, j - 1]
    starts[r, pos] = begin
    ends[r, pos] = end
    count[r] = m + 1


@njit(cache=True, error_model="numpy", **INTERNAL)
def send_on_link(links, link_free, origin, src, dst, ready, nbytes):
    """Arrival of the hop ``src -> dst`` of a send of ``nbytes`` from ``origin``, sent at
    ``ready`` (:func:`hop_time`): when ``links.queued`` (``contention: link``) it starts once the
    link is free (``link_free[src, dst]``, advanced to its arrival), else at once (``contention:
    none``)."""
    seconds = hop_time(links, origin, src, dst, nbytes)
    if not links.queued:
        return ready + seconds
    begin = max(ready, link_free[src, dst])
    link_free[src, dst] = begin + seconds
    return begin + seconds


@njit(cache=True, inline="always")
def modelled_ready(v, p, preds, placement, finish, links, booking, commit):
    """Data-ready time of op ``v`` on device ``p`` in a list schedule (HEFT-lc's), under the
    cluster's link model (``links``, a :class:`~graphopt.typing.LinkModel`: the direct links and
    the options; rules 5a-5d of :mod:`graphopt.sim`), each transfer booked after the transfers
    already on its link, in scheduling order, without insertion, and priced by :func:`hop_time`.

    - ``send: per-device``: a predecessor's output sent to ``p`` once is reused by every later
      consumer there (``copy_arrival[u, p]``); ``per-consumer``: every edge sends its own.
    - ``route: via-host`` (``host >= 0``): a send between two non-host devices goes to the host
      and on from there once it has landed, each hop on its own (direct) link; per device, the
      copy at the host (``copy_arrival[u, host]``) is reused by every later relayed send.
    - ``contention: none`` (not ``queued``): a transfer lands ``latency + bytes / bandwidth``
      after it is sent; no link is booked.

    ``preds`` is ``(pred_ptr, pred_src, pred_data)`` and ``booking`` ``(link_free, copy_arrival,
    tentative)``, the link free times ``(D, D)``, the copies' arrivals ``(N, D)`` (``-1``: not
    sent) and a ``(D, D)`` scratch for the bookings of ``v``'s own inputs. ``commit`` keeps them.
    """
    pred_ptr, pred_src, pred_data = preds
    link_free, copy_arrival, tentative = booking
    queued = links.queued
    host = links.host
    per_consumer = links.per_consumer
    num_dev = links.latency.shape[0]
    if queued:  # every link v's inputs may take ends at p or at the host
        for q in range(num_dev):
            tentative[q, p] = link_free[q, p]
            if host >= 0:
                tentative[q, host] = link_free[q, host]
    ready = 0.0
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        u = pred_src[e]
        q = placement[u]
        arrival = finish[u]
        if q != p:
            nbytes = pred_data[e]
            if not per_consumer and copy_arrival[u, p] >= 0.0:
                arrival = copy_arrival[u, p]
            else:
                src = q
                hop = first_hop(host, q, p)
                if hop != p:  # relayed: first hop to the host
                    if not per_consumer and copy_arrival[u, hop] >= 0.0:
                        arrival = copy_arrival[u, hop]
                    else:
                        arrival = send_on_link(links, tentative, q, q, hop, arrival, nbytes)
                        if commit and not per_consumer:
                            copy_arrival[u, hop] = arrival
                    src = hop
                arrival = send_on_link(links, tentative, q, src, p, arrival, nbytes)
                if commit and not per_consumer:
                    copy_arrival[u, p] = arrival
        if arrival > ready:
            ready = arrival
    if queued and commit:
        for q in range(num_dev):
            link_free[q, p] = tentative[q, p]
            if host >= 0:
                link_free[q, host] = tentative[q, host]
    return ready
