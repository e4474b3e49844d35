"""A disk cache of each graph's reference placement, the one training rewards compare against.

:func:`cached_best_placement` is :func:`graphopt.baselines.staged.best_heuristic` for the
``placement`` task under the simulator (:class:`graphopt.sim.Simulator`), computed once per
graph and cluster and then read from disk: a training run over hundreds of graphs starts without
re-running every placer on every graph.

Key: the graph's :attr:`~graphopt.graph.CompGraph.fingerprint`, the cluster's
:attr:`~graphopt.hardware.Cluster.fingerprint`, what the simulator adds to them (the colocation
groups and the shapes: the graph fingerprint leaves both out; under ``contiguous: true`` the
layers and forward part that the block DAG reads), :data:`REFERENCE_VERSION` and a
digest of the source that computes a reference (:data:`SOURCE_FILES`), so that an edited placer
or simulator never serves a stale reference. Its SHA-256 names the file, which holds it whole.

Files: ``cache_dir``, else ``$GRAPHOPT_CACHE_DIR/references``, else
``~/.cache/graphopt/references``; one ``.npz`` per entry (placement, step time, name, key), read
without pickle. Written atomically; a damaged file, or one whose placement does not fit the graph
and cluster, is recomputed without a traceback; an unwritable folder gives one warning line and
references computed in memory (:mod:`graphopt.disk_cache`).
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np

from graphopt import disk_cache
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.typing import IntArray

REFERENCE_VERSION = 1
"""Bump when a reference changes meaning without a source edit (e.g. another task's chain)."""
FOLDER = "references"
SOURCE_FILES = (
    "sim",
    "baselines",
    "blocks.py",
    "constraints.py",
    "hardware.py",
    "tasks.py",
    "op_model.py",
    "op_classes.py",
)
"""Paths under the ``graphopt`` package whose source is hashed into the key."""
_FORMAT = "graphopt-reference v1"
_log = logging.getLogger("graphopt.cache")


def cache_dir_default() -> Path:
    """``$GRAPHOPT_CACHE_DIR/references`` if the variable is set, else
    ``~/.cache/graphopt/references``."""
    return disk_cache.cache_root(FOLDER)


def _blocks_digest(graph: CompGraph) -> str:
    """What the block DAG of ``contiguous: true`` reads beyond the graph's fingerprint and its
    colocation groups: the layers and the forward part."""
    text = "\0".join(graph.layer) + f"\1{graph.metadata.get('forward_ops')!r}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def reference_key(graph: CompGraph, cluster: Cluster) -> str:
    """The cache key of ``graph`` on ``cluster`` (the module docstring)."""
    colocation = hashlib.sha256("\0".join(graph.colocation).encode()).hexdigest()[:16]
    return "|".join(
        [
            f"graph={graph.fingerprint}",
            f"cluster={cluster.fingerprint}",
            f"colocation={colocation}",
            *([f"blocks={_blocks_digest(graph)}"] if cluster.contiguous else []),
            f"tensors={graph.tensor_fingerprint[:16]}",
            f"v{REFERENCE_VERSION}",
            f"source={disk_cache.source_digest(SOURCE_FILES, ('reference_cache.py',))}",
        ]
    )


def cached_best_placement(
    graph: CompGraph, cluster: Cluster, *, cache_dir: str | Path | None = None
) -> tuple[IntArray, float, str]:
    """The best heuristic placement of ``graph`` on ``cluster`` by the simulator, from the disk
    cache when it is there, else computed and kept.

    Args:
        graph: the graph.
        cluster: the cluster.
        cache_dir: the cache folder (default :func:`cache_dir_default`).

    Returns:
        ``(placement, step_time, name)``: one device index per op (``int64``, topological
        order), the simulated seconds per step of that placement (no fusion, topological
        priorities) and the name of the heuristic that gave it (``heft``), as
        ``best_heuristic(graph, cluster, "placement", Simulator())`` returns them.

    Raises:
        ValueError: no placer gave a placement (:func:`~graphopt.baselines.staged.best_heuristic`).
    """
    key = reference_key(graph, cluster)
    path = disk_cache.cache_root(FOLDER, cache_dir) / (
        hashlib.sha256(key.encode()).hexdigest()[:24] + ".npz"
    )
    if path.exists():
        try:
            return _decode(disk_cache.read_npz(path), key, graph, cluster)
        except ValueError as e:
            _log.debug("recomputing %s: %s", path, e)
    placement, step_time, name = _compute(graph, cluster)
    try:
        disk_cache.write_npz(
            path,
            {
                "format": disk_cache.text_array(_FORMAT),
                "key": disk_cache.text_array(key),
                "placement": placement,
                "step_time": np.array(step_time, dtype=np.float64),
                "name": disk_cache.text_array(name),
            },
        )
    except OSError as e:
        disk_cache.warn_unwritable(path.parent, e, "references are computed in memory, not kept")
    return placement, step_time, name


def _compute(graph: CompGraph, cluster: Cluster) -> tuple[IntArray, float, str]:
    from graphopt.baselines.staged import best_heuristic
    from graphopt.sim import Simulator

    decision, measurement, name = best_heuristic(graph, cluster, "placement", Simulator())
    placement = decision.filled(graph.num_ops).placement
    assert placement is not None
    return placement, float(measurement.step_time), name


def _decode(
    arrays: dict[str, np.ndarray], key: str, graph: CompGraph, cluster: Cluster
) -> tuple[IntArray, float, str]:
    try:
        if disk_cache.array_text(arrays["format"]) != _FORMAT:
            raise ValueError("not a reference file of this format")
        if disk_cache.array_text(arrays["key"]) != key:
            raise ValueError("written for another key")
        placement, step_time = arrays["placement"], arrays["step_time"]
        name = disk_cache.array_text(arrays["name"])
    except (KeyError, UnicodeDecodeError) as e:
        raise ValueError(f"malformed reference file ({type(e).__name__}: {e})") from None
    if placement.dtype != np.int64 or placement.shape != (graph.num_ops,):
        raise ValueError(f"placement of {placement.dtype} {placement.shape}")
    if graph.num_ops and (placement.min() < 0 or placement.max() >= cluster.num_devices):
        raise ValueError("a device index out of the cluster")
    if step_time.dtype != np.float64 or step_time.shape != () or not step_time >= 0:
        raise ValueError(f"step time {step_time!r}")
    return placement, float(step_time), name
