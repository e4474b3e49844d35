"""Files of method comparisons (graphopt.eval.report): the JSON and its CSV appear together or
not at all, a plot whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphopt.eval.compare import compare_on_graph
from graphopt.eval.report import plot_comparisons, write_comparisons
from graphopt.hardware import get_cluster
from graphopt.workloads import resolve_graphs


@pytest.fixture(scope="module")
def comparisons():
    (graph,) = resolve_graphs("txl-tiny")
    return [compare_on_graph(graph, get_cluster("v100-nvlink-2"), "placement", exact_max_ops=0)]


def test_the_json_and_its_csv_appear_together(tmp_path: Path, comparisons) -> None:
    json_path, csv_path = write_comparisons(comparisons, tmp_path / "new" / "out", "r.json")
    assert json.loads(json_path.read_text())["graphs"][0]["graph"] == "txl-tiny"
    assert csv_path.read_text().startswith("graph,ops,cluster,method")
    assert sorted(p.name for p in json_path.parent.iterdir()) == ["r.csv", "r.json"]


def test_a_csv_that_cannot_be_written_leaves_no_json(tmp_path: Path, comparisons) -> None:
    (tmp_path / "r.csv").mkdir()
    with pytest.raises(ValueError, match="r.csv"):
        write_comparisons(comparisons, tmp_path, "r.json")
    assert [p.name for p in tmp_path.iterdir()] == ["r.csv"]


def test_a_plot_is_whole_or_not_at_all(tmp_path: Path, comparisons) -> None:
    path = plot_comparisons(comparisons, tmp_path / "plots" / "p.png", "t")
    assert path.read_bytes().startswith(b"\x89PNG")
    (tmp_path / "blocker").write_text("a file where a folder would go")
    with pytest.raises(ValueError, match="^cannot write .*p.png': Not a directory$"):
        plot_comparisons(comparisons, tmp_path / "blocker" / "p.png", "t")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker", "plots"]
