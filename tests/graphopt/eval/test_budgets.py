"""The budgets of the anytime curves: defaults and how a list of them is read."""

from __future__ import annotations

import pytest

from graphopt.errors import InvalidArgument
from graphopt.eval.budgets import CALLS, SECONDS, format_budgets, parse_budgets


@pytest.mark.parametrize(
    ("text", "axis", "match"),
    [
        ("0,16,x", "calls", "calls budget 'x' is not an integer"),
        ("-1", "calls", "calls budget '-1' is not an integer"),
        ("1.5", "calls", "calls budget '1.5'"),
        ("", "calls", "calls needs at least one budget"),
        ("0", "seconds", "seconds budget '0' is not a positive number"),
        ("1,inf", "seconds", "seconds budget 'inf'"),
    ],
)
def test_bad_budgets_are_refused_naming_the_argument(text: str, axis: str, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match) as e:
        parse_budgets(text, axis)
    assert str(e.value).startswith(axis)
    flag = f"--curve-{axis}"
    assert e.value.named({axis: flag}).startswith(flag)


def test_budgets_are_sorted_and_unique() -> None:
    assert parse_budgets("64, 0,16,16", "calls") == (0, 16, 64)
    assert parse_budgets("10,1", "seconds") == (1.0, 10.0)


def test_the_defaults_read_back() -> None:
    assert parse_budgets(format_budgets(CALLS), "calls") == CALLS
    assert parse_budgets(format_budgets(SECONDS), "seconds") == SECONDS
    assert format_budgets(SECONDS) == "1,10,60"
