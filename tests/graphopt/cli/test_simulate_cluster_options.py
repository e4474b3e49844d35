"""``graphopt simulate`` with a cluster file that sets the model options (contention, route,
send, copies), through the command's entry point in this process (test_simulate.py runs the
command in a subprocess): the options reach the simulator, and a bad option is one line naming
the file, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from graphopt.hardware import get_cluster
from graphopt.sim import simulate
from graphopt.typing import Decision
from graphopt.workloads import resolve_graphs


def test_model_options_from_a_cluster_file(run_cli_here, tmp_path: Path):
    run_cli = run_cli_here  # in this process: see the docstring above
    data = get_cluster("hetero-cpu-2gpu").to_dict()
    data.update(contention="none", route="via-host", send="per-consumer", copies="free")
    path = tmp_path / "accel-host.json"
    path.write_text(json.dumps(data))
    cluster = get_cluster(path)
    assert cluster.host == "cpu0"
    for graph in resolve_graphs("txl-tiny,gnmt-tiny"):
        placement = {name: i % 3 for i, name in enumerate(graph.op_names)}  # ops dealt in turn
        decision = tmp_path / "decision.json"
        decision.write_text(json.dumps(placement))  # a name-keyed placement
        args = ("simulate", graph.name, "--placement", str(decision), "--json")
        row = json.loads(run_cli(*args, "--cluster", str(path)).stdout)[0]
        base = json.loads(run_cli(*args, "--cluster", "hetero-cpu-2gpu").stdout)[0]
        dealt = np.array([placement[name] for name in graph.op_names])
        assert row["step_time"] == simulate(graph, cluster, Decision(placement=dealt)).step_time
        assert row["bytes_moved"] >= base["bytes_moved"]  # relayed sends move bytes twice


def test_bad_model_option_is_one_line_exit_2(run_cli_here, tmp_path: Path):
    run_cli = run_cli_here  # in this process: see the docstring above
    data = get_cluster("v100-nvlink-2").to_dict()
    for options, problem in (
        ({"route": "via-host"}, "route 'via-host' needs a host device"),
        ({"contention": "nope"}, "unknown contention 'nope'; choose one of: link, none"),
    ):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({**data, **options}))
        proc = run_cli("simulate", "txl-tiny", "--cluster", str(path), check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and problem in lines[0], proc.stderr
