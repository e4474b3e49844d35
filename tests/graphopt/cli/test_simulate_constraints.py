"""``graphopt simulate`` and ``graphopt baselines`` on graphs with placement constraints, through
the command's entry point in this process (a subprocess per call would only import numba and
torch again; test_simulate.py runs the command in one): every placer keeps them, and each piece of
bad input of the constraints is one line naming the file and the problem, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from graphopt.constraints import constraints
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster

PLACERS = ("single", "round-robin", "split", "heft", "m-etf", "tarnawski-greedy", "pipedream")


def write_graph(path: Path, allowed: list[list[str]], groups: list[str] | None = None) -> Path:
    """A chain of 4 ops, ``allowed`` (and colocation ``groups``) per op."""
    names = ["a", "b", "c", "d"]
    groups = groups or [""] * 4
    ops = [
        Op(n, "MatMul", 4e9, 4e7, 4e6, param_bytes=1e6, colocation=g)
        for n, g in zip(names, groups, strict=True)
    ]
    data = CompGraph.build(
        "chain4", ops, [(a, b, 4e6) for a, b in zip(names, names[1:], strict=False)]
    )
    data = data.to_json_dict()
    data["ops"]["allowed"] = allowed
    path.write_text(json.dumps(data))
    return path


def cluster_file(path: Path, **options: str) -> Path:
    data = get_cluster("hetero-cpu-2gpu").to_dict()  # cpu0, gpu0, gpu1
    data.update(options)
    path.write_text(json.dumps(data))
    return path


def test_every_placer_keeps_the_constraints(run_cli_here, tmp_path: Path) -> None:
    run_cli = run_cli_here  # in this process: see the docstring above
    graph = write_graph(tmp_path / "g.json", [["V100"], ["CPU"], [], ["V100"]], ["", "", "x", "x"])
    cluster = cluster_file(tmp_path / "c.json", colocation="enforce")
    rules = constraints(CompGraph.load(graph), get_cluster(cluster))
    out = tmp_path / "decisions"
    for placer in PLACERS:
        proc = run_cli(
            "simulate", str(graph), "--cluster", str(cluster), "--placement", placer, "--json"
        )
        row = json.loads(proc.stdout)[0]
        assert row["valid"], (placer, row)
    run_cli(
        "baselines",
        str(graph),
        "--cluster",
        str(cluster),
        "--save-decisions",
        str(out),
        "--json",
        str(tmp_path / "table.json"),
    )
    saved = sorted(out.glob("**/*.json"))
    assert saved
    for path in saved:
        data = json.loads(path.read_text())
        if "placement" not in data:
            continue
        placement = data["placement"]
        if isinstance(placement, dict):
            placement = [placement[name] for name in ("a", "b", "c", "d")]
        assert rules.violation(placement) == "", path


def test_constraint_bad_input_is_one_line_exit_2(run_cli_here, tmp_path: Path) -> None:
    run_cli = run_cli_here  # in this process: see the docstring above
    plain = cluster_file(tmp_path / "plain.json")
    cases = [
        (
            write_graph(tmp_path / "tpu.json", [[], ["TPU"], [], []]),
            plain,
            ["tpu.json", "op 'b' may run only on device kind(s) TPU", "'hetero-cpu-2gpu' has none"],
        ),
        (
            write_graph(tmp_path / "short.json", [[], ["CPU"]]),
            plain,
            ["short.json", "column 'allowed' has 2 entries, expected 4"],
        ),
        (
            write_graph(tmp_path / "apart.json", [["CPU"], ["V100"], [], []], ["x", "x", "", ""]),
            cluster_file(tmp_path / "enforce.json", colocation="enforce"),
            ["apart.json", "colocation group 'x' cannot be placed on one device"],
        ),
        (
            write_graph(tmp_path / "ok.json", [[], [], [], []]),
            cluster_file(tmp_path / "maybe.json", colocation="maybe"),
            ["maybe.json", "unknown colocation 'maybe'; choose one of: hint, enforce"],
        ),
    ]
    small = get_cluster("hetero-cpu-2gpu").to_dict()
    for device in small["devices"]:
        device["memory"] = 1.5e6
    small.update(colocation="enforce", name="small")
    (tmp_path / "small.json").write_text(json.dumps(small))
    cases.append(
        (
            write_graph(tmp_path / "big.json", [[], [], [], []], ["x", "x", "", ""]),
            tmp_path / "small.json",
            ["big.json", "colocation group 'x' holds 0.002 GB of parameters"],
        )
    )
    # contiguous: true (colocation only a hint): the colour class alone fits no device, and a
    # CPU-only op between two V100-only ones with one V100 (no contiguous split)
    small.update(colocation="hint", contiguous=True, name="small-contiguous")
    (tmp_path / "small-contiguous.json").write_text(json.dumps(small))
    one_gpu = get_cluster("hetero-cpu-2gpu").to_dict()
    one_gpu.update(devices=one_gpu["devices"][:2], contiguous=True, name="one-gpu")
    one_gpu["links"] = {"default": {"bandwidth": 1e10, "latency": 1e-6}}
    (tmp_path / "one-gpu.json").write_text(json.dumps(one_gpu))
    cases += [
        (
            tmp_path / "big.json",
            tmp_path / "small-contiguous.json",
            ["big.json", "block of op 'a' (colour class 'x') must run on one device and holds"],
        ),
        (
            write_graph(tmp_path / "sandwich.json", [["V100"], ["CPU"], ["V100"], []]),
            tmp_path / "one-gpu.json",
            ["sandwich.json", "no contiguous split onto cluster 'one-gpu' found"],
        ),
    ]
    for graph, cluster, expected in cases:
        for command in ("simulate", "baselines"):
            args = [command, str(graph), "--cluster", str(cluster)]
            proc = run_cli(
                *args, *(["--placement", "heft"] if command == "simulate" else []), check=False
            )
            assert proc.returncode == 2, (graph, cluster, proc.stderr)
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1, proc.stderr
            for part in expected:
                assert part in lines[0], (part, lines[0])
