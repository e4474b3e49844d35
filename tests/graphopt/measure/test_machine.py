"""The CPU probe: naming, figures and the one-device cluster file (no wall-clock asserts)."""

from __future__ import annotations

import math

import pytest
import torch

from graphopt.hardware import Cluster, Device, get_cluster
from graphopt.measure import machine


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short microbenchmarks: the figures, not their precision, are under test."""
    monkeypatch.setattr(machine, "FLOPS_SECONDS", 0.0)
    monkeypatch.setattr(machine, "BANDWIDTH_SECONDS", 0.0)
    monkeypatch.setattr(machine, "MIN_REPEATS", 1)
    monkeypatch.setattr(machine, "DISPATCH_REPEATS", 3)


@pytest.mark.parametrize(
    ("model", "slug"),
    [
        ("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", "intel-xeon-platinum-8375c"),
        ("AMD EPYC 7R13 Processor", "amd-epyc-7r13"),
        ("AMD EPYC", "amd-epyc"),
        ("Apple M2 Pro", "apple-m2-pro"),
        ("Intel(R) Core(TM) i7-1165G7 @ 2.80GHz", "intel-core-i7-1165g7"),
        ("", "unknown"),
    ],
)
def test_slugify(model: str, slug: str) -> None:
    assert machine.slugify_cpu(model) == slug


def test_kind_names_the_cpu_and_the_threads() -> None:
    assert machine.cpu_kind(4, "AMD EPYC 7R13 Processor") == "cpu-amd-epyc-7r13-t4"
    kind = machine.cpu_kind(1)
    assert kind.startswith("cpu-") and kind.endswith("-t1")
    assert kind == machine.cpu_kind()
    assert machine.cpu_model_name()


def test_memory_and_cache_sizes() -> None:
    assert machine.memory_bytes() > 1e8
    assert machine.largest_cache_bytes() >= 0


@pytest.mark.expensive  # times matrix products on this CPU: seconds (CI runs it)
def test_probe_gives_a_device_of_this_cpu(quick: None) -> None:
    before = torch.get_num_threads()
    device = machine.probe_cpu()
    assert isinstance(device, Device) and device.name == "cpu0"
    assert device.kind == machine.cpu_kind(1)
    for figure in (device.peak_flops, device.mem_bandwidth, device.memory, device.launch_overhead):
        assert math.isfinite(figure) and figure > 0
    assert device.launch_overhead < 1e-3  # a dispatch, not a sleep
    assert torch.get_num_threads() == before
    assert machine.probe_cpu(2, name="host").kind.endswith("-t2")
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("threads", [0, -1, 1.5, True])
def test_probe_refuses_bad_threads(threads: object) -> None:
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        machine.probe_cpu(threads)  # type: ignore[arg-type]


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_cluster_file_round_trips(tmp_path, suffix: str) -> None:
    device = Device("cpu0", machine.cpu_kind(1), 5e10, 2e10, 8e9, 2e-6)
    cluster = machine.machine_cluster(device)
    assert cluster.num_devices == 1 and cluster.name == device.kind
    path = tmp_path / f"machine{suffix}"
    cluster.save(path)
    loaded = get_cluster(str(path))
    assert loaded == cluster and loaded.devices[0] == device
    assert isinstance(Cluster.load(path), Cluster)
