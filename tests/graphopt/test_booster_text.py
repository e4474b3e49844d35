"""LightGBM's text model read field by field (graphopt.booster_text): every damage LightGBM would
crash on, loop on, or report without naming the field is one line naming it; the canonical text
predicts as the original."""

from __future__ import annotations

import lightgbm
import numpy as np
import pytest

from graphopt.booster_text import read_booster

FEATURES = ("a", "kind", "b")


@pytest.fixture(scope="module")
def text() -> str:
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.random(300), rng.integers(0, 4, 300), rng.random(300)])
    y = x[:, 0] + (x[:, 1] == 2) * 0.5
    data = lightgbm.Dataset(x, y, feature_name=list(FEATURES), categorical_feature=[1])
    params = {"objective": "regression", "num_leaves": 5, "verbose": -1, "num_threads": 1}
    params |= {"min_data_per_group": 5, "cat_smooth": 1.0}
    return lightgbm.train(params, data, num_boost_round=8).model_to_string()


def test_the_canonical_text_predicts_as_the_original(text):
    booster = read_booster(text, FEATURES)
    assert "tree_sizes" not in booster.text and "num_cat=1" in text  # a categorical split read
    x = np.array([[0.2, 2, 0.5], [0.9, 1, 0.1], [0.5, np.nan, 0.3]])
    a = lightgbm.Booster(model_str=text).predict(x)
    b = lightgbm.Booster(model_str=booster.text).predict(x)
    np.testing.assert_array_equal(a, b)
    assert booster.largest_sum > 0


def _tree0(text: str, key: str, value: str) -> str:
    """``text`` with ``key`` of its first tree set to ``value``."""
    head, _, rest = text.partition("\nTree=0\n")
    block, sep, tail = rest.partition("\n\n")
    lines = [f"{key}={value}" if line.startswith(f"{key}=") else line for line in block.split("\n")]
    return head + "\nTree=0\n" + "\n".join(lines) + sep + tail


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (
            lambda t: t.replace("num_tree_per_iteration=1", "num_tree_per_iteration=0"),
            "num_tree_per_iteration is '0', not 1",
        ),
        (lambda t: t.replace("version=v4", "version=v9"), "version 'v9' is not v3 or v4"),
        (lambda t: t.replace("objective=regression", "objective=binary"), "objective 'binary"),
        (lambda t: t.replace("feature_names=a", "feature_names=z"), "feature_names are not"),
        (
            lambda t: _tree0(t, "threshold", "abc 1 2 3"),
            "tree 0: threshold holds something that is not a number",
        ),
        (lambda t: _tree0(t, "left_child", "0 -1 -2 -3"), "tree 0: node 0 is reached twice"),
        (
            lambda t: _tree0(t, "split_feature", "7 0 0 0"),
            "tree 0: split_feature holds 7, outside 0..2",
        ),
        (lambda t: _tree0(t, "num_leaves", "9"), "tree 0: leaf_value has 5 entries, not 9"),
        (
            lambda t: _tree0(t, "leaf_value", "nan 1 1 1 1"),
            "tree 0: leaf_value holds a value that is not a finite",
        ),
        (lambda t: _tree0(t, "decision_type", "12 0 0 0"), "tree 0: decision_type holds 12"),
        (lambda t: _tree0(t, "is_linear", "1"), "tree 0: linear trees are not read"),
    ],
    ids=[
        "trees-per-iteration",
        "version",
        "objective",
        "names",
        "threshold",
        "cycle",
        "feature",
        "leaves",
        "nan",
        "decision",
        "linear",
    ],
)
def test_damage_is_one_line_naming_the_field(text, edit, match):
    with pytest.raises(ValueError, match=match) as info:
        read_booster(edit(text), FEATURES)
    assert "\n" not in str(info.value)
