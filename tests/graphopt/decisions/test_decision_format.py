"""The version-1 decision file: round trips, file order, and every bad input as one line naming
the file."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from graphopt.decisions.format import (
    kernel_groups,
    parse_record,
    read_json,
    read_record,
    record_of,
    to_json,
)
from graphopt.decisions.io import load_decision
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster
from graphopt.sim import simulate
from graphopt.typing import Decision, Measurement


def chain(name: str = "g") -> CompGraph:
    """``a`` (MatMul) -> ``b`` (Relu) -> ``c`` (MatMul) -> ``d`` (Add): fusing ``a`` and ``b``
    joins two contractions in one kernel (rule 2b)."""
    ops = [
        Op(n, t, flops=1e9, bytes_accessed=1e6, output_bytes=1e6)
        for n, t in (("a", "MatMul"), ("b", "Relu"), ("c", "MatMul"), ("d", "Add"))
    ]
    return CompGraph.build(name, ops, [("a", "b", 1e6), ("b", "c", 1e6), ("c", "d", 1e6)])


CLUSTER = get_cluster("v100-nvlink-2")
DECISION = Decision(
    placement=np.array([0, 0, 1, 1]), priority=np.array([2, 0, 1, 0]), fusion=np.array([1, 0, 1, 0])
)


def save(tmp_path, graph=None, decision=DECISION, name="d.json", edit=None) -> str:
    graph = graph or chain()
    m = simulate(graph, CLUSTER, decision)
    data = to_json(record_of(graph, CLUSTER, decision, method="test", measurement=m))
    if edit is not None:
        edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=1))
    return str(path)


def test_a_saved_decision_reads_back_and_replays_exactly(tmp_path):
    graph = chain()
    path = save(tmp_path)
    data = json.loads(Path(path).read_text())
    assert data["format"] == "graphopt-decision" and data["version"] == 1
    assert data["placement"] == {"a": 0, "b": 0, "c": 1, "d": 1}
    assert data["kernels"] == [["a", "b"], ["c", "d"]]
    assert data["graph_fingerprint"] == graph.fingerprint
    assert data["cluster_fingerprint"] == CLUSTER.fingerprint
    loaded = load_decision(path, graph, cluster=CLUSTER)
    for key in ("placement", "priority", "fusion"):
        assert getattr(loaded, key).tolist() == getattr(DECISION, key).tolist()
    assert simulate(graph, CLUSTER, loaded).step_time == data["step_time"]


def test_arrays_left_out_stay_out(tmp_path):
    graph = chain()
    path = save(tmp_path, decision=Decision(placement=np.array([1, 1, 0, 0])))
    record = read_record(path)
    assert record.priority is None and record.fusion is None and record.kernels == ()
    loaded = load_decision(path, graph, cluster=CLUSTER)
    assert loaded.priority is None and loaded.fusion is None


def test_maps_follow_the_graph_files_op_order(tmp_path):
    """A graph file that lists its ops out of topological order: the maps list them as the file
    does, and read back to the same decision."""
    graph = chain()
    data = graph.to_json_dict()
    order = [3, 1, 0, 2]
    data["ops"] = {key: [column[i] for i in order] for key, column in data["ops"].items()}
    (tmp_path / "g.json").write_text(json.dumps(data))
    shuffled = CompGraph.load(tmp_path / "g.json")
    path = save(tmp_path, graph=shuffled)
    assert list(json.loads(Path(path).read_text())["placement"]) == ["d", "b", "a", "c"]
    assert load_decision(path, shuffled).placement.tolist() == DECISION.placement.tolist()


def test_kernel_groups_follow_rule_1():
    graph = chain()
    assert kernel_groups(graph, [0, 0, 0, 0]) == []
    assert kernel_groups(graph, [1, 0, 0, 0]) == [(0, 1)]
    assert kernel_groups(graph, [1, 1, 1, 0]) == [(0, 1, 2, 3)]
    assert kernel_groups(graph, [0, 1, 1, 0]) == [(1, 2, 3)]


def test_measurement_figures_are_kept():
    m = Measurement(float("inf"), np.zeros(2), np.zeros(2), 0.0, False, "illegal fusion: x")
    record = record_of(chain(), CLUSTER, DECISION, method="m", measurement=m, task="fusion")
    assert record.step_time is None and record.valid is False and record.reason.startswith("ill")
    assert to_json(record)["task"] == "fusion"


def _set(key, value):
    def edit(data):
        data[key] = value

    return edit


def _rename(data):
    data["placement"]["zz"] = data["placement"].pop("b")


def _drop(data):
    del data["priority"]["c"]


def _far(data):
    data["placement"]["c"] = 5


def _illegal(data):
    data["fusion"]["b"] = 1  # joins a, b, c: two contractions in one kernel
    data["placement"].update(c=0, d=0)
    data["kernels"] = [["a", "b", "c", "d"]]


def _kernels(data):
    data["kernels"] = [["a", "b"]]


def _bit(data):
    data["fusion"]["a"] = 2


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (_rename, "placement names op 'zz', which graph 'g' does not have"),
        (_drop, "priority gives no priority for 1 of the 4 ops of graph 'g', e.g. 'c'"),
        (_far, "op 'c' has device 5; the cluster has 2 devices"),
        (_illegal, r"illegal fusion \(rule 2b\)"),
        (_kernels, "kernels omits the kernel \\['c', 'd'\\]"),
        (_bit, "op 'a' has fusion bit 2"),
        (_set("version", 2), "decision file version 2; this graphopt reads version 1"),
        (_set("format", "other"), "format is \"other\", not 'graphopt-decision'"),
        (_set("placemnt", {}), "unknown key 'placemnt'; did you mean 'placement'"),
        (_set("placement", [0, 0, 1, 1]), "placement must map op names to integers"),
        (_set("devices", []), "devices must be a non-empty list"),
        (_set("seed", "0"), 'seed must be int or null, got "0"'),
        (_set("kernels", [["a", "q"]]), 'kernels\\[0\\] names "q", which is not an op'),
        (_set("step_time", float("nan")), "step_time must be a finite number of seconds >= 0"),
        (_set("step_time", float("inf")), "step_time must be a finite number .* got inf"),
        (_set("step_time", -1.0), "step_time must be a finite number .* got -1.0"),
    ],
)
def test_bad_files_are_one_line_naming_the_file(tmp_path, edit, match):
    path = save(tmp_path, edit=edit)
    with pytest.raises(ValueError, match=match) as info:
        load_decision(path, chain(), cluster=CLUSTER)
    assert str(info.value).startswith(path) and "\n" not in str(info.value)


def test_missing_key(tmp_path):
    path = save(tmp_path, edit=lambda d: d.pop("cluster_fingerprint"))
    with pytest.raises(ValueError, match="missing key 'cluster_fingerprint'"):
        load_decision(path, chain(), cluster=CLUSTER)


def test_a_decision_for_another_graph_or_cluster_names_both(tmp_path):
    path = save(tmp_path)
    other = chain("h")
    with pytest.raises(ValueError) as info:
        load_decision(path, other, cluster=CLUSTER)
    text = str(info.value)
    assert text.startswith(path) and "\n" not in text
    assert "graph 'g'" in text and "graph 'h'" in text
    assert chain().fingerprint[:12] in text and other.fingerprint[:12] in text
    four = get_cluster("v100-nvlink-4")
    with pytest.raises(ValueError) as info:
        load_decision(path, chain(), cluster=four)
    text = str(info.value)
    assert "cluster 'v100-nvlink-2'" in text and "cluster 'v100-nvlink-4'" in text
    assert CLUSTER.fingerprint[:12] in text and four.fingerprint[:12] in text


def test_an_op_listed_twice_is_refused(tmp_path):
    path = save(tmp_path)
    text = Path(path).read_text().replace('"a": 0,', '"a": 0, "a": 1,', 1)
    (tmp_path / "dup.json").write_text(text)
    with pytest.raises(ValueError, match="key 'a' is given twice in one object") as info:
        load_decision(tmp_path / "dup.json", chain(), cluster=CLUSTER)
    assert str(info.value).startswith(str(tmp_path / "dup.json"))
    # the older name-keyed map is checked the same way
    (tmp_path / "map.json").write_text('{"a": 0, "b": 0, "c": 1, "d": 1, "a": 1}')
    with pytest.raises(ValueError, match="key 'a' is given twice"):
        load_decision(tmp_path / "map.json", chain())


def test_a_truncated_file_says_so(tmp_path):
    path = save(tmp_path)
    text = Path(path).read_text()
    (tmp_path / "cut.json").write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match="truncated") as info:
        read_json(tmp_path / "cut.json")
    assert str(info.value).startswith(str(tmp_path / "cut.json"))


def test_a_pickled_decision_file_is_named_a_pickle(tmp_path):
    """#40: a pickle where a decision file was expected said "can't decode byte 0x80"."""
    path = tmp_path / "d.json"
    path.write_bytes(pickle.dumps({"placement": [0]}, protocol=4))
    with pytest.raises(ValueError) as info:
        read_json(path)
    assert str(info.value).startswith(f"{path} is a pickle file (protocol 4), which graphopt")
    assert str(info.value).endswith("; give a decision file (JSON)")


