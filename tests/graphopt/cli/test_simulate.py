"""Smoke tests of ``graphopt simulate`` in a subprocess; refusals and the ``baselines`` command's
options through the same entry point in this process (a subprocess per call would only import
numba and torch again)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
from conftest import ROOT, graphopt_here

from graphopt.baselines.placement import PLACERS
from graphopt.hardware import get_cluster
from graphopt.sim import simulate
from graphopt.typing import Decision
from graphopt.workloads import resolve_graphs


def test_simulate_suite_json_matches_library(run_cli):
    results = json.loads(
        run_cli(
            "simulate",
            "suite:tiny",
            "--cluster",
            "v100-nvlink-4",
            "--placement",
            "round-robin",
            "--json",
        ).stdout
    )
    cluster = get_cluster("v100-nvlink-4")
    graphs = resolve_graphs("suite:tiny")
    assert [r["graph"] for r in results] == [g.name for g in graphs]
    for r, g in zip(results, graphs, strict=True):
        m = simulate(g, cluster, Decision(placement=np.arange(g.num_ops) % 4))
        assert r["step_time"] == m.step_time and r["valid"] == m.valid
        assert r["lower_bound_critical_path"] <= r["step_time"]


def test_simulate_table_gantt_and_decision_file(run_cli, tmp_path):
    graph = resolve_graphs("suite:tiny")[0]
    decision = tmp_path / "d.json"
    decision.write_text(json.dumps({"placement": [i % 2 for i in range(graph.num_ops)]}))
    gantt = tmp_path / "g.png"
    out = run_cli(
        "simulate",
        graph.name,
        "--cluster",
        "v100-nvlink-2",
        "--placement",
        str(decision),
        "--gantt",
        str(gantt),
    ).stdout
    assert graph.name in out and "step (ms)" in out
    assert gantt.read_bytes()[:4] == b"\x89PNG"


def test_numbers_are_not_cut_when_piped():
    # a pipe without COLUMNS: rich would assume 80 columns and cut the table's numbers (gnmt-2's
    # '1,297.372' to '1,297.…'; txl-tiny's table of 101 columns loses its op count to '2…')
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}

    args = ["simulate", "txl-tiny", "--placement", "split"]
    proc = subprocess.run(
        [sys.executable, "-m", "graphopt", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout
    # the number itself from the JSON, in this process (the pipe only matters for the table)
    step_ms = json.loads(graphopt_here(*args, "--json").stdout)[0]["step_time"] * 1e3
    assert f"{step_ms:,.3f}" in table and "…" not in table


def test_help_lists_every_placer_and_defaults(run_cli):
    text = " ".join(run_cli("simulate", "--help").stdout.split())
    assert all(name in text for name in PLACERS) and "(default: single)" in text


def test_bad_inputs(run_cli_here):
    run_cli = run_cli_here  # refusals before any work: in this process
    proc = run_cli("simulate", "suite:tiny", "--cluster", "v100x3", check=False)
    assert proc.returncode == 2 and "unknown cluster preset 'v100x3'" in proc.stderr
    assert "v100-nvlink-4" in proc.stderr
    proc = run_cli("simulate", "suite:tiny", "--placement", "magic", check=False)
    assert proc.returncode == 2 and "unknown placement 'magic'" in proc.stderr
    proc = run_cli("simulate", "suite:nope", check=False)
    assert proc.returncode == 2 and "nope" in proc.stderr
    for gantt in ("/proc/nope.png", "/etc/hostname/g.png"):
        proc = run_cli("simulate", "txl-tiny", "--gantt", gantt, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert f"'{gantt}'" in proc.stderr and "gantt" in proc.stderr.lower()
    proc = run_cli("simulate", "txl-tiny", "--placement", "/nope/d.json", check=False)
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_baselines_command(run_cli_here, tmp_path):
    run_cli = run_cli_here  # in this process: test_baselines.py runs the command in a subprocess
    out = tmp_path / "b" / "results.json"
    plot = tmp_path / "b.png"
    text = run_cli(
        "baselines",
        "txl-tiny,random-sp-30-s1",
        "--cluster",
        "v100-nvlink-2",
        "--task",
        "placement",
        "--budget",
        "10",
        "--estimate-budget",
        "128",
        "--json",
        str(out),
        "--plot",
        str(plot),
    ).stdout
    assert "geometric mean" in text and "heft" in text and "annealing@10" in text
    assert "estimate-search@128" in text
    data = json.loads(out.read_text())
    assert [g["graph"] for g in data["graphs"]] == ["txl-tiny", "random-sp-30-s1"]
    assert plot.read_bytes()[:4] == b"\x89PNG" and (out.parent / "results.csv").exists()
    proc = run_cli("baselines", "txl-tiny", "--task", "sorting", check=False)
    assert proc.returncode == 2 and "invalid choice: 'sorting'" in proc.stderr
    proc = run_cli(
        "baselines", "txl-tiny", "--task", "fusion", "--estimate-budget", "8", check=False
    )
    assert proc.returncode == 2 and "--estimate-budget searches placements" in proc.stderr
    proc = run_cli("baselines", "txl-tiny", "--estimate-budget", "-1", check=False)
    assert proc.returncode == 2 and "--estimate-budget must be >= 0" in proc.stderr


def test_illegal_fusion_is_refused_naming_rule_and_ops(run_cli_here, tmp_path):
    """Two contractions fused, a fusion across devices, a mask of the wrong length: one line on
    stderr naming the rule and the ops, exit 2, no Gantt chart written."""
    run_cli = run_cli_here  # refusals: in this process
    graph = resolve_graphs("txl-tiny")[0]
    src, dst = graph.edge_src.tolist(), graph.edge_dst.tolist()
    matmul = next(
        s
        for s, d in zip(src, dst, strict=True)
        if graph.op_classes[s] == "contraction" and graph.op_classes[d] == "elementwise"
    )
    consumer = dst[src.index(matmul)]
    cases = {
        "cross-device": (
            {"placement": [int(i == consumer) for i in range(graph.num_ops)]},
            "rule 2c",
        ),
        "source": ({}, "rule 2a"),
    }
    fusion = [0] * graph.num_ops
    fusion[matmul] = 1
    source = [0] * graph.num_ops
    source[graph.op_classes.index("source")] = 1
    gantt = tmp_path / "g.png"
    for name, (extra, rule) in cases.items():
        bits = fusion if name == "cross-device" else source
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({**extra, "fusion": bits}))
        proc = run_cli(
            "simulate", "txl-tiny", "--decision", str(path), "--gantt", str(gantt), check=False
        )
        assert proc.returncode == 2 and rule in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and not gantt.exists()
    assert (
        repr(graph.op_names[matmul])
        in run_cli(
            "simulate", "txl-tiny", "--decision", str(tmp_path / "cross-device.json"), check=False
        ).stderr
    )
    path = tmp_path / "short.json"
    path.write_text(json.dumps({"fusion": [0] * (graph.num_ops - 1)}))
    proc = run_cli("simulate", "txl-tiny", "--decision", str(path), check=False)
    assert proc.returncode == 2 and f"has {graph.num_ops} ops" in proc.stderr


def test_json_output_is_strict_json(run_cli_here, tmp_path):
    """An illegal decision's inf step time would be ``Infinity`` (not JSON): it is null."""
    run_cli = run_cli_here  # in this process: the JSON is the command's either way
    from graphopt.graph import CompGraph, Op

    path = tmp_path / "huge.json"
    ops = [Op(n, "Relu", measured={"V100": 1e308}) for n in ("a", "b")]
    CompGraph.build("huge", ops, [("a", "b", 1.0)]).save(path)
    out = run_cli("simulate", str(path), "--cluster", "v100-nvlink-2", "--json").stdout
    assert "Infinity" not in out
    result = json.loads(out)[0]
    assert result["step_time"] is None and result["valid"] is False
    assert "not finite" in result["reason"]
