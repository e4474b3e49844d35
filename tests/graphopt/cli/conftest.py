"""Run the ``graphopt`` command as a user would: in this process by default, or in a subprocess.

Most CLI tests call :func:`graphopt.cli.main` in the test's own process (:func:`graphopt_here`):
the same parser, checks, work and exit status as ``python -m graphopt``, without the seconds a new
process spends importing torch again (over a hundred such calls in the suite). A test that needs
a real process (a signal, what ``python -m graphopt`` itself does, output written below Python's
``sys.stdout``) passes ``process=True`` (:func:`graphopt_process`).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def graphopt_process(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -m graphopt ARGS`` in a subprocess from the repository root; ``check``: fail on a
    non-zero exit, showing both streams."""
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
    """``graphopt ARGS`` in this process (:func:`graphopt.cli.main`) from the repository root, its
    streams captured. Same result type and ``check`` as :func:`graphopt_process`; an exception the
    command does not turn into an exit status fails the test with its traceback. What a command
    changes of the process (working directory, ``COLUMNS``, torch's thread count) is restored."""
    import torch

    from graphopt.cli import main

    out, err = io.StringIO(), io.StringIO()
    before_columns, before_cwd = os.environ.get("COLUMNS"), os.getcwd()
    before_threads = torch.get_num_threads()
    os.environ["COLUMNS"] = "200"
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse's refusals
                code = e.code if isinstance(e.code, int) else 1
    finally:
        os.chdir(before_cwd)
        torch.set_num_threads(before_threads)
        if before_columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before_columns
    proc = subprocess.CompletedProcess(["graphopt", *args], code, out.getvalue(), err.getvalue())
    if check and code != 0:
        raise AssertionError(f"graphopt {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def graphopt_cli(
    *args: str, check: bool = True, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """``graphopt ARGS``: in this process (:func:`graphopt_here`), or with ``process=True`` in a
    subprocess (:func:`graphopt_process`)."""
    run = graphopt_process if process else graphopt_here
    return run(*args, check=check)


@pytest.fixture
def run_cli():
    return graphopt_cli


@pytest.fixture
def run_cli_here():
    return graphopt_here
