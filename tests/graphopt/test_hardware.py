"""Tests for :mod:`graphopt.hardware`: the presets and their figures, the roofline and transfer
times, the cluster file format (round trips, ``count`` / ``preset`` expansion) and the errors
raised for bad input."""

from __future__ import annotations

import json
import math
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from graphopt import hardware
from graphopt.hardware import (
    DEFAULT_CLUSTER,
    DEVICE_SPECS,
    MAX_DEVICES,
    PRESETS,
    Cluster,
    Device,
    get_cluster,
    list_presets,
)
from graphopt.sim.links import link_arrays, transfer_time, transfer_times

REQUIRED_PRESETS = (
    "v100-nvlink-2",
    "v100-nvlink-4",
    "v100-nvlink-8",
    "v100-pcie-4",
    "hetero-cpu-2gpu",
    "doppler-4",
    "doppler-8",
    "accel-host",
)
PUBLISHED_SETTINGS = {
    "doppler-4": ("ICLR 2026", {"contention": "none", "send": "per-consumer", "dispatch": "fcfs"}),
    "doppler-8": ("ICLR 2026", {"contention": "none", "send": "per-consumer", "dispatch": "fcfs"}),
    "accel-host": ("NeurIPS 2020", {"route": "via-host", "copies": "free", "host": "cpu0"}),
}
"""Presets that reproduce a paper's setting: the paper their comment names, and their options."""
NVLINK = 25e9  # NVLink 2.0, bytes/s per link per direction


# ---------------------------------------------------------------------- helpers
def base_dict() -> dict[str, Any]:
    """A valid two-device cluster in the file format, for the error tests to break."""
    return {
        "name": "pair",
        "description": "two devices",
        "devices": [
            {
                "name": "gpu0",
                "kind": "V100",
                "peak_flops": 15.7e12,
                "mem_bandwidth": 900e9,
                "memory": 16e9,
                "launch_overhead": 5e-6,
            },
            {"name": "gpu1", "preset": "V100-SXM2-16GB"},
        ],
        "links": {
            "default": {"bandwidth": 12e9, "latency": 1e-5},
            "pairs": [{"src": "gpu0", "dst": "gpu1", "bandwidth": 50e9, "latency": 5e-6}],
        },
    }


def asymmetric_cluster() -> Cluster:
    """Three devices of two kinds, with a one-way link and a zero latency."""
    data = {
        "name": "asym",
        "devices": [
            {"name": "cpu", "preset": "Xeon-8180-2S"},
            {"name": "gpu", "preset": "V100-SXM2-16GB", "count": 2},
        ],
        "links": {
            "default": {"bandwidth": 12e9, "latency": 1e-5},
            "pairs": [
                {"src": "gpu0", "dst": "gpu1", "bandwidth": 50e9, "latency": 0.0},
                {
                    "src": "cpu",
                    "dst": "gpu1",
                    "bandwidth": 3e9,
                    "latency": 2e-5,
                    "bidirectional": False,
                },
            ],
        },
    }
    return Cluster.from_dict(data)


def assert_same(a: Cluster, b: Cluster) -> None:
    assert a == b and a.fingerprint == b.fingerprint
    assert a.devices == b.devices and a.name == b.name and a.description == b.description
    np.testing.assert_array_equal(a.bandwidth, b.bandwidth)
    np.testing.assert_array_equal(a.latency, b.latency)


# ---------------------------------------------------------------------- presets
def test_required_presets_exist_and_are_listed() -> None:
    assert set(REQUIRED_PRESETS) <= set(PRESETS)
    assert DEFAULT_CLUSTER in PRESETS
    descriptions = list_presets()
    assert set(descriptions) == set(PRESETS)
    assert all(d and "\n" not in d for d in descriptions.values())


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_loads_with_sane_figures(name: str) -> None:
    c = get_cluster(name)
    assert c.name == name and c is PRESETS[name]()  # file stem == name; built once
    d = c.num_devices
    assert len({dev.name for dev in c.devices}) == d
    assert c.bandwidth.shape == c.latency.shape == (d, d)
    assert np.all(np.isinf(np.diag(c.bandwidth))) and np.all(np.diag(c.latency) == 0)
    off = ~np.eye(d, dtype=bool)
    assert np.all((c.bandwidth[off] >= 1e9) & (c.bandwidth[off] <= 1e12))
    assert np.all((c.latency[off] > 0) & (c.latency[off] < 1e-4))
    np.testing.assert_array_equal(c.bandwidth, c.bandwidth.T)  # every preset link is symmetric
    assert np.all((c.peak_flops > 1e12) & (c.peak_flops < 1e14))
    assert np.all((c.mem_bandwidth > 1e11) & (c.memory >= 16e9))
    assert np.all((c.launch_overhead > 0) & (c.launch_overhead < 1e-4))
    for array in (c.bandwidth, c.latency, c.peak_flops, c.memory, c.kind_index):
        assert not array.flags.writeable


