"""The project's exception types, in one module that imports nothing of graphopt, so that any
layer may raise them and a caller may catch them without importing the module that raised them
(CompilerGym's ``errors/``). Each is also importable where it was first defined (for example
``graphopt.importers.zoo.DependencyNotInstalled``).

Bad input is a ``ValueError`` whose message says what was received, what is allowed and how to
fix it. :class:`InvalidArgument` is the ``ValueError`` of a library function's argument: its
message names the argument as the function calls it, and a command line that passed the value
under a flag shows the flag instead (:meth:`InvalidArgument.named`); :func:`check_integer` is
the check of a count's range.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from numbers import Integral
from pathlib import Path
from typing import Any


class InvalidArgument(ValueError):
    """A refused argument of a library function, worded with the names of its arguments.

    The message is a :meth:`str.format` template whose fields are either values (given as
    keyword arguments) or, for a field without a value, the name of an argument: ``str(e)``
    writes each such name as it is, :meth:`named` writes another name in its place (a flag).

    Example:
        >>> e = InvalidArgument("{workers} must be >= 1, got {got}", got=0)
        >>> str(e), e.named({"workers": "--workers"})
        ('workers must be >= 1, got 0', '--workers must be >= 1, got 0')

    Attributes:
        arguments: the names of the arguments the message names, in order of appearance.
    """

    def __init__(self, template: str, **values: Any) -> None:
        self.template = template
        self.values = values
        fields = (f for _, f, _, _ in string.Formatter().parse(template) if f)
        self.arguments = tuple(dict.fromkeys(f for f in fields if f not in values))
        super().__init__(self.named({}))

    def named(self, names: Mapping[str, str]) -> str:
        """The message with every argument written as ``names`` calls it (unnamed ones as is)."""
        return self.template.format(**{a: names.get(a, a) for a in self.arguments}, **self.values)


def check_integer(value: Any, name: str, low: int, high: int) -> int:
    """``value``, an integer in ``low..high`` (numpy's too; not a bool); returns it.

    Raises:
        InvalidArgument: anything else, naming the argument ``name``:
            ``samples must be an integer in 1..100000, got 0``.
    """
    if isinstance(value, bool) or not isinstance(value, Integral) or not low <= int(value) <= high:
        raise InvalidArgument(
            f"{{{name}}} must be an integer in {{low}}..{{high}}, got {{got!r}}",
            low=low,
            high=high,
            got=value,
        )
    return int(value)


class DependencyNotInstalled(ImportError):
    """An optional dependency is missing; the message says how to install it (Gymnasium's
    ``DependencyNotInstalled``): ``pip install "graphopt[transformers]"``."""


class WorkerDied(RuntimeError):
    """A Ray worker process died (killed, out of memory, its node lost) while it held work."""


class RunLocked(ValueError):
    """A run directory that another process holds (:func:`graphopt.rundir.locked`); carries the
    run directory and the holder's pid (``None`` when its lock file does not say)."""

    def __init__(self, run: Path, pid: int | None, lock: Path) -> None:
        holder = f"process {pid}" if pid is not None else "another process"
        stop = f"stop it (kill {pid})" if pid is not None else "stop it"
        super().__init__(
            f"run {run} is in use: {holder} is training it (lock {lock}); wait for it to "
            f"end or {stop}, then try again"
        )
        self.run = run
        self.pid = pid


class RunAlreadyFinished(Exception):
    """Raised by :func:`graphopt.train.trainer.resume` for a finished run that is not given more
    timesteps; carries the run directory (nothing was trained or written)."""

    def __init__(self, run: Path, timesteps: int) -> None:
        super().__init__(
            f"run {run} already finished ({timesteps:,} timesteps); to train it further, give a "
            f"larger total: graphopt train --resume {run} --total-timesteps N"
        )
        self.run = run


class TrainingInterrupted(Exception):
    """Raised after Ctrl-C or SIGTERM once the run has been checkpointed; carries the run directory."""

    def __init__(self, run: Path) -> None:
        super().__init__(f"training interrupted; resume with: graphopt train --resume {run}")
        self.run = run


class SweepInterrupted(Exception):
    """Raised by :func:`graphopt.train.sweep.sweep` after Ctrl-C or SIGTERM, once every trial's
    state is recorded; carries the sweep directory, its trials and the summary rows."""

    def __init__(
        self, sweep_dir: Path, trials: list[dict[str, Any]], rows: list[dict[str, Any]]
    ) -> None:
        super().__init__(f"sweep interrupted; continue with: graphopt sweep --resume {sweep_dir}")
        self.sweep_dir, self.trials, self.rows = sweep_dir, trials, rows


class CostModelInterrupted(Exception):
    """Raised after Ctrl-C once a cost-model run has been marked interrupted; carries the run
    directory and the epochs done. ``model``: the best model saved so far (None: no epoch
    finished)."""

    def __init__(self, run: Path, epochs: int, model: Path | None) -> None:
        where = f"the best model so far is {model}" if model is not None else "no epoch finished"
        super().__init__(f"cost-model training interrupted after {epochs} epoch(s); {where}")
        self.run = run
        self.epochs = epochs
