"""Strict JSON for output (graphopt.strict_json): non-finite numbers, numpy's included, are null;
the text parses with a parser that refuses NaN and Infinity."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from graphopt.strict_json import dumps, finite_or_none


def strict_loads(text: str):
    def refuse(name: str):
        raise ValueError(f"{name} in output")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_are_null_at_any_depth():
    value = {"a": math.nan, "b": [1.0, math.inf, (-math.inf, 2)], "c": {"d": np.float64("nan")}}
    assert finite_or_none(value) == {"a": None, "b": [1.0, None, [None, 2]], "c": {"d": None}}
    assert strict_loads(dumps(value)) == {"a": None, "b": [1.0, None, [None, 2]], "c": {"d": None}}


def test_numpy_scalars_and_arrays_become_numbers():
    value = {"f": np.float32("inf"), "i": np.int64(3), "a": np.array([1.5, np.nan])}
    assert strict_loads(dumps(value)) == {"f": None, "i": 3, "a": [1.5, None]}


def test_what_is_not_a_number_is_still_refused():
    with pytest.raises(TypeError):
        dumps({"x": object()})
