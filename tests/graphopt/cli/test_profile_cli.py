"""``graphopt profile``: the files it writes, and one-line errors that write nothing; in a
subprocess, or through the same entry point in this process where the command imports torch (a
subprocess would only import it again; CI profiles a training graph in one)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from graphopt.cli.profile import default_cluster_path, split_source
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster

RESNET = "torch:resnet?depth=18&width=8&image=32&batch=2&classes=10"


@pytest.mark.expensive  # profiles a model on this CPU: seconds (CI runs it)
def test_profile_writes_a_graph_and_a_cluster_the_simulator_uses(run_cli_here, tmp_path) -> None:
    from graphopt.sim import simulate

    run_cli = run_cli_here

    out = tmp_path / "run" / "resnet.json"
    proc = run_cli(
        "profile",
        f"{RESNET}&mode=forward",
        "-o",
        str(out),
        "--iterations",
        "2",
        "--warmup",
        "0",
        "--json",
    )
    data = json.loads(proc.stdout)
    cluster_path = tmp_path / "run" / "resnet.cluster.yaml"
    assert data["graph_file"] == str(out) and data["cluster_file"] == str(cluster_path)
    graph, cluster = CompGraph.load(out), Cluster.load(cluster_path)
    report = data["report"]
    kind = report["kind"]
    assert cluster.num_devices == 1 and cluster.devices[0].kind == kind
    assert kind.startswith("cpu-") and kind.endswith("-t1") and list(graph.measured) == [kind]
    assert report["training"] is False and report["ops"] == graph.num_ops
    assert report["match_rate"] >= 0.95
    times = graph.measured[kind]
    assert (np.isfinite(times) & (times > 0)).mean() >= 0.95
    step = simulate(graph, cluster).step_time
    assert math.isfinite(step) and step > 0
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "resnet.cluster.yaml",
        "resnet.json",
    ]


@pytest.mark.expensive
def test_profile_summary_of_a_training_graph(run_cli, tmp_path) -> None:
    out = tmp_path / "t.json.gz"
    cluster = tmp_path / "machine.json"
    text = run_cli(
        "profile",
        RESNET,
        "-o",
        str(out),
        "--cluster-out",
        str(cluster),
        "--timer",
        "clock",
        "--iterations",
        "2",
        "--warmup",
        "1",
    ).stdout
    assert "(training)" in text and "matched (100.0%)" in text and "GFLOP/s" in text
    assert CompGraph.load(out).metadata["profile"]["timer"] == "clock"
    assert Cluster.load(cluster).devices[0].kind in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "tpu"], "--device 'tpu' is unknown"),
        (["--threads", "0"], "--threads: must be an integer in 1..1024, got 0"),
        (["--iterations", "0"], "--iterations: must be an integer in 1..1000, got 0"),
        (["--iterations", "1001"], "--iterations: must be an integer in 1..1000, got 1001"),
        (["--warmup", "-1"], "--warmup: must be an integer in 0..1000, got -1"),
        (["--cluster-out", "c.txt"], "must end in .yaml, .yml, .json"),
        (["--cluster-out", "g.json"], "both"),
    ],
)
def test_bad_options_are_one_line_and_write_nothing(run_cli, tmp_path, args, message) -> None:
    args = [a if not a.endswith((".txt", ".json")) else str(tmp_path / a) for a in args]
    proc = run_cli("profile", RESNET, "-o", str(tmp_path / "g.json"), *args, check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_bounds_are_the_library_s() -> None:
    from graphopt.cli import profile as profile_cli
    from graphopt.measure import profile

    assert profile_cli.MAX_ITERATIONS == profile.MAX_ITERATIONS
    assert profile_cli.MAX_THREADS == profile.MAX_THREADS


def test_cuda_without_a_gpu_is_one_line(run_cli_here, tmp_path) -> None:
    import torch

    run_cli = run_cli_here
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    proc = run_cli(
        "profile", RESNET, "--device", "cuda", "-o", str(tmp_path / "g.json"), check=False
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("graphopt: error: no CUDA device: ")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("which", ["-o", "--cluster-out"])
def test_output_under_a_regular_file(run_cli, tmp_path, which) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    target = blocker / ("g.json" if which == "-o" else "c.yaml")
    args = (
        ["-o", str(target)]
        if which == "-o"
        else ["-o", str(tmp_path / "g.json"), which, str(target)]
    )
    proc = run_cli("profile", RESNET, *args, check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "is not a directory" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("pipedream:vgg16", "cannot profile 'pipedream:vgg16'"),
        ("resnet", "cannot profile 'resnet'"),
        ("torch:resnet?depth=7", "depth=7 is not a ResNet"),
        ("torch:resnet?mode=fast", "mode must be train or forward"),
    ],
)
def test_bad_sources_are_one_line(run_cli_here, tmp_path, source, message) -> None:
    run_cli = run_cli_here
    proc = run_cli("profile", source, "-o", str(tmp_path / "g.json"), check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_split_source_and_default_paths(tmp_path) -> None:
    assert split_source("torch:resnet?depth=18&mode=forward", None) == (
        "torch:resnet?depth=18",
        False,
    )
    assert split_source("torch:resnet", None) == ("torch:resnet", True)
    assert split_source("torch:resnet?mode=train", "training") == ("torch:resnet", True)
    assert split_source("torch:resnet", "forward") == ("torch:resnet", False)
    with pytest.raises(ValueError, match="--mode is training"):
        split_source("torch:resnet?mode=forward", "training")
    assert default_cluster_path(tmp_path / "g.json.gz") == tmp_path / "g.cluster.yaml"
    assert default_cluster_path(tmp_path / "g.json") == tmp_path / "g.cluster.yaml"


def test_a_missing_optional_dependency_is_one_line(run_cli_here, tmp_path) -> None:
    import importlib.util

    run_cli = run_cli_here
    if importlib.util.find_spec("transformers") is not None:
        pytest.skip("transformers is installed")
    proc = run_cli(
        "profile", "torch:gpt2?n_layer=1&seq=16", "-o", str(tmp_path / "g.json"), check=False
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "transformers" in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("stop", ["sigterm", "rename"])
def test_the_graph_and_the_cluster_file_are_one_set(tmp_path, monkeypatch, stop) -> None:
    """#40: each file was written whole, but one after the other; now both or nothing new: a
    SIGTERM before the moves, or a cluster file that cannot be moved into place, leaves the
    graph file as it was too, and no staging file."""
    import os
    import signal
    from pathlib import Path

    from graphopt import file_set
    from graphopt.cli.profile import write_outputs
    from graphopt.hardware import get_cluster
    from graphopt.signals import interrupts
    from graphopt.workloads import get_graph

    graph, cluster = get_graph("txl-tiny"), get_cluster("v100-nvlink-2")
    out = tmp_path / "run" / "g.json.gz"
    cluster_out = default_cluster_path(out)
    write_outputs(graph, out, cluster, cluster_out)
    assert CompGraph.load(out).fingerprint == graph.fingerprint
    assert Cluster.load(cluster_out).to_dict() == cluster.to_dict()
    out.write_bytes(b"an earlier profile")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    if stop == "sigterm":

        def stopped(self):
            os.kill(os.getpid(), signal.SIGTERM)

        monkeypatch.setattr(file_set.FileSet, "flush", stopped)
    else:
        rename = os.rename

        def failing(src, dst):  # the new cluster file, not the old one put back
            if Path(dst) == cluster_out and Path(src).parent.name != file_set.REPLACED:
                raise OSError(28, "No space left on device")
            rename(src, dst)

        monkeypatch.setattr(file_set.os, "rename", failing)
    expected = KeyboardInterrupt if stop == "sigterm" else ValueError
    with pytest.raises(expected), interrupts():
        write_outputs(graph, out, get_cluster("v100-nvlink-4"), cluster_out)
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
