"""``graphopt baselines --curve DIR --workers N``: one Ray task per graph, the serial curves
(the calls axis; the seconds axis is measured, so it is not compared)."""

from __future__ import annotations

import csv
from pathlib import Path

from graphopt.cli import main


def _calls_axis(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        rows = list(csv.DictReader(f))
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows if r["axis"] == "calls"]


def test_two_workers_give_the_serial_curves(tmp_path: Path):
    from ray_testing import need_ray

    need_ray()
    args = ["baselines", "txl-tiny,gnmt-tiny,rnnlm-tiny", "--cluster", "v100-nvlink-2"]
    args += ["--curve-calls", "0,8", "--curve-seconds", "0.01"]
    assert main([*args, "--curve", str(tmp_path / "serial")]) == 0
    assert main([*args, "--workers", "2", "--curve", str(tmp_path / "ray")]) == 0
    serial = _calls_axis(tmp_path / "serial" / "curves.csv")
    assert _calls_axis(tmp_path / "ray" / "curves.csv") == serial
    assert list(dict.fromkeys(r["graph"] for r in serial)) == [
        "txl-tiny",
        "gnmt-tiny",
        "rnnlm-tiny",
    ]


def test_workers_below_one_is_a_one_line_error(tmp_path: Path, capsys):
    for extra in ([], ["--curve", str(tmp_path / "c")]):
        assert main(["baselines", "txl-tiny", "--workers", "0", *extra]) == 2
        assert capsys.readouterr().err == "graphopt: error: --workers must be >= 1, got 0\n"
    assert not (tmp_path / "c").exists()
