"""``bench/gpu_check.sh`` without a GPU: the script parses, and its preflight stops it in one line
before any work (what it runs on a GPU is tested piecewise: the CUDA path of
``graphopt.measure.profile`` in tests/graphopt/measure/test_profile.py)."""

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


@pytest.mark.expensive
def test_dry_run_on_the_cpu(tmp_path: Path) -> None:
    """``DEVICE=cpu`` runs every step of the script on this CPU: small, but each step's output is
    there and the measured data come back in the tarball."""
    data = tmp_path / "data"
    env = {
        **os.environ,
        "PY": sys.executable,
        "OUT": str(tmp_path / "out"),
        "DATA": str(data),
        "DEVICE": "cpu",
        "NEED": "",
        "MODELS": "resnet,lstm,transformer",
        "SIZE_MODELS": "resnet-small",
        "COMPILE_MODELS": "resnet",
        "ITERATIONS": "2",
    }
    proc = subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for step in ("step 1:", "step 1b:", "step 2:", "step 3:", "done in"):
        assert step in proc.stdout
    assert "|error| against the eager step" in proc.stdout
    assert (data / "op-model.json").is_file()
    assert len(list(data.glob("*.json.gz"))) == 6  # three models, forward and training
    assert len(list((tmp_path / "data-sizes").glob("*.json.gz"))) == 2
    assert (tmp_path / "out" / "data.tgz").is_file()
