"""The budgets of the anytime curves (:mod:`graphopt.eval.curves`): their defaults and how a
list of them is read. Standard library only, so that the command line shows the defaults without
loading the curves' dependencies.
"""

from __future__ import annotations

import math

from graphopt.errors import InvalidArgument

CALLS = (0, 16, 64, 256, 1024, 4096)
"""Simulator-call budgets (0: the methods' start)."""
SECONDS = (1.0, 10.0, 60.0)
"""Wall-clock budgets, seconds."""
MAX_CALLS = 2**22
"""The largest call budget a curve point may ask for (a run of about an hour on small graphs)."""


def format_budgets(budgets: tuple[float, ...]) -> str:
    """``(1.0, 10.0)`` -> ``"1,10"``: the text :func:`parse_budgets` reads back."""
    return ",".join(f"{b:g}" for b in budgets)


def parse_budgets(text: str, axis: str) -> tuple[float, ...]:
    """``"0,16,64"`` -> budgets of ``axis`` (the argument they are given as: ``calls`` or
    ``seconds``): non-negative integers for ``calls`` (0: no search), positive numbers for
    ``seconds``; sorted, duplicates dropped.

    Raises:
        InvalidArgument: an empty list, or an entry that is not such a number (one line naming
            the argument and the entry).
    """
    entries = [t.strip() for t in text.split(",") if t.strip()]
    if not entries:
        raise InvalidArgument(f"{{{axis}}} needs at least one budget, got {{got!r}}", got=text)
    out: set[float] = set()
    for entry in entries:
        if axis == "calls":
            if not entry.isdigit() or int(entry) > MAX_CALLS:
                raise InvalidArgument(
                    "{calls} budget {got!r} is not an integer in 0..{most:,} (simulator calls, "
                    "e.g. 0,16,64,256)",
                    got=entry,
                    most=MAX_CALLS,
                )
            out.add(int(entry))
        else:
            try:
                value = float(entry)
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and value > 0):
                raise InvalidArgument(
                    "{seconds} budget {got!r} is not a positive number of seconds (e.g. 1,10,60)",
                    got=entry,
                )
            out.add(value)
    return tuple(sorted(out))
