from __future__ import annotations

import math

import pytest

from envs.rewards import CAP, INVALID, REWARD_MODES, reward


def test_values():
    assert reward("speedup", 1.0, True, 1.0) == 0.0
    assert reward("speedup", 0.81, True, 1.0) == pytest.approx(0.1)
    assert reward("neg_sqrt_time", 0.25, True, 1.0) == -0.5
    assert reward("log_speedup", 0.5, True, 1.0) == pytest.approx(math.log(2))


@pytest.mark.parametrize("mode", REWARD_MODES)
def test_invalid_is_worse_than_any_valid_and_valid_is_capped(mode):
    ref = 0.3
    worst_valid = reward(mode, 1e9, True, ref)
    assert worst_valid == pytest.approx(reward(mode, CAP * ref, True, ref))
    assert reward(mode, 1e-9, False, ref) < worst_valid
    assert reward(mode, 0.1 * ref, True, ref) > reward(mode, ref, True, ref)


def test_bad_mode_and_reference():
    with pytest.raises(ValueError, match="unknown reward mode 'fast'; choose one of: speedup"):
        reward("fast", 1.0, True, 1.0)
    with pytest.raises(ValueError, match="reference step time"):
        reward("speedup", 1.0, True, 0.0)


def test_invalid_penalties_are_fixed():
    ref = 0.04
    assert INVALID == 16.0 and CAP == 9.0
    assert reward("speedup", 0.01, False, ref) == pytest.approx(-3.0)
    assert reward("neg_sqrt_time", 0.01, False, ref) == pytest.approx(-math.sqrt(16 * ref))
    assert reward("log_speedup", 0.01, False, ref) == pytest.approx(-math.log(16))
