"""Tarnawski importer: the shipped operator graph, a hand-worked file, and malformed inputs."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest

from graphopt.blocks import op_groups
from graphopt.data import TARNAWSKI_DIR
from graphopt.hardware import Cluster
from graphopt.importers.sources import is_source, load_source
from graphopt.importers.tarnawski import (
    ACC_KIND,
    CPU_KIND,
    LINK_BANDWIDTH,
    list_graphs,
    load_tarnawski,
)
from graphopt.sim import simulate
from graphopt.typing import Decision

# (nodes, edges, colour classes, accelerators, CPU cores), from the table in SOURCE.md.
SHIPPED = {
    "bert_l-3": (235, 250, 117, 4, 8),
    "bert_l-6": (418, 448, 216, 6, 8),
    "resnet50": (604, 619, 176, 9, 8),
    "bert_l-12": (783, 843, 413, 8, 8),
}
# Characters of each published file (commit b207b6a of msr-fiddle/dnn-partitioning).
SIZES = {"bert_l-3": 61217, "bert_l-6": 109616, "resnet50": 157350, "bert_l-12": 208585}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_graph_loads_with_its_counts(name):
    nodes, edges, classes, accs, cpus = SHIPPED[name]
    graph, cluster = load_tarnawski(name)
    assert graph.num_ops == nodes and len(graph.edge_src) == edges
    assert len({c for c in graph.colocation if c}) == classes
    kinds = [d.kind for d in cluster.devices]
    assert kinds.count(ACC_KIND) == accs and kinds.count(CPU_KIND) == cpus
    assert (cluster.route, cluster.copies, cluster.colocation) == ("via-host", "free", "enforce")
    assert cluster.host == "cpu0"
    assert load_source(f"tarnawski:{name}").fingerprint == graph.fingerprint
    # the cluster file shipped beside it (for --cluster) is the same cluster
    assert Cluster.load(TARNAWSKI_DIR / f"{name}.cluster.yaml") == cluster


def test_shipped_file_is_the_published_one():
    for name, size in SIZES.items():
        text = (TARNAWSKI_DIR / f"{name}_inference.json").read_text(encoding="utf-8")
        assert len(text) == size and not text.endswith("\n")  # the published file's length
        data = json.loads(text)
        # every edge's cost is its size at 2^31 bytes/s, in milliseconds (the unit rule)
        for edge in data["edges"]:
            assert edge["cost"] == pytest.approx(edge["size"] / 2**31 * 1e3, rel=1e-12)
        # and every node's CPU time is 23 times its accelerator time (the release's CPU model)
        for node in data["nodes"]:
            assert node["cpuLatency"] == pytest.approx(23 * node["fpgaLatency"], rel=1e-12)
    assert set(list_graphs()) >= set(SHIPPED)


def test_colour_classes_become_colocation_groups():
    graph, _ = load_tarnawski("bert_l-3")
    index = {name.split(":", 1)[1]: u for u, name in enumerate(graph.op_names)}
    # the word embedding, its Gather and the tied output projection's Transpose share class 5
    group = {
        graph.colocation[index[n]]
        for n in ("bert.embeddings.word_embeddings.weight", "Gather1", "Transpose13")
    }
    assert group == {"bert_l-3/color5"}
    assert graph.colocation[index["Shape1"]] == "" and graph.layer[index["Shape1"]] == ""
    uncoloured = sum(1 for c in graph.colocation if not c)
    assert op_groups(graph)[1] == SHIPPED["bert_l-3"][2] + uncoloured  # a class is one group


def _tiny() -> dict:
    return {
        "maxSizePerFPGA": 1000.0,
        "maxFPGAs": 2,
        "maxCPUs": 1,
        "nodes": [
            {
                "id": 7,
                "name": "w",
                "supportedOnFpga": True,
                "cpuLatency": 0,
                "fpgaLatency": 0,
                "isBackwardNode": False,
                "colorClass": 3,
                "size": 400.0,
            },
            {
                "id": 2,
                "name": "MatMul1",
                "supportedOnFpga": 1,
                "cpuLatency": 2.0,
                "fpgaLatency": 0.5,
                "isBackwardNode": 0,
                "colorClass": 3,
                "size": 64.0,
            },
            {
                "id": 5,
                "supportedOnFpga": False,
                "cpuLatency": 1.5,
                "fpgaLatency": 0.25,
                "isBackwardNode": True,
                "size": 8.0,
            },
        ],
        "edges": [
            {"sourceId": 7, "destId": 2, "cost": 0.125, "size": 268435.456},
            {"sourceId": 2, "destId": 5, "cost": 0.001},
        ],
    }


def _write(tmp_path, data, name="tiny.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_field_mapping_of_a_hand_written_file(tmp_path):
    graph, cluster = load_tarnawski(_write(tmp_path, _tiny()))
    names = ["tiny/7:w", "tiny/2:MatMul1", "tiny/5:n5"]
    assert list(graph.op_names) == names  # the file's order is a topological order
    assert list(graph.op_types) == ["Weight", "MatMul", "Op"]
    assert graph.measured[ACC_KIND].tolist() == [0.0, 0.5e-3, 0.25e-3]
    assert graph.measured[CPU_KIND].tolist() == [0.0, 2.0e-3, 1.5e-3]
    assert graph.param_bytes.tolist() == [400.0, 0.0, 0.0]  # the weight: no input, no time
    assert graph.output_bytes.tolist() == [0.0, 64.0, 8.0]
    assert list(graph.colocation) == ["tiny/color3", "tiny/color3", ""]
    assert list(graph.allowed) == [(), (), (CPU_KIND,)]
    assert graph.edge_bytes.tolist() == [0.125e-3 * LINK_BANDWIDTH, 0.001e-3 * LINK_BANDWIDTH]
    assert graph.metadata["backward_ops"] == ["tiny/5:n5"]
    assert [(d.name, d.kind, d.memory) for d in cluster.devices] == [
        ("cpu0", CPU_KIND, 384e9),
        ("acc0", ACC_KIND, 1000.0),
        ("acc1", ACC_KIND, 1000.0),
    ]
    assert np.all(cluster.latency == 0) and cluster.bandwidth[0, 1] == LINK_BANDWIDTH
    assert Cluster.from_dict(cluster.to_dict()) == cluster  # saved and loaded, the same cluster


def test_a_transfer_costs_the_files_cost_on_each_hop(tmp_path):
    graph, cluster = load_tarnawski(_write(tmp_path, _tiny()))
    # w and MatMul1 on acc0, the CPU-only node on cpu0: one hop of 0.001 ms
    result = simulate(graph, cluster, Decision(placement=np.array([1, 1, 0])))
    assert result.valid
    assert result.step_time == pytest.approx(0.5e-3 + 0.001e-3 + 1.5e-3, rel=1e-9)


def test_gzipped_file_and_source_path(tmp_path):
    path = tmp_path / "tiny_inference.json.gz"
    path.write_bytes(gzip.compress(json.dumps(_tiny()).encode()))
    graph, _ = load_tarnawski(path)
    assert graph.name == "tiny" and graph.num_ops == 3
    assert is_source("tarnawski:x")
    assert load_source(f"tarnawski:{path}").num_ops == 3


def test_missing_key_names_the_file_and_key(tmp_path):
    data = _tiny()
    del data["nodes"][1]["fpgaLatency"]
    path = _write(tmp_path, data)
    with pytest.raises(ValueError, match=rf"{path}: nodes\[1\] lacks the key 'fpgaLatency'"):
        load_tarnawski(path)
    data = _tiny()
    del data["maxFPGAs"]
    with pytest.raises(ValueError, match=r"tiny\.json: the top level lacks the key 'maxFPGAs'"):
        load_tarnawski(_write(tmp_path, data))


def test_cycle_is_one_line_naming_the_file(tmp_path):
    data = _tiny()
    data["edges"].append({"sourceId": 5, "destId": 2, "cost": 0.1})
    path = _write(tmp_path, data)
    with pytest.raises(ValueError, match=rf"{path}: edges: .*cycle") as info:
        load_tarnawski(path)
    assert "\n" not in str(info.value)


def test_bad_values_and_unknown_names(tmp_path):
    data = _tiny()
    data["edges"][0]["destId"] = 99
    with pytest.raises(ValueError, match=r"edges\[0\]: destId 99 names no node"):
        load_tarnawski(_write(tmp_path, data))
    data = _tiny()
    data["nodes"][0]["cpuLatency"] = -1
    with pytest.raises(ValueError, match=r"nodes\[0\]: cpuLatency must be a finite non-negative"):
        load_tarnawski(_write(tmp_path, data))
    with pytest.raises(ValueError, match=r"no Tarnawski operator graph 'bert_l-99'.*bert_l-3"):
        load_tarnawski("bert_l-99")
    with pytest.raises(ValueError, match=r"no Tarnawski operator graph 'bert_l-99'"):
        load_source("tarnawski:bert_l-99")
    with pytest.raises(ValueError, match="takes no arguments"):
        load_source("tarnawski:bert_l-3?mode=forward")
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.json: cannot read it as JSON"):
        load_tarnawski(bad)


def test_times_are_seconds():
    graph, _ = load_tarnawski("bert_l-3")
    total_acc = math.fsum(graph.measured[ACC_KIND])
    assert 0.01 < total_acc < 0.1  # tens of milliseconds for BERT-3 on one accelerator


# Rows of the table in docs/results/contiguous.md (ms): the two Tarnawski placers on the
# authors' own graph and cluster, replayed through the simulator.
TABLE = {"bert_l-3": (407.450, 401.539), "resnet50": (649.266, 714.221)}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_tarnawski_placers_reproduce_the_documented_rows(name):
    from graphopt.baselines.tarnawski import latency_greedy, max_load_dp

    graph, cluster = load_tarnawski(name)
    for placer, expected in zip((latency_greedy, max_load_dp), TABLE[name], strict=True):
        result = simulate(graph, cluster, Decision(placement=placer(graph, cluster)))
        assert result.valid
        assert result.step_time * 1e3 == pytest.approx(expected, abs=5e-4)
