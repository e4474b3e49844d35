"""METIS placement: a balanced ``D``-way partition of the graph with a small weighted edge cut
(Karypis and Kumar, "A Fast and High Quality Multilevel Scheme for Partitioning Irregular Graphs",
SIAM J. Sci. Comput. 20(1), 1998), through ``pymetis``.

The partition ignores edge directions and the schedule: it balances work and cuts few bytes, which
is what the placement papers (e.g. Mirhoseini et al. 2017, Baechi) compare against.

- **Graph.** Made undirected: every edge joins its two ops in both directions (parallel edges
  between the same pair would be merged, summing their weights; a DAG has none).
- **Op weights** (integers, as METIS needs): each op's mean time over the cluster's devices (the
  simulator's op time), scaled so that the whole graph weighs :data:`VERTEX_SCALE`, rounded, and
  floored at 1 (an op that takes no time still counts as one unit).
- **Edge weights**: tensor bytes scaled so the largest edge weighs :data:`EDGE_SCALE`, rounded,
  plus 1 (so a tiny tensor still costs a unit of cut).
- **Target part weights.** Part ``k`` aims at ``tpwgts[k]`` of the total weight, proportional to
  device ``k``'s speed (``1 / `` the graph's total time on it), so a CPU of a CPU+GPU cluster gets
  a small share. On a homogeneous cluster the targets are equal.
- **Parts to devices.** Part ``k`` is sized for device ``k``; parts meant for devices of the same
  speed may be swapped. Among those permutations (all of them when there are at most 40,320) the
  one that minimises ``sum over part pairs (a, b) of cut_bytes[a, b] / bandwidth[dev(a), dev(b)]``
  is used, so heavily connected parts sit on fast links (e.g. NVLink pairs of a DGX-1).

METIS is run with a fixed seed (``seed`` argument, default 0): the result is deterministic. With
no more ops than devices METIS is not called (it refuses to make more parts than vertices): each op
gets a part of its own, the slowest op the part of the fastest device. METIS's notes printed from C
(``***Cannot bisect a graph with 0 vertices!`` when a recursive bisection runs out of vertices; the
partition is still valid) are kept off the terminal.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import math
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np

from graphopt.baselines._costs import op_times
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.links import inverse_bandwidth
from graphopt.typing import FloatArray, IntArray

VERTEX_SCALE = 10_000_000
"""Total op weight before the floor of 1 (METIS weights are 32-bit integers)."""
EDGE_SCALE = 1_000
"""Weight of the largest edge, minus 1."""
MAX_PERMUTATIONS = 40_320
"""Most part-to-device assignments searched (8!)."""


def _pymetis() -> Any:
    try:
        import pymetis
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise ImportError("the METIS placer needs pymetis: pip install 'pymetis>=2023.1'") from e
    return pymetis


METIS_NOTE = re.compile(rb"^[ \t]*\*\*\*[^\n]*\n?", re.MULTILINE)
"""A line METIS prints from C: ``\t***Cannot bisect a graph with 0 vertices!`` and the like."""


def _flush_c_stdio() -> None:
    """Flush the C library's stdio buffers (``fflush(NULL)``), so that what C code printed reaches
    the file descriptor it was printed to before that descriptor changes."""
    with contextlib.suppress(OSError, TypeError, AttributeError):  # no C library by name (Windows)
        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def _metis_notes_dropped() -> Iterator[None]:
    """Send the process's standard output (file descriptor 1, which METIS's ``printf`` writes to)
    to a temporary file for the body, then write back all of it but METIS's notes
    (:data:`METIS_NOTE`): whatever else was printed meanwhile, by C code or another thread, still
    reaches the terminal."""
    if sys.stdout is not None:
        sys.stdout.flush()
    with contextlib.ExitStack() as stack:
        try:
            sink = stack.enter_context(tempfile.TemporaryFile())
            saved = os.dup(1)
        except OSError:  # no standard output, or no temporary file: METIS prints as it does
            yield
            return
        stack.callback(os.close, saved)
        os.dup2(sink.fileno(), 1)
        try:
            yield
        finally:
            _flush_c_stdio()
            os.dup2(saved, 1)
            sink.seek(0)
            rest = memoryview(METIS_NOTE.sub(b"", sink.read()))
            while rest:
                rest = rest[os.write(1, rest) :]


def _undirected_csr(
    n: int, src: IntArray, dst: IntArray, weight: IntArray
) -> tuple[IntArray, IntArray, IntArray]:
    """Symmetric CSR (``xadj``, ``adjncy``, ``eweights``) with parallel edges merged."""
    rows = np.concatenate([src, dst])
    cols = np.concatenate([dst, src])
    w = np.concatenate([weight, weight])
    keep = rows != cols
    rows, cols, w = rows[keep], cols[keep], w[keep]
    key, inverse = np.unique(rows * n + cols, return_inverse=True)
    merged = np.bincount(inverse, weights=w).astype(np.int64)
    rows, cols = key // n, key % n
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=xadj[1:])
    return xadj, cols.astype(np.int64), merged


def part_weights(times: FloatArray) -> FloatArray:
    """Target share of each device, proportional to its speed ``1 / sum_i times[i, d]``, summing
    to 1."""
    total = times.sum(axis=0)
    speed = np.where(total > 0, 1.0 / np.maximum(total, 1e-300), 1.0)
    return speed / speed.sum()


def _device_permutations(share: FloatArray) -> np.ndarray:
    """All assignments of parts to devices that only swap devices of equal share, as a
    ``(P, D)`` array (part ``k`` -> device ``perm[k]``); just the identity if there are too many."""
    num_dev = len(share)
    keys = np.round(share / share.max(), 9)
    groups = [np.flatnonzero(keys == k) for k in np.unique(keys)]
    count = math.prod(math.factorial(len(g)) for g in groups)
    if count > MAX_PERMUTATIONS:
        return np.arange(num_dev, dtype=np.int64)[None, :]
    perms = []
    for combo in itertools.product(*(itertools.permutations(g.tolist()) for g in groups)):
        perm = np.empty(num_dev, dtype=np.int64)
        for group, image in zip(groups, combo, strict=True):
            perm[group] = image
        perms.append(perm)
    return np.array(perms, dtype=np.int64)


def _metis_parts(
    graph: CompGraph, num_dev: int, mean_time: FloatArray, share: FloatArray, seed: int
) -> IntArray:
    """METIS's ``num_dev``-way partition of ``graph`` (more ops than parts): a part per op."""
    n = graph.num_ops
    total = float(mean_time.sum())
    scaled = mean_time / total * VERTEX_SCALE if total > 0 else np.zeros(n)
    vweights = np.maximum(1, np.rint(scaled)).astype(np.int64)
    max_bytes = float(graph.edge_bytes.max()) if graph.num_edges else 0.0
    scaled_bytes = graph.edge_bytes / max_bytes * EDGE_SCALE if max_bytes > 0 else graph.edge_bytes
    eweights = 1 + np.rint(scaled_bytes).astype(np.int64)
    xadj, adjncy, merged = _undirected_csr(n, graph.edge_src, graph.edge_dst, eweights)
    homogeneous = np.allclose(share, share[0], rtol=1e-9, atol=0.0)
    pymetis = _pymetis()
    options = pymetis.Options(seed=seed)
    if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025.2; xadj/adjncy are deprecated there
        graph_args: dict[str, object] = {
            "adjacency": pymetis.CSRAdjacency(adj_starts=xadj.tolist(), adjacent=adjncy.tolist())
        }
    else:  # pragma: no cover - older pymetis
        graph_args = {"xadj": xadj.tolist(), "adjncy": adjncy.tolist()}
    with _metis_notes_dropped():
        _, parts = pymetis.part_graph(
            num_dev,
            **graph_args,
            vweights=vweights.tolist(),
            eweights=merged.tolist(),
            tpwgts=None if homogeneous else share.tolist(),
            options=options,
        )
    return np.asarray(parts, dtype=np.int64)


