"""Smoke tests of ``graphopt simulate`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
from conftest import ROOT

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
    # a pipe without COLUMNS: rich would assume 80 columns and cut '1,297.372' to '1,297.…'
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}

    def simulate(*extra: str) -> str:
        cmd = [sys.executable, "-m", "graphopt", "simulate", "gnmt-2", "--placement", "split"]
        proc = subprocess.run(
            [*cmd, *extra], capture_output=True, text=True, cwd=ROOT, timeout=300, env=env
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    step_ms = json.loads(simulate("--json"))[0]["step_time"] * 1e3
    table = simulate()
    assert f"{step_ms:,.3f}" in table and "…" not in table


def test_help_lists_every_placer_and_defaults(run_cli):
    text = " ".join(run_cli("simulate", "--help").stdout.split())
    assert all(name in text for name in PLACERS) and "(default: single)" in text


def test_bad_inputs(run_cli):
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
        assert f"cannot write Gantt chart '{gantt}'" in proc.stderr
    proc = run_cli("simulate", "txl-tiny", "--placement", "/nope/d.json", check=False)
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_baselines_command(run_cli, tmp_path):
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