def test_device_specs_match_datasheets() -> None:
    sxm2, pcie = DEVICE_SPECS["V100-SXM2-16GB"], DEVICE_SPECS["V100-PCIe-16GB"]
    assert (sxm2["peak_flops"], sxm2["mem_bandwidth"], sxm2["memory"]) == (15.7e12, 900e9, 16e9)
    assert (pcie["peak_flops"], pcie["mem_bandwidth"]) == (14e12, 900e9)
    assert sxm2["kind"] == pcie["kind"] == "V100"
    cpu = DEVICE_SPECS["Xeon-8180-2S"]
    assert cpu["kind"] == "CPU" and cpu["peak_flops"] == pytest.approx(6.09e12, rel=1e-3)
    assert cpu["mem_bandwidth"] == pytest.approx(256e9, rel=1e-3)


def test_h200_preset_against_the_measured_h200() -> None:
    """The H200 probed by bench/gpu_check.sh reaches a plausible share of its preset's datasheet
    figures: below them, and not far below (a preset several times off would fail)."""
    probed = Cluster.load(
        Path(__file__).parents[2] / "bench/data/profile-cuda-nvidia-h200/cluster.yaml"
    ).devices[0]
    sheet = DEVICE_SPECS["H200-SXM-141GB"]
    assert 0.6 < probed.peak_flops / sheet["peak_flops"] < 1.0
    assert 0.7 < probed.mem_bandwidth / sheet["mem_bandwidth"] < 1.0
    assert DEVICE_SPECS["H100-SXM5-80GB"]["peak_flops"] == sheet["peak_flops"]  # same FP32 units


def test_dgx1v_hybrid_cube_mesh() -> None:
    c8 = get_cluster("v100-nvlink-8")
    bw = c8.bandwidth
    nvlinks = np.where(bw >= NVLINK, bw / NVLINK, 0.0)
    np.fill_diagonal(nvlinks, 0.0)
    assert np.all(np.isin(nvlinks, (0, 1, 2)))
    np.testing.assert_array_equal(nvlinks.sum(axis=1), 6)  # every V100 uses its 6 NVLinks
    for quad in (range(4), range(4, 8)):  # two fully connected quads
        assert all(nvlinks[i, j] > 0 for i in quad for j in quad if i != j)
    for i in range(4):  # GPU i joins GPU i+4, and no other pair across the quads
        assert nvlinks[i, i + 4] > 0
        assert all(bw[i, j] == 8e9 for j in range(4, 8) if j != i + 4)
    c4, c2 = get_cluster("v100-nvlink-4"), get_cluster("v100-nvlink-2")
    np.testing.assert_array_equal(c4.bandwidth, bw[:4, :4])
    np.testing.assert_array_equal(c2.bandwidth, bw[np.ix_([0, 3], [0, 3])])
    assert c2.bandwidth[0, 1] == 2 * NVLINK


def test_pcie_and_hetero_presets() -> None:
    pcie = get_cluster("v100-pcie-4")
    assert np.all(pcie.peak_flops == 14e12)
    assert np.all(pcie.bandwidth[~np.eye(4, dtype=bool)] == 12e9)
    h = get_cluster("hetero-cpu-2gpu")
    assert h.kinds == ("CPU", "V100")
    np.testing.assert_array_equal(h.kind_index, [0, 1, 1])
    assert h.memory[0] > 10 * h.memory[1]
    assert h.bandwidth[0, 1] == h.bandwidth[2, 0] == 12e9 and h.bandwidth[1, 2] == 2 * NVLINK


# ---------------------------------------------------------------------- times
def test_roofline_time_float_and_array() -> None:
    dev = Device(
        "g", "V100", peak_flops=1e13, mem_bandwidth=1e12, memory=16e9, launch_overhead=5e-6
    )
    t = dev.roofline_time(1e12, 1e9)  # compute bound: 0.1 s vs 1 ms
    assert isinstance(t, float) and t == pytest.approx(0.1 + 5e-6)
    assert dev.roofline_time(1e9, 1e12) == pytest.approx(1.0 + 5e-6)  # memory bound
    times = dev.roofline_time(np.array([1e12, 1e9, 0.0]), np.array([1e9, 1e12, 0.0]))
    np.testing.assert_allclose(times, [0.1 + 5e-6, 1.0 + 5e-6, 5e-6])


