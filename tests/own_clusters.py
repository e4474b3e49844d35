"""Graph files that carry their cluster, shared by the tests of ``--cluster each``."""

from __future__ import annotations

from pathlib import Path

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, get_cluster
from graphopt.workloads import get_graph


def slow_cluster(name: str = "slow-2") -> Cluster:
    """v100-nvlink-2 with links a hundred times slower, under another name."""
    data = get_cluster("v100-nvlink-2").to_dict()
    data["name"] = name
    data["links"]["default"]["bandwidth"] /= 100
    return Cluster.from_dict(data)


def graph_file(path: Path, name: str = "txl-tiny", **metadata: object) -> Path:
    """Graph ``name`` saved to ``path``, with ``metadata`` added to its own."""
    data = get_graph(name).to_json_dict()
    data["metadata"] = {**data.get("metadata", {}), **metadata}
    CompGraph.from_json_dict(data).save(path)
    return path
