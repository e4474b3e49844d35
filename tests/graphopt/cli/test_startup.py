"""Start-up of the ``graphopt`` command: which packages building the parser, ``--help`` and a
light command import (a functional check; bench/bench_startup.py times it)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphopt import cli

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("torch", "stable_baselines3", "numba", "torch_geometric", "gymnasium")
"""Packages that only the commands needing them may import."""

CHILD = """
import sys
from graphopt import cli
{body}
print(repr(sorted({{m.split(".")[0] for m in sys.modules}})))
"""


def imported_after(body: str) -> set[str]:
    """The top-level packages in ``sys.modules`` after a fresh Python runs ``body`` (which may use
    ``cli``, the imported :mod:`graphopt.cli`)."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD.format(body=body)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    return set(ast.literal_eval(proc.stdout.strip().splitlines()[-1]))


def run_main(*argv: str) -> str:
    """A child body that runs ``graphopt ARGV`` and ignores the exit of ``--help``."""
    return f"try:\n    cli.main({list(argv)!r})\nexcept SystemExit:\n    pass"


def test_building_the_parser_imports_no_heavy_package() -> None:
    found = imported_after("cli.build_parser()") & set(HEAVY)
    assert not found, f"graphopt.cli.build_parser() imports {sorted(found)}"


def test_help_imports_no_heavy_package_nor_numpy() -> None:
    found = imported_after(run_main("--help")) & {*HEAVY, "numpy"}
    assert not found, f"graphopt --help imports {sorted(found)}"


@pytest.mark.parametrize("command", [m.NAME for m in cli.COMMANDS])
def test_command_help_imports_no_heavy_package(command: str) -> None:
    found = imported_after(run_main(command, "--help")) & set(HEAVY)
    assert not found, f"graphopt {command} --help imports {sorted(found)}"


def test_simulate_imports_the_simulator_but_not_torch() -> None:
    argv = ("simulate", "txl-tiny", "--placement", "round-robin", "--json")
    packages = imported_after(run_main(*argv))
    assert "numba" in packages
    found = packages & {"torch", "stable_baselines3", "torch_geometric", "gymnasium"}
    assert not found, f"graphopt simulate imports {sorted(found)}"


def test_top_level_help_is_the_same_with_one_command_built() -> None:
    full = cli.build_parser().format_help()
    for module in cli.COMMANDS:
        assert cli.build_parser(module.NAME).format_help() == full
    assert cli.build_parser("").format_help() == full


def test_command_of() -> None:
    assert cli.command_of(["simulate", "txl-tiny", "--json"]) == "simulate"
    assert cli.command_of(["--help"]) == ""
    assert cli.command_of([]) == ""
    assert cli.command_of(["-h", "graphs", "list"]) == "graphs"
    assert cli.command_of(["--", "eval", "RUN"]) == "eval"


def test_names_copied_for_help_match_the_library() -> None:
    from graphopt.baselines.placement import PLACERS
    from graphopt.cli import simulate

    assert tuple(PLACERS) == simulate.PLACER_NAMES