def test_roofline_time_with_efficiency() -> None:
    dev = Device("c", "CPU", peak_flops=1e9, mem_bandwidth=1e9, memory=1e9, launch_overhead=0.0)
    assert dev.roofline_time(1e9, 1e8, compute=0.5) == pytest.approx(2.0)
    assert dev.roofline_time(1e8, 1e9, memory=4.0) == pytest.approx(0.25)


def test_efficiency_table_lookup_and_round_trip(tmp_path: Path) -> None:
    table = {"mm": {"compute": 0.8}, "elementwise": {"memory": 0.5}, "tanh": {"memory": 0.1}}
    dev = Device("c", "CPU", 1e9, 1e9, 1e9, 1e-6, efficiency=table)
    assert [key for key, _, _ in dev.efficiency] == ["elementwise", "mm", "tanh"]  # sorted
    compute, memory = dev.op_efficiency(
        ["mm", "tanh", "add", "conv"], ["contraction", "elementwise", "elementwise", "contraction"]
    )
    assert compute.tolist() == [0.8, 1.0, 1.0, 1.0]
    assert memory.tolist() == [1.0, 0.1, 0.5, 1.0]  # type first, then class, then 1
    assert dev.efficiency_table() == table
    cluster = Cluster("c", (dev,), np.full((1, 1), np.inf), np.zeros((1, 1)))
    for suffix in (".yaml", ".json"):
        path = tmp_path / f"c{suffix}"
        cluster.save(path)
        again = Cluster.load(path)
        assert again == cluster and again.devices[0].efficiency == dev.efficiency
    plain = Device("c", "CPU", 1e9, 1e9, 1e9, 1e-6)
    assert (
        "efficiency"
        not in Cluster("c", (plain,), np.ones((1, 1)), np.zeros((1, 1))).to_dict()["devices"][0]
    )
    assert Cluster("c", (plain,), np.ones((1, 1)), np.zeros((1, 1))) != cluster


def test_presets_keep_their_fingerprint_without_efficiency() -> None:
    # A device with no efficiency table hashes as before the table existed (caches keyed by
    # a cluster's fingerprint stay valid).
    assert get_cluster("v100-nvlink-4").fingerprint.startswith("9cdc542405a8")


def test_transfer_time_on_the_clusters_links() -> None:
    # priced by graphopt.sim.links, the one home of the transfer time, on the cluster's links
    latency, bandwidth = link_arrays(asymmetric_cluster())
    assert transfer_time(latency, bandwidth, 1, 2, 1e9) == pytest.approx(1e9 / 50e9)  # no latency
    assert transfer_time(latency, bandwidth, 0, 2, 3e9) == pytest.approx(2e-5 + 1.0)  # one-way
    assert transfer_time(latency, bandwidth, 2, 0, 12e9) == pytest.approx(1e-5 + 1.0)  # default
    assert transfer_time(latency, bandwidth, 1, 1, 1e9) == 0.0
    times = transfer_times(latency, bandwidth, np.array([0, 1]), np.array([1, 0]), [12e9, 24e9])
    np.testing.assert_allclose(times, [1 + 1e-5, 2 + 1e-5])
    same = transfer_times(latency, bandwidth, np.array([1, 0]), np.array([1, 0]), 5e9)
    assert same.tolist() == [0.0, 0.0]


def test_cluster_copies_and_normalises_arrays() -> None:
    bw, lat = np.full((2, 2), 10.0), np.full((2, 2), 0.5)
    dev = [Device(f"d{i}", "x", 1.0, 1.0, 1.0, 0.0) for i in range(2)]
    c = Cluster("c", dev, bw, lat)  # type: ignore[arg-type]
    bw[0, 1] = 99.0
    assert c.bandwidth[0, 1] == 10.0 and np.isinf(c.bandwidth[0, 0]) and c.latency[1, 1] == 0
    assert isinstance(c.devices, tuple)
    with pytest.raises(ValueError, match="read-only"):
        c.bandwidth[0, 1] = 1.0


def test_equality_and_fingerprint() -> None:
    a, b = asymmetric_cluster(), asymmetric_cluster()
    assert a == b and hash(a) == hash(b) and a is not b
    assert a != get_cluster("hetero-cpu-2gpu") and a != "asym"
    data = base_dict()
    data["description"] = "other words"
    assert Cluster.from_dict(data) == Cluster.from_dict(base_dict())  # description is no content
    data["links"]["pairs"][0]["bandwidth"] = 49e9
    assert Cluster.from_dict(data).fingerprint != Cluster.from_dict(base_dict()).fingerprint


