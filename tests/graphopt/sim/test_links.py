"""The link arrays, transfer times and gap search of ``graphopt.sim.links``, each against a
readable twin that must agree exactly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from graphopt.hardware import get_cluster
from graphopt.sim.links import (
    book_interval,
    earliest_gap,
    find_slot,
    first_hop,
    hop_time,
    hop_time_by_inverse,
    inverse_bandwidth,
    link_arrays,
    link_model,
    link_model_of,
    mean_link_figures,
    mean_transfer_times,
    transfer_time,
    transfer_time_by_inverse,
    transfer_times,
    transfer_times_by_inverse,
)

HETERO = "hetero-cpu-2gpu"  # cpu0, gpu0, gpu1


# ------------------------------------------------------------------------------ link arrays
def _link_arrays_twin(cluster, route: str) -> tuple[np.ndarray, np.ndarray]:
    """Entry by entry: the cluster's link, or two hops through the host between non-host
    devices under ``via-host``."""
    d, h = cluster.num_devices, cluster.host_index
    latency, bandwidth = np.zeros((d, d)), np.full((d, d), np.inf)
    for s in range(d):
        for t in range(d):
            if s == t:
                continue
            if route == "via-host" and h not in (s, t):
                latency[s, t] = cluster.latency[s, h] + cluster.latency[h, t]
                inverse = 1.0 / cluster.bandwidth[s, h] + 1.0 / cluster.bandwidth[h, t]
                bandwidth[s, t] = 1.0 / inverse
            else:
                latency[s, t] = cluster.latency[s, t]
                bandwidth[s, t] = cluster.bandwidth[s, t]
    return latency, bandwidth


@pytest.mark.parametrize("route", ["direct", "via-host"])
def test_link_arrays_agree_with_twin(route: str) -> None:
    cluster = replace(get_cluster(HETERO), route=route)
    latency, bandwidth = link_arrays(cluster)
    twin_latency, twin_bandwidth = _link_arrays_twin(cluster, route)
    assert np.array_equal(latency, twin_latency) and np.array_equal(bandwidth, twin_bandwidth)
    assert latency.flags.c_contiguous and bandwidth.flags.c_contiguous
    assert latency.dtype == bandwidth.dtype == np.float64


def test_first_hop_relays_between_non_host_devices() -> None:
    for host in (-1, 0, 2):
        for s in range(4):
            for t in range(4):
                relayed = s != t and host >= 0 and host not in (s, t)  # rule 5b
                if s != t:
                    assert first_hop(host, s, t) == (host if relayed else t)


def test_route_argument_overrides_the_clusters() -> None:
    relay = replace(get_cluster(HETERO), route="via-host")
    direct = link_arrays(relay, route="direct")
    assert np.array_equal(direct[0], relay.latency)
    assert np.array_equal(direct[1], relay.bandwidth)
    with pytest.raises(ValueError, match="unknown route 'ring'"):
        link_arrays(relay, route="ring")
    with pytest.raises(ValueError, match="needs a host device"):
        link_arrays(get_cluster("v100-nvlink-4"), route="via-host")


def test_inverse_bandwidth_is_zero_on_the_diagonal() -> None:
    _, bandwidth = link_arrays(get_cluster(HETERO))
    inv = inverse_bandwidth(bandwidth)
    d = len(bandwidth)
    for s in range(d):
        for t in range(d):
            assert inv[s, t] == (0.0 if s == t else 1.0 / bandwidth[s, t])


def test_mean_link_figures_and_times_agree_with_twin() -> None:
    latency, bandwidth = link_arrays(replace(get_cluster(HETERO), route="via-host"))
    off = [(p, q) for p in range(3) for q in range(3) if p != q]
    lat, inv = 0.0, 0.0
    for p, q in off:  # summed in row-major order, as the compiled loop does
        lat += latency[p, q]
        inv += 1.0 / bandwidth[p, q]
    assert mean_link_figures(latency, bandwidth) == (lat / len(off), inv / len(off))
    nbytes = np.array([0.0, 1.5e6, 3e9])
    twin = [lat / len(off) + b * (inv / len(off)) for b in nbytes]
    assert mean_transfer_times(latency, bandwidth, nbytes).tolist() == twin
    one = np.zeros((1, 1)), np.full((1, 1), np.inf)
    assert mean_link_figures(*one) == (0.0, 0.0)
    assert mean_transfer_times(*one, nbytes).tolist() == [0.0, 0.0, 0.0]


# ---------------------------------------------------------------------------- transfer time
@pytest.mark.parametrize("route", ["direct", "via-host"])
def test_transfer_time_forms_agree_with_the_formula(route: str) -> None:
    cluster = replace(get_cluster(HETERO), route=route)
    latency, bandwidth = link_arrays(cluster)
    inv = inverse_bandwidth(bandwidth)
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 3, size=40), rng.integers(0, 3, size=40)
    nbytes = rng.uniform(0, 1e9, size=40)
    divided = transfer_times(latency, bandwidth, src, dst, nbytes)
    multiplied = transfer_times_by_inverse(latency, inv, src, dst, nbytes)
    for i in range(40):
        s, t, b = int(src[i]), int(dst[i]), float(nbytes[i])
        by_division = 0.0 if s == t else latency[s, t] + b / bandwidth[s, t]
        by_inverse = 0.0 if s == t else latency[s, t] + b * inv[s, t]
        assert transfer_time(latency, bandwidth, s, t, b) == by_division == divided[i]
        assert transfer_time_by_inverse(latency, inv, s, t, b) == by_inverse == multiplied[i]
        assert by_inverse == pytest.approx(by_division, rel=1e-12)


def test_direct_transfer_time_is_the_clusters() -> None:
    cluster = get_cluster(HETERO)
    latency, bandwidth = link_arrays(cluster)
    for s in range(3):
        for t in range(3):
            own = 0.0 if s == t else cluster.latency[s, t] + 3e6 / cluster.bandwidth[s, t]
            assert transfer_time(latency, bandwidth, s, t, 3e6) == own


# ------------------------------------------------------------------------------- link model
def _hop_time_twin(cluster, origin: int, src: int, dst: int, nbytes: float) -> tuple[float, float]:
    """Seconds of the hop ``src -> dst`` of a send from ``origin``, dividing and multiplying:
    every hop pays its own direct link's latency and bytes, wherever the send began."""
    latency, bandwidth = cluster.latency[src, dst], cluster.bandwidth[src, dst]
    return latency + nbytes / bandwidth, latency + nbytes * (1.0 / bandwidth)


