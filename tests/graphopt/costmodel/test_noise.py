"""Measurement noise from repeated configurations: known noise is recovered, bad input refused."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.costmodel.noise import (
    noise_ceiling_tau,
    relative_noise,
    repeat_groups,
    repeat_tau,
)


def _measured(sigma: float, copies: int = 3, configs: int = 400, seed: int = 0):
    rng = np.random.default_rng(seed)
    feat = rng.integers(0, 1000, size=(configs, 2, 3))
    mu = rng.uniform(1.0, 2.0, configs)
    feat = np.repeat(feat, copies, axis=0)
    runtime = np.repeat(mu, copies) * (1 + sigma * rng.standard_normal(configs * copies))
    return feat, runtime


def test_groups_follow_identical_features():
    feat = np.array([[1, 2], [3, 4], [1, 2], [1, 3]])
    g = repeat_groups(feat)
    assert g[0] == g[2] and len({g[0], g[1], g[3]}) == 3


def test_known_noise_is_recovered():
    feat, runtime = _measured(sigma=0.01)
    assert relative_noise(runtime, repeat_groups(feat)) == pytest.approx(0.01, rel=0.1)


def test_noise_free_measurements_have_a_perfect_ceiling():
    feat, runtime = _measured(sigma=0.0)
    groups = repeat_groups(feat)
    assert relative_noise(runtime, groups) == pytest.approx(0.0, abs=1e-12)
    assert noise_ceiling_tau(runtime, groups, np.arange(len(runtime)), 0.0) == pytest.approx(1.0)
    mask, tau = repeat_tau(runtime, groups, np.arange(len(runtime)))
    assert mask.all() and tau == pytest.approx(1.0)


def test_more_noise_lowers_both_taus():
    taus = []
    for sigma in (0.01, 0.2):
        feat, runtime = _measured(sigma=sigma)
        groups = repeat_groups(feat)
        rows = np.arange(len(runtime))
        taus.append(
            (noise_ceiling_tau(runtime, groups, rows, sigma), repeat_tau(runtime, groups, rows)[1])
        )
    assert taus[1][0] < taus[0][0] and taus[1][1] < taus[0][1]
    # a second measurement ranks worse than knowing the mean
    assert taus[1][1] < taus[1][0]


def test_rows_measured_once_are_left_out_of_the_repeat_tau():
    runtime = np.array([1.0, 1.1, 2.0, 2.1, 5.0])
    groups = np.array([0, 0, 1, 1, 2])
    mask, tau = repeat_tau(runtime, groups, np.arange(5))
    assert mask.tolist() == [True, True, True, True, False]
    # 4 pairs across groups agree, the 2 within a group disagree: (4 - 2) / 6
    assert tau == pytest.approx(1 / 3)


def test_bad_input():
    with pytest.raises(ValueError, match="more than once"):
        relative_noise(np.array([1.0, 2.0]), np.array([0, 1]))
    with pytest.raises(ValueError, match="positive"):
        relative_noise(np.array([1.0, -1.0]), np.array([0, 0]))
    with pytest.raises(ValueError, match="one value per row"):
        relative_noise(np.array([1.0, 2.0, 3.0]), np.array([0, 0]))
    with pytest.raises(ValueError, match="at least one"):
        repeat_groups(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="fewer than two"):
        repeat_tau(np.array([1.0, 2.0]), np.array([0, 1]), np.arange(2))
