"""``graphopt baselines --workers N``: one Ray task per graph, the same table as serial."""

from __future__ import annotations

import csv
from pathlib import Path

from graphopt.cli import main


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return [{k: v for k, v in r.items() if k != "wall_seconds"} for r in csv.DictReader(f)]


def test_two_workers_give_the_serial_table(tmp_path: Path):
    from ray_testing import need_ray

    need_ray()
    args = [
        "baselines",
        "txl-tiny,gnmt-tiny,rnnlm-tiny",
        "--cluster",
        "v100-nvlink-2",
        "--budget",
        "8",
    ]
    assert main([*args, "--json", str(tmp_path / "serial.json")]) == 0
    assert main([*args, "--workers", "2", "--json", str(tmp_path / "ray.json")]) == 0
    serial = _rows(tmp_path / "serial.csv")
    assert _rows(tmp_path / "ray.csv") == serial
    assert [r["graph"] for r in serial][:: len(serial) // 3] == [
        "txl-tiny",
        "gnmt-tiny",
        "rnnlm-tiny",
    ]