@pytest.mark.parametrize(
    "options",
    [{}, {"route": "via-host"}, {"contention": "none", "send": "per-consumer"}],
)
def test_link_model_holds_the_direct_links_and_the_options(options: dict[str, str]) -> None:
    cluster = replace(get_cluster(HETERO), **options)
    links = link_model(cluster)
    latency, bandwidth = link_arrays(cluster, route="direct")
    assert np.array_equal(links.latency, latency) and np.array_equal(links.bandwidth, bandwidth)
    assert np.array_equal(links.inv_bandwidth, inverse_bandwidth(bandwidth))
    model = cluster.model
    read = (links.queued, links.host, links.per_consumer)
    assert read == (model.queued, model.host, model.per_consumer)
    plain = link_model_of(latency, bandwidth)
    assert (plain.queued, plain.host, plain.per_consumer) == (True, -1, False)
    h = max(cluster.host_index, 0)
    for origin in range(3):
        for src in (origin, h):
            for dst in range(3):
                if dst == src:
                    continue
                divided, multiplied = _hop_time_twin(cluster, origin, src, dst, 3e6)
                assert hop_time(links, origin, src, dst, 3e6) == divided
                assert hop_time_by_inverse(links, origin, src, dst, 3e6) == multiplied


# ------------------------------------------------------------------------------- gap search
def _gap_twin(
    busy: list[tuple[float, float]], ready: float, duration: float, first: int, stop: int
):
    """The first gap before interval ``j`` in ``first..stop-1`` that begins at or after ``ready``
    and holds ``duration``; else after the last interval."""
    for j in range(first, stop):
        begin = max(ready, busy[j - 1][1]) if j > 0 else ready
        if begin + duration <= busy[j][0]:
            return begin, j
    return (max(ready, busy[-1][1]) if busy else ready), len(busy)