def metis(graph: CompGraph, cluster: Cluster, *, seed: int = 0) -> IntArray:
    """METIS placement (module docstring): ``(N,)`` device per op."""
    n, num_dev = graph.num_ops, cluster.num_devices
    if n == 0 or num_dev == 1:
        return np.zeros(n, dtype=np.int64)
    times = op_times(graph, cluster)
    mean_time = times.mean(axis=1)
    share = part_weights(times)
    if n > num_dev:
        part = _metis_parts(graph, num_dev, mean_time, share, seed)
    else:  # a part per op, the slowest ops in the parts of the fastest devices
        part = np.empty(n, dtype=np.int64)
        part[np.argsort(-mean_time, kind="stable")] = np.argsort(-share, kind="stable")[:n]

    # traffic between parts (directed, bytes) -> the cheapest admissible part-to-device map
    a, b = part[graph.edge_src], part[graph.edge_dst]
    cross = a != b
    traffic = np.zeros((num_dev, num_dev))
    np.add.at(traffic, (a[cross], b[cross]), graph.edge_bytes[cross])
    perms = _device_permutations(share)
    inv_bw = inverse_bandwidth(cluster.bandwidth)  # 0 on the diagonal
    cost = (traffic[None, :, :] * inv_bw[perms[:, :, None], perms[:, None, :]]).sum(axis=(1, 2))
    best = perms[int(np.argmin(cost))]  # argmin: the first of equal costs, deterministic
    return best[part]
