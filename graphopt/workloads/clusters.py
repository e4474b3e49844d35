"""Each graph on its own cluster: ``--cluster each`` of ``graphopt baselines`` and ``graphopt eval``.

Real graphs often come with the machine they were measured on (``graphopt profile`` writes
``graph.json`` and ``graph.cluster.yaml`` side by side). :func:`graph_clusters` pairs every graph
of a spec with its cluster, found in this order:

1. the graph file's sibling ``<name>.cluster.yaml`` (or ``.cluster.yml``, ``.cluster.json``):
   ``runs/x/graph.json`` or ``runs/x/graph.json.gz`` -> ``runs/x/graph.cluster.yaml``
   (:func:`sibling_cluster_path`);
2. the cluster named in the graph's metadata, key ``cluster``: a preset name, the path of a cluster
   file (relative to the graph file's folder), or the cluster itself as a mapping
   (:meth:`graphopt.hardware.Cluster.to_dict`).

A graph with neither (a built-in graph, one imported without a machine) is refused, naming it and
the ways to give it one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, get_cluster
from graphopt.workloads.registry import resolve_graph_files

EACH = "each"
"""The cluster spec that puts every graph on its own cluster."""
SUFFIXES = (".cluster.yaml", ".cluster.yml", ".cluster.json")
"""The sibling cluster files looked for, in this order."""


def sibling_cluster_path(graph_path: str | Path, suffix: str = SUFFIXES[0]) -> Path:
    """``run/graph.json`` (or ``.json.gz``) -> ``run/graph.cluster.yaml``: where a graph file's
    cluster lies (what ``graphopt profile`` writes by default)."""
    path = Path(graph_path)
    stem = re.sub(r"(\.json)?(\.gz)?$", "", path.name) or "machine"
    return path.with_name(f"{stem}{suffix}")


def graph_cluster(graph: CompGraph, path: Path | None) -> Cluster:
    """The cluster of ``graph``, read from the file ``path`` (None: not from a file), as the
    module docstring says.

    Raises:
        ValueError: no cluster found, or a cluster file or metadata entry that is not one (one
            line naming the graph and the file).
    """
    if path is not None:
        for suffix in SUFFIXES:
            sibling = sibling_cluster_path(path, suffix)
            if sibling.is_file():
                return get_cluster(sibling)
    named = graph.metadata.get("cluster")
    where = f"graph {graph.name!r}" + (f" ({path})" if path is not None else "")
    if isinstance(named, str) and named:
        spec = named if path is None or not Path(named).suffix else str(path.parent / named)
        try:
            return get_cluster(spec)
        except (ValueError, OSError) as e:
            raise ValueError(f"{where}: its metadata's cluster {named!r}: {e}") from e
    if isinstance(named, Mapping):
        try:
            return Cluster.from_dict(dict(named))
        except (ValueError, TypeError, KeyError) as e:
            raise ValueError(f"{where}: its metadata's cluster is not a cluster: {e}") from e
    beside = (
        f"put its cluster file beside it as {sibling_cluster_path(path).name}, or "
        if path is not None
        else "load it from a graph file with its cluster file beside it, or "
    )
    raise ValueError(
        f"{where} has no cluster of its own: {beside}name one in its metadata (key 'cluster': "
        "a preset or a cluster file), or give one cluster for all graphs"
    )


def graph_clusters(spec: str) -> list[tuple[CompGraph, Cluster]]:
    """Every graph of ``spec`` (:func:`graphopt.workloads.resolve_graphs`) with its own cluster,
    in order (:func:`graph_cluster`).

    Raises:
        ValueError: as :func:`~graphopt.workloads.resolve_graphs`, and a graph without a cluster.
    """
    return [(graph, graph_cluster(graph, path)) for graph, path in resolve_graph_files(spec)]