def test_without_a_cluster_devices_are_checked_against_the_files(tmp_path):
    path = save(tmp_path)
    record = read_record(path)
    assert record.devices == ("gpu0", "gpu1") and record.method == "test"
    with pytest.raises(ValueError, match="has device 2; the cluster has 2 devices"):
        parse_record(path, {**json.loads(Path(path).read_text()), "placement": {"a": 2}})


def test_an_episode_file_of_another_graph_version_is_refused(tmp_path):
    """The environments' episode files carry the graph's fingerprint: it is checked too."""
    graph = chain()
    path = tmp_path / "episode.json"
    path.write_text(
        json.dumps({"graph": "g", "graph_fingerprint": "0" * 64, "placement": [0, 0, 1, 1]})
    )
    with pytest.raises(ValueError, match="fingerprint 000000000000, not graph 'g'"):
        load_decision(path, graph)


def test_placement_by_names_places_the_named_ops_and_checks_the_rest() -> None:
    from graphopt.decisions.format import placement_by_names
    from graphopt.workloads import get_graph

    graph = get_graph("txl-tiny")
    names = graph.op_names
    devices = {name: i % 2 for i, name in enumerate(names[: graph.num_ops * 3 // 4])}
    devices["not/an/op"] = 1  # skipped
    placement, named = placement_by_names("f.json", devices, graph, 2)
    assert named == graph.num_ops * 3 // 4
    assert (placement[:named] == np.arange(named) % 2).all() and (placement[named:] == -1).all()
    with pytest.raises(ValueError, match=r"^f\.json: op .* has device 1, but the cluster has 1"):
        placement_by_names("f.json", devices, graph, 1)
    few = dict(list(devices.items())[:3])
    with pytest.raises(ValueError, match=r"names 3 of the .* another model\?"):
        placement_by_names("f.json", few, graph, 2)
