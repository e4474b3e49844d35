"""The anytime-curve options shared by ``graphopt eval --curve`` and ``graphopt baselines --curve``
(:mod:`graphopt.eval.curves`); standard library only at module level."""

from __future__ import annotations

import argparse
from typing import Any

CALLS = "0,16,64,256,1024,4096"
SECONDS = "1,10,60"


def add_budget_options(p: Any) -> None:
    """``--curve-calls`` and ``--curve-seconds``."""
    p.add_argument(
        "--curve-calls", default=CALLS, help="simulator-call budgets of --curve (integers >= 0)"
    )
    p.add_argument("--curve-seconds", default=SECONDS, help="wall-clock budgets of --curve, s")


def budgets(args: argparse.Namespace) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The parsed ``(calls, seconds)`` budgets.

    Raises:
        ValueError: a budget that is not a number of its kind (one line naming it).
    """
    from graphopt.eval.curves import parse_budgets

    calls = tuple(int(k) for k in parse_budgets(args.curve_calls, "calls"))
    return calls, parse_budgets(args.curve_seconds, "seconds")
