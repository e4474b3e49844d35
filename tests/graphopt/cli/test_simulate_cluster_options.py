"""``graphopt simulate`` with a cluster file that sets the model options (contention, route,
send, copies), in a subprocess: the options reach the simulator, and a bad option is one line
naming the file, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from graphopt.baselines.placement import PLACERS
from graphopt.hardware import get_cluster
from graphopt.sim import simulate
from graphopt.typing import Decision
from graphopt.workloads import resolve_graphs


def test_model_options_from_a_cluster_file(run_cli, tmp_path: Path):
    data = get_cluster("hetero-cpu-2gpu").to_dict()
    data.update(contention="none", route="via-host", send="per-consumer", copies="free")
    path = tmp_path / "accel-host.json"
    path.write_text(json.dumps(data))
    args = ("simulate", "suite:tiny", "--placement", "round-robin", "--json")
    rows = json.loads(run_cli(*args, "--cluster", str(path)).stdout)
    plain = json.loads(run_cli(*args, "--cluster", "hetero-cpu-2gpu").stdout)
    cluster = get_cluster(path)
    assert cluster.host == "cpu0"
    for row, base, graph in zip(rows, plain, resolve_graphs("suite:tiny"), strict=True):
        m = simulate(graph, cluster, Decision(placement=PLACERS["round-robin"](graph, cluster)))
        assert row["step_time"] == m.step_time
        assert row["bytes_moved"] >= base["bytes_moved"]  # relayed sends move bytes twice


def test_bad_model_option_is_one_line_exit_2(run_cli, tmp_path: Path):
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