def _timeline(rng: np.random.Generator, size: int) -> list[tuple[float, float]]:
    """``size`` sorted busy intervals with random gaps (some of them empty)."""
    out, t = [], 0.0
    for _ in range(size):
        t += float(rng.choice([0.0, rng.uniform(0, 2)]))
        length = float(rng.uniform(0.1, 2))
        out.append((t, t + length))
        t += length
    return out


def _tables(busy: list[tuple[float, float]], row: int = 1):
    """The busy intervals as row ``row`` of ``(3, capacity)`` tables, with room for one more."""
    starts, ends = np.full((3, len(busy) + 1), -7.0), np.full((3, len(busy) + 1), -7.0)
    count = np.zeros(3, dtype=np.int64)
    for j, (s, e) in enumerate(busy):
        starts[row, j], ends[row, j] = s, e
    count[row] = len(busy)
    return starts, ends, count


@pytest.mark.parametrize("seed", range(6))
def test_gap_searches_agree_with_twin(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for size in (0, 1, 2, 5, 12):
        busy = _timeline(rng, size)
        starts, ends, count = _tables(busy)
        for _ in range(20):
            ready = float(rng.uniform(0, busy[-1][1] + 1 if busy else 3))
            duration = float(rng.choice([0.0, rng.uniform(0, 1.5)]))
            first = int(rng.integers(0, size + 1))
            stop = int(rng.integers(first, size + 1))
            expected = _gap_twin(busy, ready, duration, first, stop)
            assert earliest_gap(starts, ends, count, 1, ready, duration, first, stop) == expected
            for max_gaps in (0, 1, 3, size + 1):
                j = sum(1 for s, _ in busy if s < ready)  # first interval at or after `ready`
                twin = _gap_twin(busy, ready, duration, j, min(size, j + max_gaps))
                got = find_slot(starts, ends, count, 1, ready, duration, max_gaps)
                assert got == twin, (size, ready, duration, max_gaps)


def test_exhaustive_slot_is_the_earliest_fitting_gap() -> None:
    busy = [(0.0, 1.0), (1.5, 2.0), (4.0, 5.0)]
    starts, ends, count = _tables(busy)
    assert find_slot(starts, ends, count, 1, 0.0, 0.5, 10) == (1.0, 1)
    assert find_slot(starts, ends, count, 1, 0.0, 0.6, 10) == (2.0, 2)
    assert find_slot(starts, ends, count, 1, 0.0, 0.6, 0) == (5.0, 3)  # non-insertion
    assert find_slot(starts, ends, count, 1, 3.5, 3.0, 10) == (5.0, 3)


def test_book_interval_keeps_the_row_sorted() -> None:
    rng = np.random.default_rng(3)
    busy = _timeline(rng, 6)
    starts, ends, count = _tables(busy)
    begin, pos = find_slot(starts, ends, count, 1, 0.0, 0.05, 10)
    book_interval(starts, ends, count, 1, pos, begin, begin + 0.05)
    twin = sorted([*busy, (begin, begin + 0.05)])
    assert count.tolist() == [0, 7, 0]
    assert list(zip(starts[1].tolist(), ends[1].tolist(), strict=True)) == twin
    assert (starts[[0, 2]] == -7.0).all()  # other rows untouched
