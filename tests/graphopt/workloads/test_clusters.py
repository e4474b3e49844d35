"""Each graph on its own cluster: the file beside a graph file, or the one its metadata names."""

from __future__ import annotations

from pathlib import Path

import pytest
from own_clusters import graph_file, slow_cluster

from graphopt.workloads.clusters import graph_clusters, sibling_cluster_path


def test_sibling_cluster_path() -> None:
    assert sibling_cluster_path(Path("runs/x/g.json")) == Path("runs/x/g.cluster.yaml")
    assert sibling_cluster_path(Path("runs/x/g.json.gz")) == Path("runs/x/g.cluster.yaml")
    assert sibling_cluster_path("g.json", ".cluster.json") == Path("g.cluster.json")


def test_the_file_beside_then_the_metadata(tmp_path: Path) -> None:
    beside = graph_file(tmp_path / "a.json", cluster="v100-nvlink-4")  # the file beside wins
    slow_cluster().save(tmp_path / "a.cluster.yaml")
    preset = graph_file(tmp_path / "b.json.gz", cluster="v100-nvlink-4")
    (tmp_path / "machines").mkdir()
    slow_cluster("slow-file").save(tmp_path / "machines" / "m.yaml")
    relative = graph_file(tmp_path / "c.json", cluster="machines/m.yaml")
    inline = graph_file(tmp_path / "d.json", cluster=slow_cluster("slow-inline").to_dict())
    pairs = graph_clusters(",".join(str(p) for p in (beside, preset, relative, inline)))
    assert [c.name for _, c in pairs] == ["slow-2", "v100-nvlink-4", "slow-file", "slow-inline"]
    assert all(g.name == "txl-tiny" for g, _ in pairs)
    assert pairs[0][1].fingerprint == slow_cluster().fingerprint


def test_a_graph_without_its_own_cluster_is_refused(tmp_path: Path) -> None:
    lone = graph_file(tmp_path / "lone.json")
    with pytest.raises(ValueError, match=r"lone\.cluster\.yaml, or name one in its metadata"):
        graph_clusters(str(lone))
    with pytest.raises(ValueError, match="graph 'txl-tiny' has no cluster of its own: load it"):
        graph_clusters("txl-tiny")
    bad = graph_file(tmp_path / "bad.json", cluster="v100x3")
    with pytest.raises(ValueError, match=r"its metadata's cluster 'v100x3': unknown cluster"):
        graph_clusters(str(bad))
