"""``--mode``: the syntax of every mode and the modes each task's policy runs in, checked without
torch (the CLI checks the flag before any work)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from graphopt.errors import InvalidArgument
from graphopt.modes import parse_mode


def test_modes_and_their_budgets() -> None:
    assert parse_mode("greedy") == ("greedy", 1)
    assert parse_mode("sample:8") == ("sample", 8)
    assert parse_mode("finetune:16", "placement") == ("finetune", 16)
    assert parse_mode("plan:4", "placement") == ("plan", 4)
    assert parse_mode("search:32", "placement-edit") == ("search", 32)
    assert parse_mode("search:32", "scheduling-edit") == ("search", 32)


@pytest.mark.parametrize(
    ("mode", "task", "message"),
    [
        ("best", None, "unknown mode 'best'"),
        ("sample:0", None, "unknown mode 'sample:0'"),
        ("plan:4", "scheduling", "mode plan:4 refines placements"),
        ("sample:4", "scheduling-edit", "does not apply to a scheduling-edit policy"),
    ],
)
def test_bad_modes_are_one_line_naming_the_flag(mode: str, task: str | None, message: str) -> None:
    with pytest.raises(InvalidArgument) as e:
        parse_mode(mode, task)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert e.value.named({"mode": "--mode"}).startswith(("unknown --mode", "--mode"))


def test_checking_a_mode_imports_neither_torch_nor_the_policies() -> None:
    code = (
        "import sys; from graphopt.modes import parse_mode; parse_mode('sample:2', 'placement'); "
        "print(sorted(m for m in ('torch', 'policies', 'stable_baselines3') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
