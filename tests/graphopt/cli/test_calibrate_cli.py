"""``graphopt calibrate`` in a subprocess, on measurements of this project's bench machine."""

from __future__ import annotations

import json
from pathlib import Path

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import simulate

DATA = Path(__file__).resolve().parents[3] / "bench" / "data" / "profile-cpu-amd-epyc-t1"
"""Zoo graphs measured by ``bench/bench_profile.py`` (one thread, an AMD EPYC core)."""

TRAIN = [DATA / f"{name}-train.json.gz" for name in ("resnet", "wavenet", "lstm", "transformer")]


def test_calibrate_writes_a_cluster_that_prices_an_unseen_graph(run_cli, tmp_path) -> None:
    out = tmp_path / "fit" / "calibrated.yaml"
    proc = run_cli(
        "calibrate",
        *map(str, TRAIN),
        "--cluster",
        str(DATA / "cluster.yaml"),
        "-o",
        str(out),
        "--json",
    )
    report = json.loads(proc.stdout)
    cluster, fitted = Cluster.load(DATA / "cluster.yaml"), Cluster.load(out)
    kind = cluster.devices[0].kind
    assert list(report) == [kind] and report[kind]["sources"] == 4
    device = fitted.devices[0]
    keys = {key for key, _, _ in device.efficiency}
    assert {"contraction", "elementwise", "mm", "convolution"} <= keys
    assert device.peak_flops == cluster.devices[0].peak_flops  # only the shares change
    # inception was not in the fit: the calibrated roofline is nearer its measured op times.
    unseen = CompGraph.load(DATA / "inception-train.json.gz")
    truth = float(sum(unseen.measured[kind]))
    data = unseen.to_json_dict()
    data["measured"] = {}
    bare = CompGraph.from_json_dict(data)
    plain, calibrated = simulate(bare, cluster).step_time, simulate(bare, fitted).step_time
    assert abs(calibrated - truth) < abs(plain - truth)


def test_calibrate_refuses_bad_input_and_writes_nothing(run_cli, tmp_path) -> None:
    out = tmp_path / "c.yaml"
    proc = run_cli(
        "calibrate", str(TRAIN[0]), "--cluster", "v100-nvlink-4", "-o", str(out), check=False
    )
    assert proc.returncode == 2 and not out.exists()
    assert "no device kind of cluster 'v100-nvlink-4' (V100) is measured" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    bad = run_cli(
        "calibrate",
        str(TRAIN[0]),
        "--cluster",
        str(DATA / "cluster.yaml"),
        "-o",
        str(tmp_path / "c.txt"),
        check=False,
    )
    assert bad.returncode == 2 and "must end in .yaml, .yml, .json" in bad.stderr
    zero = run_cli(
        "calibrate",
        str(TRAIN[0]),
        "--cluster",
        str(DATA / "cluster.yaml"),
        "-o",
        str(out),
        "--min-ops",
        "0",
        check=False,
    )
    assert (
        zero.returncode == 2 and "--min-ops: must be an integer in 1..1000000, got 0" in zero.stderr
    )
    assert not out.exists()


def test_measured_times_that_overflow_are_one_line_and_no_file(run_cli, tmp_path) -> None:
    graph = CompGraph.load(TRAIN[0])
    data = graph.to_json_dict()
    kind = next(iter(graph.measured))
    times = list(graph.measured[kind])
    first = next(i for i, c in enumerate(graph.op_classes) if c != "source")
    times[first] = 1.7e308
    data["measured"] = {kind: times}
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "c.yaml"
    cluster = str(DATA / "cluster.yaml")
    proc = run_cli(
        "calibrate", str(path), "--cluster", cluster, "-o", str(out), "--json", check=False
    )
    assert proc.returncode == 2 and not out.exists() and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert "cannot be summed" in line and f"/{graph.op_names[first]}' measured 1.7e+308 s" in line


def test_calibrate_keeps_the_cluster_options(run_cli, tmp_path) -> None:
    """The fitted cluster keeps the links and every model option of the cluster it fits."""
    data = Cluster.load(DATA / "cluster.yaml").to_dict()
    options = {
        "contention": "none",
        "send": "per-consumer",
        "copies": "free",
        "dispatch": "fcfs",
        "colocation": "enforce",
    }
    given = tmp_path / "options.yaml"
    Cluster.from_dict({**data, **options}).save(given)
    out = tmp_path / "calibrated.yaml"
    run_cli("calibrate", *map(str, TRAIN[:2]), "--cluster", str(given), "-o", str(out))
    source, fitted = Cluster.load(given), Cluster.load(out)
    assert fitted.model_options() == source.model_options() == options
    assert (fitted.bandwidth == source.bandwidth).all() and (fitted.latency == source.latency).all()
    assert fitted.devices[0].efficiency != source.devices[0].efficiency  # it did fit
