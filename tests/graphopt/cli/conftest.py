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


@pytest.fixture
def run_cli():
    return graphopt_cli
