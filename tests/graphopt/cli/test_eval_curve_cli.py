"""``graphopt eval RUN --curve`` refuses bad budgets in one line, before any model is read."""

from __future__ import annotations

import pytest
from tiny_runs import tiny_config

from graphopt import rundir


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--curve-calls", "0,16,lots", "--curve-calls budget 'lots' is not an integer"),
        ("--curve-seconds", "-1", "--curve-seconds budget '-1' is not a positive number"),
        ("--finetune-max", "-2", "--finetune-max must be >= 0, got -2"),
    ],
)
def test_bad_curve_budgets_are_one_line_errors(run_cli, tmp_path, flag, value, message) -> None:
    run = rundir.new_run_dir(tmp_path / "runs", "placement", "c")
    tiny_config().save(run / rundir.CONFIG_FILE)
    proc = run_cli(
        "eval", str(run), "--graphs", "txl-tiny", "--curve", f"{flag}={value}", check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (run / "eval").exists()
