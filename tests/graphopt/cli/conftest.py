"""Run the ``graphopt`` command in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def graphopt_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -m graphopt ARGS`` from the repository root; ``check``: fail on a non-zero exit,
    showing both streams."""
    proc = subprocess.run(
        [sys.executable, "-m", "graphopt", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"graphopt {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def graphopt_here(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``graphopt ARGS`` in this process (:func:`graphopt.cli.main`), its streams captured: for
    refusals that stop before any work, where a subprocess would spend seconds importing torch
    again. Same result type and ``check`` as :func:`graphopt_cli`; an exception the command does
    not turn into exit 2 fails the test with its traceback."""
    import contextlib
    import io

    from graphopt.cli import main

    out, err = io.StringIO(), io.StringIO()
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "200"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse's refusals
                code = e.code if isinstance(e.code, int) else 1
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before
    proc = subprocess.CompletedProcess(["graphopt", *args], code, out.getvalue(), err.getvalue())
    if check and code != 0:
        raise AssertionError(f"graphopt {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def run_cli():
    return graphopt_cli


@pytest.fixture
def run_cli_here():
    return graphopt_here
