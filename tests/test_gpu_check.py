"""``bench/gpu_check.sh`` without a GPU: the script parses, and its preflight stops it in one line
before any work (what it runs on a GPU is tested piecewise: the CUDA path of
``graphopt.importers.profile`` in tests/graphopt/importers/test_profile.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "gpu_check.sh"


def test_script_parses() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_preflight_stops_without_a_gpu(tmp_path: Path) -> None:
    env = {**os.environ, "PY": sys.executable, "OUT": str(tmp_path)}
    proc = subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].startswith("gpu_check: ")
    assert not any(tmp_path.iterdir())  # nothing measured, nothing written
