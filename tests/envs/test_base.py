"""What every environment shares: the graph of an episode, and one check of a Discrete action."""

from __future__ import annotations

import numpy as np
import pytest

from envs.base import check_action, check_action_values, episode_end, padding_sizes, pick_graph
from graphopt.workloads import get_graph


@pytest.mark.parametrize("action", [2, np.int64(2), np.uint8(2), np.array(2), 2.0, np.float32(2)])
def test_an_integer_in_range_is_its_index(action):
    index = check_action(action, 4, "a candidate row")
    assert index == 2 and type(index) is int


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (1.5, r"action must be an integer, got 1\.5; expected a candidate row in 0\.\.3"),
        (np.float64("nan"), "action must be an integer, got nan"),
        ("2", "action must be an integer, got '2'"),
        (True, "action must be an integer, got True"),
        (None, "action must be an integer, got None"),
        (np.array([1, 2]), r"action has shape \(2,\); expected \(\) \(one integer: a candidate"),
        (np.array([[1]]), r"action has shape \(1, 1\); expected \(\)"),
        ([1, [2]], "is not one integer"),
        (4, r"action 4 is outside 0\.\.3 \(a candidate row\)"),
        (-1, r"action -1 is outside 0\.\.3"),
        (1e300, r"is outside 0\.\.3"),
    ],
)
def test_anything_else_is_a_value_error_saying_what_is_allowed(action, message):
    with pytest.raises(ValueError, match=message):
        check_action(action, 4, "a candidate row")


def test_pick_graph_takes_a_given_index_or_draws_one():
    rng = np.random.default_rng(0)
    assert pick_graph({"graph": 1}, 3, rng) == 1
    assert 0 <= pick_graph(None, 3, rng) < 3
    with pytest.raises(ValueError, match="outside"):
        pick_graph({"graph": 3}, 3, rng)


def test_multi_discrete_values_are_checked_and_whole_floats_accepted():
    nvec = np.array([2, 3, 4])
    assert check_action_values(np.array([1.0, 2.0, 3.0]), nvec, "x").dtype == np.int64
    with pytest.raises(ValueError, match=r"expected \(3,\) \(one value per slot\)"):
        check_action_values(np.zeros(2, np.int64), nvec, "one value per slot")
    with pytest.raises(ValueError, match="action must hold integers, got dtype float64"):
        check_action_values(np.array([0.5, 0, 0]), nvec, "x")
    with pytest.raises(
        ValueError, match=r"action\[1\] = 3 is out of range; allowed values are 0\.\.2"
    ):
        check_action_values(np.array([0, 3, 0]), nvec, "x")


def test_padding_defaults_to_the_largest_graph_and_four_edges_per_op():
    graphs = [get_graph(n) for n in ("random-layered-16-s1", "random-sp-12-s0")]
    ops = max(g.num_ops for g in graphs)
    assert padding_sizes(graphs, None, None) == (ops, max(4 * ops, *(g.num_edges for g in graphs)))
    assert padding_sizes(graphs, 50, 7) == (50, 7)


def test_the_last_info_reports_no_speedup_for_an_invalid_decision():
    assert episode_end(2.0, True, 3.0, 0.5)["speedup"] == 1.5
    assert episode_end(2.0, False, 3.0, 0.5) == {
        "step_time": 2.0,
        "valid": False,
        "reference_time": 3.0,
        "speedup": 0.0,
        "episode_return": 0.5,
    }
