"""Every writing command stopped by SIGTERM at a random moment: its output is unchanged or whole.

Each command is run once to the end (the complete set of files it writes), then again into a
fresh directory and sent SIGTERM after a random delay within its own running time. It must end
with exit 0 (finished first) or 130 (one line, ``interrupted``), and leave either nothing at all
in its output directory or exactly the complete set: no missing file, no extra or hidden
temporary one. Subprocesses (a real signal at a real moment), so these run with the expensive
tests.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

INTERRUPTED = 130
SEEDS = (0, 1, 2)
"""Random moments per command."""

# name -> argv with OUT standing for the output directory (or a file inside it)
COMMANDS: dict[str, list[str]] = {
    "simulate --save-decisions": [
        "simulate",
        "suite:tiny",
        "--placement",
        "heft",
        "--save-decisions",
        "OUT",
    ],
    "baselines --save-decisions": [
        "baselines",
        "suite:tiny",
        "--budget",
        "16",
        "--save-decisions",
        "OUT",
    ],
    "baselines --json --plot": [
        "baselines",
        "gnmt-tiny",
        "--budget",
        "16",
        "--json",
        "OUT/r.json",
        "--plot",
        "OUT/r.png",
    ],
    "baselines --save-decisions --json --plot": [
        "baselines",
        "gnmt-tiny",
        "--budget",
        "16",
        "--save-decisions",
        "OUT/d",
        "--json",
        "OUT/r.json",
        "--plot",
        "OUT/p/r.png",
    ],
    "baselines --curve": ["baselines", "gnmt-tiny", "--curve", "OUT", "--curve-calls", "32"],
    "baselines --curve --save-decisions": [
        "baselines",
        "gnmt-tiny",
        "--curve",
        "OUT/c",
        "--curve-calls",
        "32",
        "--save-decisions",
        "OUT/d",
    ],
    "optimize -o --gantt": [
        "optimize",
        "gnmt-tiny",
        "--cluster",
        "v100-nvlink-4",
        "--calls",
        "64",
        "-o",
        "OUT/d.json",
        "--gantt",
        "OUT/d.png",
    ],
    "graphs export": ["graphs", "export", "suite:tiny", "-o", "OUT"],
}


def _argv(args: list[str], out: Path) -> list[str]:
    return [sys.executable, "-m", "graphopt", *(a.replace("OUT", str(out)) for a in args)]


def _files(out: Path) -> set[str]:
    """Every file below ``out`` (hidden ones included), relative to it."""
    if not out.exists():
        return set()
    return {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}


def _start(args: list[str], out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _argv(args, out),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.expensive
@pytest.mark.parametrize("name", list(COMMANDS))
def test_sigterm_at_a_random_moment_leaves_nothing_or_the_whole_output(
    name: str, tmp_path: Path
) -> None:
    args = COMMANDS[name]
    whole = tmp_path / "whole"
    start = time.perf_counter()
    done = _start(args, whole)
    _, err = done.communicate(timeout=600)
    seconds = time.perf_counter() - start
    assert done.returncode == 0, err
    complete = _files(whole)
    assert complete and not any(Path(f).name.startswith(".") for f in complete), complete
    for seed in SEEDS:
        out = tmp_path / f"stopped-{seed}"
        proc = _start(args, out)
        time.sleep(random.Random(seed).uniform(0.1, 0.95) * seconds)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=600)
        left = _files(out)
        # killed by the signal itself (-15, or -2 after the one line): it came while the
        # interpreter started, before graphopt's handlers were in place (a known gap)
        assert proc.returncode in (0, INTERRUPTED, -signal.SIGTERM, -signal.SIGINT), (seed, err)
        if proc.returncode == INTERRUPTED:
            lines = [line for line in err.splitlines() if line.strip()]
            assert len(lines) == 1 and "interrupted" in lines[0], (seed, err)
        assert left in (set(), complete), (seed, proc.returncode, sorted(left), sorted(complete))
