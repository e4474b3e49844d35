"""The exception types of graphopt.errors, and the old paths that still export them."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphopt import errors


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("graphopt.importers.zoo", "DependencyNotInstalled"),
        ("graphopt.distributed", "WorkerDied"),
        ("graphopt.rundir", "RunLocked"),
        ("graphopt.train.trainer", "RunAlreadyFinished"),
        ("graphopt.train.trainer", "TrainingInterrupted"),
        ("graphopt.train.sweep", "SweepInterrupted"),
        ("graphopt.costmodel.runs", "CostModelInterrupted"),
    ],
)
def test_old_paths_export_the_same_types(module: str, name: str) -> None:
    import importlib

    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def test_errors_imports_nothing_of_graphopt() -> None:
    text = Path(errors.__file__).read_text()
    assert "from graphopt" not in text and "import graphopt" not in text


def test_messages() -> None:
    locked = errors.RunLocked(Path("runs/a"), 12, Path("runs/a/.lock"))
    assert (
        isinstance(locked, ValueError) and "process 12" in str(locked) and "kill 12" in str(locked)
    )
    assert "another process" in str(errors.RunLocked(Path("r"), None, Path("r/.lock")))
    assert "no epoch finished" in str(errors.CostModelInterrupted(Path("r"), 0, None))
    assert "best model so far is r/model.pt" in str(
        errors.CostModelInterrupted(Path("r"), 2, Path("r/model.pt"))
    )
    assert issubclass(errors.DependencyNotInstalled, ImportError)


def test_invalid_argument_names_the_argument_or_the_flag() -> None:
    e = errors.InvalidArgument("{workers} {got} needs {got} CPUs; lower {workers}", got=3)
    assert isinstance(e, ValueError) and e.arguments == ("workers",)
    assert str(e) == "workers 3 needs 3 CPUs; lower workers"
    assert e.named({"workers": "--workers"}) == "--workers 3 needs 3 CPUs; lower --workers"
    assert e.named({"other": "--other"}) == str(e)
    weird = errors.InvalidArgument("{path}: {mode} {got!r}", path="{a}", got="{mode}")
    assert weird.named({"mode": "--mode"}) == "{a}: --mode '{mode}'"  # values are not templates


def test_check_integer_takes_a_count_in_range_and_names_the_argument() -> None:
    import numpy as np

    assert errors.check_integer(3, "samples", 1, 5) == 3
    assert errors.check_integer(np.int64(5), "samples", 1, 5) == 5
    for bad in (0, 6, 2.0, "3", True, None):
        with pytest.raises(errors.InvalidArgument) as e:
            errors.check_integer(bad, "samples", 1, 5)
        assert str(e.value) == f"samples must be an integer in 1..5, got {bad!r}"
        assert e.value.named({"samples": "--samples"}).startswith("--samples must be")
