"""PipeDream importer: the 14 real profiles, a hand-worked profile, and malformed inputs."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pytest

import graphopt
from graphopt.blocks import block_dag
from graphopt.data import PIPEDREAM_DIR as DATA
from graphopt.hardware import get_cluster
from graphopt.importers import (
    default_profile_dir,
    estimate_forward_flops,
    list_profiles,
    load_pipedream,
    parse_profile,
    profile_to_graph,
)
from graphopt.importers.pipedream import ENV_VAR, FALLBACK_FLOPS_PER_SECOND
from graphopt.sim import simulate

# Forward node counts, from the table in SOURCE.md.
NODES = {
    "alexnet": 23,
    "vgg16": 41,
    "gnmt": 48,
    "squeezenet1_0": 68,
    "resnet18": 71,
    "gnmt_large": 96,
    "resnet50": 177,
    "resnext50": 177,
    "inception_v3": 326,
    "resnet101": 347,
    "resnext101": 347,
    "densenet121": 429,
    "nasnetamobile": 921,
    "nasnetalarge": 1251,
}


@pytest.fixture(scope="module")
def graphs():
    """name -> (forward graph, training graph, file text)."""
    files = list_profiles(DATA)
    return {
        name: (
            load_pipedream(path, training=False),
            load_pipedream(path),
            path.read_text(encoding="utf-8"),
        )
        for name, path in files.items()
    }


def _file_sum(text: str, key: str) -> float:
    """Summed milliseconds of ``key`` in a profile, read independently of the importer."""
    return math.fsum(float(v) for v in re.findall(rf"{key}=([0-9.eE+-]+)", text))


def _is_backward(name: str) -> bool:
    return name.endswith("/backward")


# ---------------------------------------------------------------------------------- real files
def test_list_profiles_finds_the_fourteen():
    assert list(list_profiles(DATA)) == sorted(NODES)


@pytest.mark.parametrize("name", sorted(NODES))
def test_profile_counts_and_times(graphs, name):
    forward, training, text = graphs[name]
    assert forward.num_ops == NODES[name]
    assert training.num_ops == 2 * NODES[name]
    # every forward edge, its reversed gradient edge, and one stash edge per node
    assert training.num_edges == 2 * forward.num_edges + forward.num_ops
    assert forward.metadata == {
        "source": "pipedream",
        "model": name,
        "kind": "V100",
        "training": False,
    }
    assert training.metadata["training"] is True
    times = training.measured["V100"]
    back = np.array([_is_backward(n) for n in training.op_names])
    fwd_ms, bwd_ms = (
        _file_sum(text, "forward_compute_time"),
        _file_sum(text, "backward_compute_time"),
    )
    assert math.fsum(times[~back]) == pytest.approx(fwd_ms / 1e3, rel=1e-12)
    assert math.fsum(times[back]) == pytest.approx(bwd_ms / 1e3, rel=1e-12)
    assert math.fsum(forward.measured["V100"]) == pytest.approx(fwd_ms / 1e3, rel=1e-12)
    assert not np.isnan(times).any()
    assert all(n.startswith(f"{name}/node") for n in training.op_names)


@pytest.mark.parametrize("name", sorted(NODES))
def test_single_device_step_time_is_the_summed_measurements(graphs, name):
    # Every op on device 0 (a V100): the ops run one after another with their measured times and
    # nothing crosses a link, so the step time is exactly the sum.
    forward, training, _ = graphs[name]
    cluster = get_cluster("v100-nvlink-4")
    for graph in (forward, training):
        m = simulate(graph, cluster)
        total = math.fsum(graph.measured["V100"])
        assert m.step_time == pytest.approx(total, rel=1e-12)
        assert m.bytes_moved == 0.0
    assert simulate(forward, cluster).valid
    # Training keeps every activation until its backward op: a few models at their profiled batch
    # sizes exceed one 16 GB V100; on 32 GB V100s all fit.
    m = simulate(training, cluster)
    assert m.valid or m.reason.startswith("out of memory"), m.reason
    big = dataclasses.replace(
        cluster, devices=tuple(dataclasses.replace(d, memory=32e9) for d in cluster.devices)
    )
    assert simulate(training, big).valid


@pytest.mark.parametrize(
    ("name", "gmacs"),
    # torchvision's published multiply-accumulates per 224x224 image
    [("alexnet", 0.714), ("vgg16", 15.47), ("resnet18", 1.814), ("resnet50", 4.089)],
)
def test_flops_match_published_per_image_counts(graphs, name, gmacs):
    forward = graphs[name][0]
    (inp,) = [forward.output_bytes[i] for i, t in enumerate(forward.op_types) if t == "Input"]
    batch = inp / 4 / (3 * 224 * 224)
    assert batch == int(batch)
    per_image = forward.flops.sum() / batch
    # 2 FLOPs per MAC; BatchNorm/ReLU/pooling add a little on top
    assert 2e9 * gmacs <= per_image <= 1.05 * 2e9 * gmacs


def test_compute_layers_get_flops_and_other_kinds_a_roofline(graphs):
    for forward, training, _ in graphs.values():
        for graph in (forward, training):
            for i, t in enumerate(graph.op_types):
                if t.removesuffix("Backward") in ("Conv2d", "Linear", "LSTM", "Classifier"):
                    assert graph.flops[i] > 0, graph.op_names[i]
    # The same graph on a CPU (no measured times for kind CPU) takes a finite roofline time.
    forward = graphs["resnet50"][0]
    cpu = get_cluster("hetero-cpu-2gpu")
    assert cpu.devices[0].kind == "CPU"
    m = simulate(forward, cpu)
    assert m.valid and 0 < m.step_time < math.inf
    cpu_dev = cpu.devices[0]
    expected = math.fsum(cpu_dev.roofline_time(forward.flops, forward.bytes_accessed))
    assert m.step_time == pytest.approx(expected, rel=1e-12)


def test_gnmt_multi_output_edges_follow_getitem():
    graph = load_pipedream(DATA / "gnmt.txt", training=False)
    edge = {
        (graph.op_names[s], graph.op_names[d]): b
        for s, d, b in zip(graph.edge_src, graph.edge_dst, graph.edge_bytes, strict=True)
    }
    # node7 -- LSTM(2048, 1024), activation_size=[6291456.0; 131072.0; 131072.0]
    assert edge["gnmt/node7", "gnmt/node8"] == 6291456.0  # __getitem__(0)
    assert edge["gnmt/node7", "gnmt/node9"] == 131072.0  # __getitem__(1)
    i = graph.index["gnmt/node7"]
    assert graph.output_bytes[i] == 6291456.0 + 2 * 131072.0
    # 1536 tokens (6291456 / 4 / 1024), 8 * h * (i + h) FLOPs each
    assert graph.flops[i] == 1536 * 8 * 1024 * (2048 + 1024)
    # composite modules without a rule fall back to the measured time
    j = graph.index["gnmt/node5"]
    assert graph.op_types[j] == "EmuBidirLSTM"
    assert graph.flops[j] == pytest.approx(5.247e-3 * FALLBACK_FLOPS_PER_SECOND, rel=1e-12)


def test_load_by_name_and_errors():
    assert load_pipedream("alexnet", training=False).num_ops == 23
    with pytest.raises(FileNotFoundError, match="alexnet"):
        load_pipedream("no-such-model")


def test_a_profile_without_node_lines_is_refused(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match=r"empty\.txt: no node lines .*PipeDream graph\.txt"):
        load_pipedream(empty)


def test_error_line_numbers_in_a_real_file():
    text = (DATA / "alexnet.txt").read_text(encoding="utf-8")
    lines = text.split("\n")
    bad = lines.copy()
    bad[9] = bad[9].replace("forward_compute_time=", "forward_compute_time=x")
    with pytest.raises(ValueError, match=r"^alexnet\.txt:10: forward_compute_time='x"):
        parse_profile("\n".join(bad), "alexnet", source="alexnet.txt")
    # cut inside the last edge line: "\tnode6 -- node7" -> "\tnode6 --"
    assert lines[-1] == "\tnode6 -- node7"
    with pytest.raises(ValueError, match=rf"^a:{len(lines)}: expected an edge line.*truncated"):
        parse_profile(text[:-5], "alexnet", source="a")


def test_shipped_profiles_need_no_environment_variable(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert default_profile_dir() == DATA == Path(graphopt.__file__).parent / "data" / "pipedream"
    assert list(list_profiles()) == sorted(NODES)
    assert (DATA / "LICENSE.txt").read_text(encoding="utf-8").startswith("MIT License")
    assert load_pipedream("gnmt", training=False).num_ops == NODES["gnmt"]


def test_default_profile_dir_env_override(tmp_path, monkeypatch):
    (tmp_path / "tiny.txt").write_text(TINY)
    (tmp_path / "LICENSE.txt").write_text("MIT")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "graph.txt").write_text(TINY)
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert default_profile_dir() == tmp_path
    assert list_profiles() == {
        "other": tmp_path / "other" / "graph.txt",
        "tiny": tmp_path / "tiny.txt",
    }
    assert load_pipedream("other").name == "other"
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(ValueError, match=ENV_VAR):
        default_profile_dir()


# ---------------------------------------------------------------------------------- by hand
# One 224x224 RGB image (3 * 224 * 224 * 4 = 602112 B), a 3x3 conv to 64 channels
# (64 * 224 * 224 * 4 = 12845056 B; weights (64 * 27 + 64) * 4 = 7168 B) and an in-place ReLU.
TINY = (
    "node1 -- Input -- forward_compute_time=0.500, backward_compute_time=0.000, "
    "activation_size=602112.0, parameter_size=0.000\n"
    "node2 -- Conv2d(3, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)) -- "
    "forward_compute_time=2.000, backward_compute_time=3.000, activation_size=12845056.0, "
    "parameter_size=7168.000\n"
    "node3 -- ReLU(inplace) -- forward_compute_time=0.250, backward_compute_time=0.125, "
    "activation_size=12845056.0, parameter_size=0.000\n"
    "\tnode1 -- node2\n"
    "\tnode2 -- node3\n"
)
IMG, ACT, W = 602112.0, 12845056.0, 7168.0
CONV_FLOPS = 2 * (64 * 224 * 224) * 3 * 3 * 3  # 2 * out elements * C_in * kh * kw
RELU_FLOPS = 64 * 224 * 224


def _edges(graph):
    return {
        (graph.op_names[s], graph.op_names[d], b)
        for s, d, b in zip(graph.edge_src, graph.edge_dst, graph.edge_bytes, strict=True)
    }


def test_tiny_profile_parses():
    profile = parse_profile(TINY, "tiny")
    assert [layer.id for layer in profile.layers] == [1, 2, 3]
    assert profile.layers[1].module.startswith("Conv2d(3, 64")
    assert profile.layers[1].activation_sizes == (ACT,)
    assert profile.layers[1].parameter_bytes == W
    assert profile.edges == ((1, 2), (2, 3))
    assert profile.total_forward_ms == 2.75 and profile.total_backward_ms == 3.125


def test_tiny_forward_graph_exactly():
    g = profile_to_graph(parse_profile(TINY, "tiny"), training=False)
    assert g.op_names == ("tiny/node1", "tiny/node2", "tiny/node3")
    assert g.op_types == ("Input", "Conv2d", "ReLU")
    assert CONV_FLOPS == 173408256
    assert g.flops.tolist() == [0.0, CONV_FLOPS, RELU_FLOPS]
    assert g.output_bytes.tolist() == [IMG, ACT, ACT]
    assert g.param_bytes.tolist() == [0.0, W, 0.0]
    assert g.bytes_accessed.tolist() == [IMG, IMG + ACT + W, 2 * ACT]
    assert g.measured["V100"].tolist() == [0.5 / 1e3, 2.0 / 1e3, 0.25 / 1e3]
    assert _edges(g) == {("tiny/node1", "tiny/node2", IMG), ("tiny/node2", "tiny/node3", ACT)}
    assert g.layer == g.op_names  # the node is the layer, not its module repr
    assert g.colocation == ("", "", "")


def test_tiny_training_graph_exactly():
    g = profile_to_graph(parse_profile(TINY, "tiny"), kind="TitanX")
    assert g.metadata == {
        "source": "pipedream",
        "model": "tiny",
        "kind": "TitanX",
        "training": True,
        "forward_ops": 3,
    }
    assert not any(name.endswith("/backward") for name in g.op_names[:3])
    ops = {name: i for i, name in enumerate(g.op_names)}
    assert set(ops) == {f"tiny/node{k}{s}" for k in (1, 2, 3) for s in ("", "/backward")}

    def col(array, suffix=""):
        return [array[ops[f"tiny/node{k}{suffix}"]] for k in (1, 2, 3)]

    bwd = "/backward"
    assert col(g.op_types, bwd) == ["InputBackward", "Conv2dBackward", "ReLUBackward"]
    assert col(g.flops, bwd) == [0.0, 2 * CONV_FLOPS, RELU_FLOPS]  # weights: 2x, else 1x
    assert col(g.output_bytes, bwd) == [0.0, IMG, ACT]  # gradients w.r.t. the inputs
    assert col(g.param_bytes, bwd) == [0.0, W, 0.0]
    assert col(g.bytes_accessed, bwd) == [2 * IMG, 2 * (IMG + ACT + W), 4 * ACT]
    assert col(g.measured["TitanX"], bwd) == [0.0, 3.0 / 1e3, 0.125 / 1e3]
    assert col(g.colocation) == col(g.colocation, bwd) == ["tiny/node1", "tiny/node2", "tiny/node3"]
    assert col(g.layer) == col(g.layer, bwd) == col(g.colocation)
    assert _edges(g) == {
        ("tiny/node1", "tiny/node2", IMG),
        ("tiny/node2", "tiny/node3", ACT),
        ("tiny/node3/backward", "tiny/node2/backward", ACT),
        ("tiny/node2/backward", "tiny/node1/backward", IMG),
        ("tiny/node1", "tiny/node1/backward", IMG),  # stashed activations
        ("tiny/node2", "tiny/node2/backward", ACT),
        ("tiny/node3", "tiny/node3/backward", ACT),  # the loss gradient of the last layer
    }


def _node(k, module, acts, fwd="1.000", params="0.000"):
    return (
        f"node{k} -- {module} -- forward_compute_time={fwd}, backward_compute_time=1.000, "
        f"activation_size={acts}, parameter_size={params}\n"
    )


def test_multi_output_rules():
    # node1 has 2 outputs and 2 consumers (no __getitem__): in file order, node3 gets output 0
    # and node2 output 1. node4 has 3 outputs and 2 consumers: both get the largest.
    text = (
        _node(1, "Split", "[100.0; 200.0]")
        + _node(2, "ReLU()", "200.0")
        + _node(3, "ReLU()", "100.0")
        + _node(4, "Split", "[10.0; 30.0; 20.0]")
        + _node(5, "ReLU()", "30.0")
        + _node(6, "ReLU()", "30.0")
        + "\tnode1 -- node3\n\tnode1 -- node2\n\tnode4 -- node5\n\tnode4 -- node6\n"
    )
    g = profile_to_graph(parse_profile(text, "m"), training=False)
    assert _edges(g) == {
        ("m/node1", "m/node3", 100.0),
        ("m/node1", "m/node2", 200.0),
        ("m/node4", "m/node5", 30.0),
        ("m/node4", "m/node6", 30.0),
    }
    assert g.output_bytes[g.index["m/node4"]] == 60.0
    # the four identical ReLU() modules stay four layers, four colour classes and blocks
    assert len(set(g.layer)) == 6 and block_dag(g).num_blocks == 6
    # "Split" has no FLOP rule: measured seconds * the assumed throughput
    assert g.flops[g.index["m/node1"]] == 1e-3 * FALLBACK_FLOPS_PER_SECOND


@pytest.mark.parametrize(
    ("module", "acts", "inputs", "expected"),
    [
        # grouped conv: 2 * out * (C_in / groups) * kh * kw
        (
            "Conv2d(64, 64, kernel_size=(3, 3), stride=(1, 1), groups=32, bias=False)",
            4000.0,
            1,
            2 * 1000 * 2 * 9,
        ),
        ("Linear(in_features=9216, out_features=4096, bias=True)", 4 * 4096.0, 1, 2 * 4096 * 9216),
        # 10 tokens of a bidirectional LSTM: 2 directions * 8 * h * (i + h) per token
        ("LSTM(16, 8, bidirectional=True)", 4 * 10 * 16.0, 1, 10 * 2 * 8 * 8 * (16 + 8)),
        ("LSTM(16, 8, num_layers=2)", 4 * 10 * 8.0, 1, 10 * 8 * 8 * ((16 + 8) + (8 + 8))),
        ("BatchNorm2d(64, eps=1e-05, momentum=0.1, affine=True)", 400.0, 1, 600),
        ("MaxPool2d(kernel_size=3, stride=2, padding=0)", 400.0, 1, 900),  # 3 means 3x3
        ("Conv1d(4, 8, 5)", 400.0, 1, 2 * 100 * 4 * 5),
        ("AvgPool2d(kernel_size=(5, 5), stride=(3, 3))", 400.0, 1, 2500),
        ("Add", 400.0, 3, 200),
        ("Concat(1)", 400.0, 2, 0),
        (
            "Classifier(  (classifier): Linear(in_features=8, out_features=4, bias=True))",
            16.0,
            1,
            2 * 4 * 8,
        ),
        ("EmuBidirLSTM(  (bidir): LSTM(4, 4)  (layer1): LSTM(4, 4))", 16.0, 1, None),
        ("Mystery(3)", 16.0, 1, None),
    ],
)
def test_flop_rules(module, acts, inputs, expected):
    assert estimate_forward_flops(module, [acts], inputs) == expected


# ---------------------------------------------------------------------------------- malformed
_GOOD3 = _node(3, "ReLU(inplace)", "12845056.0")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        # truncated inside the last node line
        (TINY.split("\tnode1")[0].rsplit(", param", 1)[0], 3, r"lacks parameter_size.*truncated"),
        (TINY.split("\tnode1")[0][:-40], 3, r"expected 'key=value'.*truncated"),
        (
            TINY.replace("forward_compute_time=2.000", "forward_compute_time=2,0"),
            2,
            r"not a number|expected 'key=value'",
        ),
        (
            TINY.replace("forward_compute_time=2.000", "forward_compute_time=fast"),
            2,
            r"forward_compute_time='fast' is not a number; expected a finite non-negative",
        ),
        (TINY.replace("parameter_size=7168.000", "parameter_size=-1"), 2, r"non-negative"),
        (TINY.replace("\tnode2 -- node3", "\tnode2 -- node9"), 5, r"node9, which no node line"),
        (
            TINY.replace(
                "activation_size=12845056.0, parameter_size=7168",
                "activation_size=[12845056.0; 4.0, parameter_size=7168",
            ),
            2,
            r"bracket list of activation_size does not close: expected '\]'",
        ),
        (TINY + _GOOD3, 6, r"duplicate node id node3 \(first defined on line 3\)"),
        (TINY.replace(", parameter_size=0.000\nnode2", "\nnode2"), 1, r"lacks parameter_size"),
        (TINY + "\tnode3 -- node1\n", 6, r"closes the cycle"),
        (TINY + "\tnode2 -- node3\n", 6, r"duplicate edge node2 -- node3 \(first on line 5\)"),
        (TINY + "hello\n", 6, r"expected a node line 'node<N> -- <module repr> -- "),
        (TINY + "\tnode1 -> node2\n", 6, r"expected an edge line"),
        (
            "nodeX -- Input -- forward_compute_time=0, backward_compute_time=0, "
            "activation_size=0, parameter_size=0\n",
            1,
            r"'nodeX' is not a node id",
        ),
    ],
)
def test_malformed_inputs_name_the_line(text, line, message):
    with pytest.raises(ValueError, match=rf"^bad\.txt:{line}: .*({message})"):
        parse_profile(text, "bad", source="bad.txt")


def test_truncation_hint_only_without_final_newline():
    bad = TINY.replace("\tnode2 -- node3\n", "\tnode2 -- node9\n")
    with pytest.raises(ValueError) as excinfo:
        parse_profile(bad, "bad")
    assert "truncated" not in str(excinfo.value)
    with pytest.raises(ValueError, match="truncated"):
        parse_profile(bad.rstrip("\n"), "bad")
