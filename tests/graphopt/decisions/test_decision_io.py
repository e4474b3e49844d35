from __future__ import annotations

import json

import numpy as np
import pytest

from graphopt.decisions.io import load_decision
from graphopt.graph import CompGraph, Op
from graphopt.typing import Decision


@pytest.fixture
def graph() -> CompGraph:
    return CompGraph.build("g", [Op("a", "X"), Op("b", "X"), Op("c", "X")], [("a", "b", 1.0)])


def write(tmp_path, data) -> str:
    path = tmp_path / "d.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


def test_forms(tmp_path, graph):
    assert load_decision(write(tmp_path, [0, 1, 1]), graph).placement.tolist() == [0, 1, 1]
    assert load_decision(write(tmp_path, {"c": 0, "a": 1, "b": 2}), graph).placement.tolist() == [
        1,
        2,
        0,
    ]
    d = load_decision(
        write(
            tmp_path, {"graph": "g", "placement": [0, 0, 1], "fusion": None, "priority": [1, 0, 0]}
        ),
        graph,
    )
    assert (
        d.placement.tolist() == [0, 0, 1] and d.fusion is None and d.priority.tolist() == [1, 0, 0]
    )


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([0, 1], "placement has 2 entries but graph 'g' has 3 ops"),
        ({"a": 0, "b": 0}, "1 ops of 'g' have no device, e.g. 'c'"),
        ({"a": 0, "b": 0, "c": 0, "zz": 1}, "op 'zz' is not in graph 'g'"),
        ({"graph": "other", "placement": [0, 0, 0]}, "for graph 'other', not 'g'"),
        ({"placement": [0, 0, 0], "bogus": 1}, "unknown top-level key 'bogus'"),
        ({"placement": [0, 0, 0], "sed": 1}, "unknown top-level key 'sed'; did you mean 'seed'"),
        ({"placemnt": [0, 0, 0]}, "unknown top-level key 'placemnt'; did you mean 'placement'"),
        ({"priority": ["a", "b", "c"]}, r'priority\[0\] is "a"; priority entries must be integers'),
        (
            {"placement": [0, -1, 0]},
            r"placement\[1\] is -1; placement entries must be integers in \[0, 2147483647\]",
        ),
        ({"placement": 3}, "placement must be a list of integers"),
        ({"a": 0, "b": "gpu1", "c": 0}, "op 'b' is \"gpu1\""),
        ([0, 1.5, 0], r"placement\[1\] is 1.5"),
        ("{not json", "not valid JSON"),
        ("3", "expected a JSON list or object"),
    ],
)
def test_bad_files(tmp_path, graph, data, match):
    path = write(tmp_path, data)
    with pytest.raises(ValueError, match=match) as info:
        load_decision(path, graph)
    assert str(info.value).startswith(path)  # every error names the file


def test_devices_are_checked_against_the_cluster(tmp_path, graph):
    path = write(tmp_path, {"placement": [0, 4, 1]})
    assert load_decision(path, graph).placement.tolist() == [0, 4, 1]  # no cluster: unchecked
    with pytest.raises(ValueError, match="op 'b' .* is device 4, but the cluster has 4 devices"):
        load_decision(path, graph, num_devices=4)
    assert load_decision(path, graph, num_devices=5).placement.tolist() == [0, 4, 1]


def test_missing_file(tmp_path, graph):
    with pytest.raises(ValueError, match="does not exist"):
        load_decision(tmp_path / "nope.json", graph)


def test_unreadable_decisions_name_the_file(tmp_path, graph):
    with pytest.raises(ValueError, match="is not a file"):
        load_decision(tmp_path, graph)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        load_decision(deep, graph)
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({"priority": [10**20] + [0] * (graph.num_ops - 1)}))
    with pytest.raises(
        ValueError, match=r"priority\[0\] is 100000000000000000000; .* \[0, 2147483647\]"
    ):
        load_decision(huge, graph)


def test_a_list_is_read_in_the_graph_files_op_order(tmp_path):
    """A graph file listing its ops out of topological order: a plain list follows the file, as
    the same placement keyed by op names does (not graphopt's internal, sorted order)."""
    from graphopt.hardware import get_cluster
    from graphopt.sim import simulate

    ops = [("out", 1e12), ("src", 1e9), ("mid", 4e12)]  # file order; the graph is src -> mid -> out
    graph = CompGraph.build(
        "shuffled",
        [Op(name, "MatMul", flops=flops, output_bytes=1e8) for name, flops in ops],
        [("src", "mid", 1e8), ("mid", "out", 1e8)],
    )
    data = graph.to_json_dict()
    order = [graph.index[name] for name, _ in ops]
    data["ops"] = {key: [column[i] for i in order] for key, column in data["ops"].items()}
    (tmp_path / "g.json").write_text(json.dumps(data))
    graph = CompGraph.load(tmp_path / "g.json")
    assert graph.op_names == ("src", "mid", "out")  # sorted on load

    cluster = get_cluster("v100-nvlink-2")
    by_name = load_decision(write(tmp_path, {"out": 0, "src": 0, "mid": 1}), graph)
    by_list = load_decision(write(tmp_path, [0, 0, 1]), graph)  # out, src, mid: the file's order
    assert by_list.placement.tolist() == by_name.placement.tolist() == [0, 1, 0]
    step = simulate(graph, cluster, by_name).step_time
    assert simulate(graph, cluster, by_list).step_time == step
    misread = simulate(graph, cluster, Decision(placement=np.array([0, 0, 1]))).step_time
    assert misread != step  # the internal order would have been a different placement