# ---------------------------------------------------------------------- file format
@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
@pytest.mark.parametrize("name", ["asym", *sorted(PRESETS)])
def test_save_load_round_trip(tmp_path: Path, suffix: str, name: str) -> None:
    c = asymmetric_cluster() if name == "asym" else get_cluster(name)
    path = tmp_path / f"c{suffix}"
    c.save(path)
    if suffix == ".json":
        json.loads(path.read_text())  # really JSON
    assert_same(Cluster.load(path), c)
    assert_same(get_cluster(path), c)
    assert_same(get_cluster(str(path)), c)
    assert_same(Cluster.from_dict(json.loads(json.dumps(c.to_dict()))), c)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_save_is_whole_or_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    from graphopt import file_set

    old, new = get_cluster("v100-nvlink-2"), get_cluster("v100-nvlink-4")
    path = tmp_path / f"c{suffix}"
    old.save(path)
    before = path.read_text()

    def failing(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(file_set.os, "replace", failing)  # the written file cannot take its place
    with pytest.raises(ValueError, match=r"^cannot write '.*c\.\w+': No space left on device$"):
        new.save(path)
    monkeypatch.undo()
    assert path.read_text() == before  # the old file whole, no temporary beside it
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    new.save(tmp_path / "missing" / "folders" / f"c{suffix}")  # folders made
    assert_same(Cluster.load(tmp_path / "missing" / "folders" / f"c{suffix}"), new)


def test_count_and_preset_expansion() -> None:
    data = {
        "name": "x",
        "devices": [
            {"name": "gpu", "preset": "V100-SXM2-16GB", "count": 3, "memory": 32e9},
            {"name": "host", "preset": "Xeon-8180-2S", "kind": "HOST"},
        ],
        "links": {"default": {"bandwidth": 1e10, "latency": 0}},
    }
    c = Cluster.from_dict(data)
    assert [d.name for d in c.devices] == ["gpu0", "gpu1", "gpu2", "host"]
    assert c.kinds == ("V100", "HOST")
    np.testing.assert_array_equal(c.memory[:3], 32e9)  # overrides the preset
    np.testing.assert_array_equal(c.peak_flops[:3], 15.7e12)  # taken from the preset
    assert c.devices[3].mem_bandwidth == DEVICE_SPECS["Xeon-8180-2S"]["mem_bandwidth"]


def test_yaml_numbers_written_without_dot(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: s\ndevices:\n  - {name: g, preset: V100-SXM2-16GB, count: 2}\n"
        "links:\n  default: {bandwidth: 12e9, latency: 1e-5}\n"
    )
    c = Cluster.load(path)  # YAML 1.1 reads 12e9 as a string; accepted as a number
    assert c.bandwidth[0, 1] == 12e9 and c.latency[1, 0] == 1e-5


def test_single_device_needs_no_links(tmp_path: Path) -> None:
    c = Cluster.from_dict({"name": "one", "devices": [{"name": "g", "preset": "A100-SXM4-40GB"}]})
    assert c.num_devices == 1 and c.kinds == ("A100",)
    c.save(tmp_path / "one.yaml")
    assert_same(Cluster.load(tmp_path / "one.yaml"), c)


# ---------------------------------------------------------------------- errors
def broken(path: str, value: Any) -> dict[str, Any]:
    """``base_dict()`` with the entry at dotted ``path`` set to ``value`` (deleted if ``...``)."""
    data = base_dict()  # a fresh dict each call
    *parents, last = path.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    leaf: Any = int(last) if last.isdigit() else last
    if value is ...:
        del node[leaf]
    else:
        node[leaf] = value
    return data


# (dotted path into base_dict(), value to put there or ... to delete, regex the error must match)
BAD_INPUTS = [
    (
        "devices.0.peak_flops",
        0.0,
        r"device 'gpu0': peak_flops must be a finite positive number \(FLOP/s\), got 0.0",
    ),
    ("devices.0.mem_bandwidth", -1.0, "device 'gpu0': mem_bandwidth must be a finite positive"),
    ("devices.0.memory", math.nan, "device 'gpu0': memory must be .* got nan"),
    ("devices.1.memory", math.inf, "device 'gpu1': memory must be .* got inf"),
    (
        "devices.0.launch_overhead",
        -1e-6,
        "device 'gpu0': launch_overhead must be a finite non-negative",
    ),
    ("devices.0.peak_flops", "lots", "peak_flops must be a finite positive number .* got 'lots'"),
    (
        "links.default.bandwidth",
        0,
        r"links.default: bandwidth must be a finite positive number \(bytes/s\)",
    ),
    ("links.default.latency", math.nan, "links.default: latency must be a finite non-negative"),
    ("links.pairs.0.bandwidth", math.inf, r"links.pairs\[0\]: bandwidth must be .* got inf"),
    ("devices.1.name", "gpu0", r"duplicate device names \['gpu0'\]; make every name unique"),
    (
        "links.pairs.0.dst",
        "gpu9",
        r"links.pairs\[0\]: unknown device name 'gpu9' in `dst`; devices are: gpu0, gpu1",
    ),
    ("links.pairs.0.dst", "gpu0", "src and dst are both 'gpu0'"),
    ("name", ..., r"cluster: missing required field\(s\) \['name'\]"),
    (
        "devices.0.kind",
        ...,
        r"devices\[0\] \('gpu0'\): missing field\(s\) \['kind'\]; give them, or a `preset`",
    ),
    ("links.default.latency", ..., r"links.default: missing required field\(s\) \['latency'\]"),
    ("links.pairs.0.src", ..., r"links.pairs\[0\]: missing required field\(s\) \['src'\]"),
    (
        "devcies",
        [],
        r"cluster: unknown key\(s\) \['devcies'\]; allowed: name, devices, description, links",
    ),
    (
        "devices.0.flops",
        1.0,
        r"devices\[0\]: unknown key\(s\) \['flops'\]; allowed: name, kind, peak_flops",
    ),
    (
        "links.pairs.0.weight",
        1.0,
        r"unknown key\(s\) \['weight'\]; allowed: src, dst, bandwidth, latency, bidirectional",
    ),
    ("links.defaults", {}, r"links: unknown key\(s\) \['defaults'\]; allowed: default, pairs"),
    ("devices.1.preset", "V100x", "unknown device preset 'V100x'; choose one of: V100-SXM2-16GB, "),
    ("devices.1.count", 0, "count must be a positive integer, got 0"),
    ("devices.1.count", True, "count must be a positive integer, got True"),
    ("devices.1.count", "two", "count must be a positive integer, got 'two'"),
    ("devices", [], "devices must be a non-empty list"),
    ("links.pairs.0.bidirectional", "yes", "bidirectional must be true or false, got 'yes'"),
    ("links.pairs", {"src": "gpu0"}, "links.pairs must be a list"),
    (
        "devices.0.efficiency",
        {"mm": {"compute": 0.0}},
        r"devices\[0\] \('gpu0'\): efficiency\['mm'\].compute must be a finite positive number",
    ),
    (
        "devices.0.efficiency",
        {"mm": {"memory": math.nan}},
        r"efficiency\['mm'\].memory must be a finite positive number .* got nan",
    ),
    (
        "devices.0.efficiency",
        {"mm": {"flops": 0.5}},
        r"efficiency\['mm'\]: unknown key\(s\) \['flops'\]; allowed: compute, memory",
    ),
    ("devices.0.efficiency", {"": {"compute": 0.5}}, "efficiency keys must be non-empty strings"),
    ("devices.0.efficiency", [0.5], "efficiency must be a mapping of op type or class"),
    ("devices.0.efficiency", {"mm": 0.5}, r"efficiency\['mm'\] must be a mapping"),
    ("op_model", 5, "op_model must be the path of an op model file \\(a string\\), got 5"),
]


@pytest.mark.parametrize(("path", "value", "match"), BAD_INPUTS)
def test_bad_input_names_the_culprit(path: str, value: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Cluster.from_dict(broken(path, value))


def test_pair_given_twice_and_missing_pair() -> None:
    data = base_dict()
    data["links"]["pairs"].append(
        {"src": "gpu1", "dst": "gpu0", "bandwidth": 1e9, "latency": 0, "bidirectional": False}
    )
    with pytest.raises(ValueError, match=r"links.pairs\[1\]: link gpu1->gpu0 is given twice"):
        Cluster.from_dict(data)
    data = base_dict()
    del data["links"]["default"]
    data["links"]["pairs"][0]["bidirectional"] = False
    with pytest.raises(ValueError, match="no figures for gpu1->gpu0; add links.default"):
        Cluster.from_dict(data)


def test_not_a_mapping() -> None:
    with pytest.raises(ValueError, match="cluster must be a mapping, got list"):
        Cluster.from_dict([1, 2])  # type: ignore[arg-type]


def test_direct_construction_errors() -> None:
    devices = [Device(f"d{i}", "x", 1.0, 1.0, 1.0, 0.0) for i in range(2)]
    with pytest.raises(ValueError, match=r"bandwidth has shape \(3, 3\); expected \(2, 2\)"):
        Cluster("c", devices, np.ones((3, 3)), np.zeros((2, 2)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="link d1->d0: latency must be a finite non-negative"):
        Cluster("c", devices, np.ones((2, 2)), np.array([[0, 0], [-1, 0]]))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty list of Device"):
        Cluster("c", (), np.ones((0, 0)), np.ones((0, 0)))
    with pytest.raises(ValueError, match="device name must be a non-empty string, got ''"):
        Device("", "x", 1.0, 1.0, 1.0, 0.0)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match="cluster file '.*nope.yaml' does not exist; .*v100-nvlink-4"
    ):
        Cluster.load(tmp_path / "nope.yaml")
    with pytest.raises(ValueError, match="does not exist"):
        get_cluster(str(tmp_path / "nope.json"))
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("name: [unclosed\n")
    with pytest.raises(ValueError, match="bad.yaml' does not parse as YAML"):
        Cluster.load(bad_yaml)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{'name': 1}")
    with pytest.raises(ValueError, match="bad.json' does not parse as JSON"):
        get_cluster(bad_json)
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps(broken("devices.0.memory", -5)))
    with pytest.raises(ValueError, match="invalid.json': device 'gpu0': memory must be"):
        Cluster.load(invalid)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(ValueError, match="cluster must be a mapping, got NoneType"):
        Cluster.load(empty)


@pytest.mark.parametrize("name", ["c.yaml", "c.json"])
def test_a_pickled_cluster_file_is_named_a_pickle(tmp_path: Path, name: str) -> None:
    """#40: a pickle where a cluster file was expected said "can't decode byte 0x80"."""
    path = tmp_path / name
    path.write_bytes(pickle.dumps({"name": "c"}, protocol=4))
    with pytest.raises(ValueError) as info:
        Cluster.load(path)
    assert str(info.value) == (
        f"{path} is a pickle file (protocol 4), which graphopt never loads (unpickling can run "
        "code; nothing in it was run); give a cluster file (.yaml, .yml or .json)"
    )


def test_get_cluster_resolution() -> None:
    c = asymmetric_cluster()
    assert get_cluster(c) is c
    assert get_cluster(DEFAULT_CLUSTER).num_devices == 4
    expected = (
        f"unknown cluster preset 'v100x3'; choose one of: {', '.join(PRESETS)} "
        "(or give a path to a .yaml/.json cluster file)"
    )
    with pytest.raises(ValueError, match=re.escape(expected)):
        get_cluster("v100x3")
    with pytest.raises(TypeError, match="cluster spec must be"):
        get_cluster(4)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- large clusters
def test_two_thousand_devices_load(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(
        "name: big\n"
        "devices:\n"
        "  - {name: gpu, preset: V100-SXM2-16GB, count: 1999}\n"
        "  - {name: cpu, preset: Xeon-8180-2S}\n"
        "links:\n"
        "  default: {bandwidth: 12.0e+9, latency: 1.0e-5}\n"
        "  pairs:\n"
        "    - {src: gpu0, dst: gpu1, bandwidth: 50.0e+9, latency: 5.0e-6}\n"
        "    - {src: cpu, dst: gpu7, bandwidth: 8.0e+9, latency: 0, bidirectional: false}\n"
    )
    c = Cluster.load(path)
    assert c.num_devices == 2000
    assert c.devices[1998].name == "gpu1998" and c.devices[-1].name == "cpu"
    assert c.bandwidth.shape == c.latency.shape == (2000, 2000)
    assert c.bandwidth[0, 1] == c.bandwidth[1, 0] == 50e9
    assert c.bandwidth[1999, 7] == 8e9 and c.bandwidth[7, 1999] == 12e9
    assert c.latency[1999, 7] == 0.0 and c.latency[5, 9] == 1e-5
    assert np.isinf(np.diag(c.bandwidth)).all() and not np.diag(c.latency).any()
    assert c.kinds == ("V100", "CPU")


def test_too_many_devices_are_refused_before_they_are_built(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text(
        "name: huge\n"
        "devices: [{name: gpu, preset: V100-SXM2-16GB, count: 100000}]\n"
        "links: {default: {bandwidth: 12.0e+9, latency: 1.0e-5}}\n"
    )
    limit = f"at most {MAX_DEVICES:,}"
    with pytest.raises(ValueError, match=rf"huge.yaml': devices\[0\].*100,000 devices; .*{limit}"):
        Cluster.load(path)
    data = broken("devices.1.count", MAX_DEVICES)  # 1 + 4,096: the sum counts
    with pytest.raises(ValueError, match=rf"devices\[1\].*{MAX_DEVICES + 1:,} devices; .*{limit}"):
        Cluster.from_dict(data)
    many = [Device(f"d{i}", "x", 1.0, 1.0, 1.0, 0.0) for i in range(MAX_DEVICES + 1)]
    with pytest.raises(ValueError, match=rf"cluster 'c': 4,097 devices; .*{limit}"):
        Cluster("c", many, np.ones((1, 1)), np.ones((1, 1)))  # type: ignore[arg-type]


def test_the_limit_itself_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hardware, "MAX_DEVICES", 8)  # the same rule, at a size that is quick
    data = broken("devices.1.count", 7)
    del data["links"]["pairs"]  # it names gpu1, now gpu10 .. gpu16
    assert Cluster.from_dict(data).num_devices == 8
    with pytest.raises(ValueError, match=r"devices\[1\] \('gpu1'\): devices up to here: 9 devices"):
        Cluster.from_dict(broken("devices.1.count", 8))
    c = Cluster.from_dict(data)
    with pytest.raises(ValueError, match="cluster 'pair': 9 devices; a cluster may have at most 8"):
        Cluster(
            "pair",
            (*c.devices, Device("x", "x", 1.0, 1.0, 1.0, 0.0)),
            np.ones((9, 9)),
            np.zeros((9, 9)),
        )


def test_unknown_link_device_in_a_large_cluster_lists_a_few_names() -> None:
    data = broken("devices.1.count", 500)
    data["links"]["pairs"][0]["dst"] = "gpu"
    with pytest.raises(ValueError, match="unknown device name 'gpu'") as e:
        Cluster.from_dict(data)
    assert "devices are: gpu0, gpu10, gpu11," in str(e.value)
    assert "gpu1499" in str(e.value) and "(501 devices)" in str(e.value)
    assert len(str(e.value)) < 400


def test_link_checks_name_the_first_bad_link() -> None:
    devices = [Device(f"d{i}", "x", 1.0, 1.0, 1.0, 0.0) for i in range(4)]
    bandwidth = np.ones((4, 4))
    bandwidth[2, 1], bandwidth[3, 0] = np.nan, -1.0
    bandwidth[0, 0] = 0.0  # the diagonal is not looked at
    with pytest.raises(ValueError, match="link d2->d1: bandwidth must be .* got nan"):
        Cluster("c", devices, bandwidth, np.zeros((4, 4)))  # type: ignore[arg-type]


def test_round_trip_of_many_mixed_links() -> None:
    rng = np.random.default_rng(0)
    n = 40
    devices = [Device(f"d{i}", "x", 1.0, 1.0, 1.0, 0.0) for i in range(n)]
    bandwidth = rng.choice([1e9, 2e9, 5e9], size=(n, n), p=[0.8, 0.1, 0.1])
    latency = rng.choice([0.0, 1e-5], size=(n, n), p=[0.9, 0.1])
    bandwidth[:10, :10] = np.maximum(bandwidth[:10, :10], bandwidth[:10, :10].T)
    latency[:10, :10] = np.maximum(latency[:10, :10], latency[:10, :10].T)
    c = Cluster("mixed", devices, bandwidth, latency)  # type: ignore[arg-type]
    data = c.to_dict()
    assert data["links"]["default"] == {"bandwidth": 1e9, "latency": 0.0}
    for pair in data["links"]["pairs"]:
        i, j = int(pair["src"][1:]), int(pair["dst"][1:])
        assert (pair["bandwidth"], pair["latency"]) != (1e9, 0.0)
        symmetric = (c.bandwidth[j, i], c.latency[j, i]) == (c.bandwidth[i, j], c.latency[i, j])
        assert pair["bidirectional"] == symmetric
        assert i < j or not symmetric  # a symmetric link is written once, src before dst
    assert_same(Cluster.from_dict(data), c)


# ---------------------------------------------------------------------- model options
def host_dict(**options: Any) -> dict[str, Any]:
    """``base_dict()`` with a CPU host added first, and the given model options."""
    data = base_dict()
    data["devices"].insert(0, {"name": "cpu", "preset": "Xeon-8180-2S"})
    data.update(options)
    return data


def test_model_options_default_and_leave_the_fingerprint_alone() -> None:
    plain = Cluster.from_dict(base_dict())
    assert (plain.contention, plain.route, plain.send, plain.copies, plain.dispatch) == (
        "link",
        "direct",
        "per-device",
        "charged",
        "priority",
    )
    assert plain.host is None and plain.host_index == -1 and plain.model_options() == {}
    defaults = {key: choices[0] for key, choices in hardware.MODEL_OPTIONS.items()}
    spelled_out = Cluster.from_dict({**base_dict(), **defaults})
    assert_same(spelled_out, plain)
    assert not set(defaults) & set(plain.to_dict())  # defaults are not written
    for name in PRESETS:  # only the presets of a published setting set an option
        if name not in PUBLISHED_SETTINGS:
            assert get_cluster(name).model_options() == {}


@pytest.mark.parametrize("name", sorted(PUBLISHED_SETTINGS))
def test_published_setting_presets(name: str) -> None:
    paper, options = PUBLISHED_SETTINGS[name]
    c = get_cluster(name)
    assert c.model_options() == options
    assert paper in (hardware.PRESET_DIR / f"{name}.yaml").read_text()  # the comment cites it
    off = ~np.eye(c.num_devices, dtype=bool)
    assert len(set(c.bandwidth[off])) == len(set(c.latency[off])) == 1  # one link figure
    if name.startswith("doppler"):
        assert c.num_devices == int(name.split("-")[1]) and c.kinds == ("V100",)
    else:  # a host (device 0) that relays, and four accelerators
        assert c.host_index == 0 and c.kinds == ("CPU", "V100") and c.num_devices == 5


@pytest.mark.parametrize(
    "options",
    [
        {"contention": "none"},
        {"send": "per-consumer"},
        {"copies": "free"},
        {"route": "via-host"},
        {"route": "via-host", "host": "gpu1"},
        {"dispatch": "fcfs"},
        {"contention": "none", "route": "via-host", "send": "per-consumer", "copies": "free"},
        {"contention": "none", "send": "per-consumer", "dispatch": "fcfs"},
        {"colocation": "enforce"},
    ],
)
def test_model_options_change_the_fingerprint_and_round_trip(
    tmp_path: Path, options: dict[str, str]
) -> None:
    plain = Cluster.from_dict(host_dict())
    c = Cluster.from_dict(host_dict(**options))
    assert c != plain and c.fingerprint != plain.fingerprint
    written = c.to_dict()
    assert {key: written[key] for key in options} == options
    if c.route == "via-host":
        assert written["host"] == options.get("host", "cpu")  # the host is written out
    for suffix in (".yaml", ".json"):
        c.save(tmp_path / f"c{suffix}")
        assert_same(Cluster.load(tmp_path / f"c{suffix}"), c)
        assert Cluster.load(tmp_path / f"c{suffix}").model_options() == c.model_options()


def test_via_host_takes_the_first_cpu_unless_a_host_is_named() -> None:
    c = Cluster.from_dict(host_dict(route="via-host"))
    assert c.host == "cpu" and c.host_index == 0
    named = Cluster.from_dict(host_dict(route="via-host", host="gpu1"))
    assert named.host_index == 2
    # naming the device the default would pick is the same cluster
    assert_same(Cluster.from_dict(host_dict(route="via-host", host="cpu")), c)


MODEL_ERRORS = [
    (
        {"contention": "sometimes"},
        r"cluster 'pair': unknown contention 'sometimes'; choose one of: link, none",
    ),
    ({"route": "hub"}, r"unknown route 'hub'; choose one of: direct, via-host"),
    ({"send": "per-op"}, r"unknown send 'per-op'; choose one of: per-device, per-consumer"),
    ({"copies": False}, r"unknown copies False; choose one of: charged, free"),
    ({"dispatch": "lifo"}, r"unknown dispatch 'lifo'; choose one of: priority, fcfs"),
    ({"colocation": "maybe"}, r"unknown colocation 'maybe'; choose one of: hint, enforce"),
    (
        {"route": "via-host"},
        r"route 'via-host' needs a host device, and no device is of kind 'CPU' "
        r"\(devices: gpu0, gpu1\); name one with `host: <device name>`",
    ),
    (
        {"route": "via-host", "host": "cpu9"},
        r"host 'cpu9' is no device of the cluster; devices are: gpu0, gpu1",
    ),
    ({"host": "gpu0"}, r"host 'gpu0' is only used with route: via-host"),
]


@pytest.mark.parametrize(("options", "match"), MODEL_ERRORS)
def test_bad_model_options_name_the_problem(
    tmp_path: Path, options: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        Cluster.from_dict({**base_dict(), **options})
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**base_dict(), **options}))
    with pytest.raises(ValueError, match=r"cluster file '.*bad.yaml': cluster 'pair': ") as e:
        Cluster.load(path)
    assert "\n" not in str(e.value)
