"""The README's five-minute tour runs top to bottom, each line on what the lines above made.

The commands of the tour's first code block (under ``### Command line``; the optional Ray block
after it is not run) are run in order in one empty temporary directory, as on a fresh clone, each
as ``python -m graphopt ...`` (a line's ``&&`` runs its commands in turn); every command must exit 0
without a refusal. Only budgets change (:func:`small_budgets`), so the tour takes minutes, not
hours:

- ``--budget N`` and the call budgets inside modes and file names (``search:N``, ``plan:N``,
  ``annealing@N``) become :data:`CALLS`: a file the tour names after a budget is the one the
  lines above wrote at the same, substituted budget;
- ``--seconds N`` becomes :data:`SECONDS`; ``--total-timesteps N`` becomes ``N //``
  :data:`TIMESTEP_DIVISOR` (so a resumed run's larger total stays larger);
- a budget the tour leaves to a default gets a small one appended: ``train --config FILE``
  ``--total-timesteps`` :data:`CONFIG_TIMESTEPS`; ``profile`` ``--iterations 1 --warmup 0``;
  ``stepwise train`` ``--updates 1 --imitation-updates 1``; ``stepwise eval`` ``--methods``
  :data:`STEPWISE_METHODS`.

And one location: ``graphopt/configs/`` (relative to a clone's root) becomes this checkout's.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CALLS = 8
SECONDS = 1
TIMESTEP_DIVISOR = 80
CONFIG_TIMESTEPS = 256
STEPWISE_METHODS = "greedy,sample:2,annealing:2"


def tour_lines(readme: str) -> list[str]:
    """The lines of the first code block under ``### Command line``."""
    section = readme.split("### Command line", 1)[1]
    block = section.split("```", 2)[1]
    return [line for line in block.splitlines() if line.strip()]


def commands(line: str) -> list[list[str]]:
    """A tour line's ``graphopt`` commands: split on ``&&``, comments dropped."""
    tokens = shlex.split(line, comments=True)
    out: list[list[str]] = [[]]
    for token in tokens:
        if token == "&&":
            out.append([])
        else:
            out[-1].append(token)
    assert all(c and c[0] == "graphopt" for c in out), line
    return [c[1:] for c in out]


def small_budgets(args: list[str]) -> list[str]:
    """``args`` (after ``graphopt``) with the substitutions of the module docstring."""
    out: list[str] = []
    flag = None
    for token in args:
        if flag == "--budget":
            token = str(CALLS)
        elif flag == "--seconds":
            token = str(SECONDS)
        elif flag == "--total-timesteps":
            token = str(int(token) // TIMESTEP_DIVISOR)
        else:
            token = re.sub(r"(@|search:|plan:)\d+", rf"\g<1>{CALLS}", token)
            token = token.replace("graphopt/configs/", f"{ROOT}/graphopt/configs/")
        out.append(token)
        flag = token if token.startswith("--") else None
    command = tuple(args[:2])
    if command[0] == "profile":
        out += ["--iterations", "1", "--warmup", "0"]
    elif command[0] == "train" and "--config" in args and "--total-timesteps" not in args:
        out += ["--total-timesteps", str(CONFIG_TIMESTEPS)]
    elif command == ("stepwise", "train"):
        out += ["--updates", "1", "--imitation-updates", "1"]
    elif command == ("stepwise", "eval") and "--methods" not in args:
        out += ["--methods", STEPWISE_METHODS]
    return out


def test_the_substitutions_change_budgets_only() -> None:
    line = (
        "graphopt baselines suite:tiny --budget 256 --save-decisions out/ && "
        "graphopt simulate g --decision out/g--annealing@256.json  # a comment"
    )
    first, second = (small_budgets(c) for c in commands(line))
    assert first == ["baselines", "suite:tiny", "--budget", "8", "--save-decisions", "out/"]
    assert second == ["simulate", "g", "--decision", "out/g--annealing@8.json"]
    train = small_budgets(["train", "--config", "graphopt/configs/gdp.yaml"])
    assert train == ["train", "--config", f"{ROOT}/graphopt/configs/gdp.yaml"] + [
        "--total-timesteps",
        "256",
    ]
    assert small_budgets(["train", "--total-timesteps", "40000"])[-1] == "500"
    assert small_budgets(["eval", "R", "--mode", "plan:4096"])[-1] == "plan:8"


@pytest.mark.skipif(
    os.environ.get("RUN_TOUR") != "1",
    reason="the whole tour takes 10-15 minutes on 2 cores (five training runs, two profiles): "
    "make test-tour runs it",
)
def test_the_readme_tour_runs_top_to_bottom(tmp_path: Path) -> None:
    lines = tour_lines((ROOT / "README.md").read_text())
    assert len(lines) >= 20  # the block was found
    env = {**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1"}
    for line in lines:
        for args in commands(line):
            argv = [sys.executable, "-m", "graphopt", *small_budgets(args)]
            proc = subprocess.run(
                argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
            )
            shown = f"{line}\n  ran: {shlex.join(argv[2:])}\n{proc.stdout[-3000:]}\n{proc.stderr}"
            assert proc.returncode == 0, shown
            said = (proc.stdout + proc.stderr).splitlines()
            refused = [s for s in said if s.startswith("graphopt: ")]
            assert not refused, shown  # e.g. a resumed run that was already finished (exit 0)
