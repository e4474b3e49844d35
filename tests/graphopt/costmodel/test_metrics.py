"""Ranking metrics: agree with O(n^2) twins, exact on hand-worked cases, strict on bad input."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from graphopt.costmodel.metrics import (
    grouped_report,
    kendall_tau,
    ordered_pair_accuracy,
    ranking_report,
    top_k_error,
)

# ---- slow twins: every pair enumerated, straight from the definitions -------------------------


def _sign(x: float) -> int:
    return int(x > 0) - int(x < 0)


def ref_kendall_tau(pred, true) -> float:
    c = d = t_pred = t_true = 0
    for i, j in itertools.combinations(range(len(pred)), 2):
        sp, st = _sign(pred[i] - pred[j]), _sign(true[i] - true[j])
        t_pred += sp == 0
        t_true += st == 0
        c += sp * st > 0
        d += sp * st < 0
    n0 = len(pred) * (len(pred) - 1) // 2
    if n0 in (t_pred, t_true):
        return 0.0
    return (c - d) / math.sqrt((n0 - t_pred) * (n0 - t_true))


def ref_opa(pred, true) -> float:
    score = pairs = 0.0
    for i, j in itertools.combinations(range(len(pred)), 2):
        if true[i] == true[j]:
            continue
        pairs += 1
        if pred[i] == pred[j]:
            score += 0.5
        elif (pred[i] < pred[j]) == (true[i] < true[j]):
            score += 1
    return score / pairs if pairs else 0.5


def ref_top_k_error(pred, true, k) -> float:
    ranked = sorted(range(len(pred)), key=lambda i: (pred[i], i))
    return min(true[i] for i in ranked[:k]) / min(true) - 1


def random_case(rng: np.random.Generator, n: int, ties: bool) -> tuple[np.ndarray, np.ndarray]:
    """Runtimes correlated with scores; with ``ties``, both drawn from a few values."""
    if ties:
        true = rng.integers(1, 6, n).astype(float)
        pred = np.round(true + rng.normal(0, 1.5, n))
    else:
        true = rng.uniform(1, 10, n)
        pred = true + rng.normal(0, 2, n)
    return pred, true


# ---- agreement with the twins -------------------------------------------------------------------


@pytest.mark.parametrize("ties", [False, True])
def test_metrics_match_brute_force(ties):
    rng = np.random.default_rng(7)
    for n in [2, 3, 5, 8, 13, 30, 60]:
        for _ in range(4):
            pred, true = random_case(rng, n, ties)
            assert kendall_tau(pred, true) == pytest.approx(ref_kendall_tau(pred, true), abs=1e-12)
            assert ordered_pair_accuracy(pred, true) == pytest.approx(
                ref_opa(pred, true), abs=1e-12
            )
            for k in [1, 2, 5, n, n + 3]:
                assert top_k_error(pred, true, k) == pytest.approx(ref_top_k_error(pred, true, k))


def test_opa_is_exact_on_a_large_tied_input():
    # 3000 items, heavy ties: the O(n log n) count equals a vectorised all-pairs count exactly.
    rng = np.random.default_rng(3)
    true = rng.integers(0, 200, 3000).astype(float)
    pred = rng.integers(0, 50, 3000) + 0.1 * true
    dp = np.sign(pred[:, None] - pred[None, :])
    dt = np.sign(true[:, None] - true[None, :])
    differ = dt != 0
    expected = (np.sum((dp * dt > 0) & differ) + 0.5 * np.sum((dp == 0) & differ)) / differ.sum()
    assert ordered_pair_accuracy(pred, true) == expected


# ---- known answers -------------------------------------------------------------------------------


def test_perfect_prediction():
    true = np.array([3.0, 1.0, 4.0, 1.5, 9.0, 2.6])
    for pred in (true, 2 * np.log(true) - 5):  # any increasing transform ranks perfectly
        assert kendall_tau(pred, true) == pytest.approx(1.0)
        assert ordered_pair_accuracy(pred, true) == 1.0
        for k in (1, 3, 10):
            assert top_k_error(pred, true, k) == 0.0


def test_reversed_prediction():
    true = np.array([3.0, 1.0, 4.0, 1.5, 9.0, 2.6])
    assert kendall_tau(-true, true) == pytest.approx(-1.0)
    assert ordered_pair_accuracy(-true, true) == 0.0
    assert top_k_error(-true, true, 1) == pytest.approx(9.0 / 1.0 - 1)


def test_top_k_error_hand_worked():
    true = np.array([5.0, 3.0, 8.0, 1.0, 4.0])
    pred = np.array([0.1, 0.4, 0.2, 0.9, 0.3])
    # picks in order: items 0 (5 s), 2 (8 s), 4 (4 s), 1 (3 s), 3 (1 s); best runtime 1 s
    expected = {1: 4.0, 2: 4.0, 3: 3.0, 4: 2.0, 5: 0.0, 10: 0.0}
    for k, err in expected.items():
        assert top_k_error(pred, true, k) == pytest.approx(err)


def test_top_k_ties_broken_by_index():
    assert top_k_error([0.0, 0.0, 1.0], [2.0, 1.0, 3.0], 1) == pytest.approx(1.0)  # item 0
    assert top_k_error([0.0, 0.0, 1.0], [1.0, 2.0, 3.0], 1) == 0.0


def test_opa_counts_prediction_ties_as_half():
    # pairs: (0, 1) tied in pred -> 1/2, (0, 2) and (1, 2) right -> (0.5 + 1 + 1) / 3
    assert ordered_pair_accuracy([1.0, 1.0, 2.0], [1.0, 2.0, 3.0]) == pytest.approx(2.5 / 3)
    # pairs tied in true are left out: only (0, 2) and (1, 2) count, one right, one wrong
    assert ordered_pair_accuracy([1.0, 3.0, 2.0], [1.0, 1.0, 2.0]) == 0.5
    assert ordered_pair_accuracy(np.zeros(5), np.arange(5.0)) == 0.5


@pytest.mark.parametrize(
    ("pred", "true"),
    [([], []), ([1.0], [2.0]), ([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]), ([1.0, 2.0], [4.0, 4.0])],
)
def test_undefined_cases_fall_back_without_nan_or_warnings(pred, true):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kendall_tau(pred, true) == 0.0
        assert ordered_pair_accuracy(pred, true) == 0.5


# ---- reports -------------------------------------------------------------------------------------


def test_ranking_report_collects_the_metrics():
    rng = np.random.default_rng(1)
    pred, true = random_case(rng, 40, ties=True)
    report = ranking_report(pred, true, ks=(1, 3))
    assert report == {
        "kendall_tau": kendall_tau(pred, true),
        "opa": ordered_pair_accuracy(pred, true),
        "top1_error": top_k_error(pred, true, 1),
        "top3_error": top_k_error(pred, true, 3),
    }
    assert set(ranking_report(pred, true)) == {
        "kendall_tau",
        "opa",
        "top1_error",
        "top5_error",
        "top10_error",
    }


def test_grouped_report_is_the_unweighted_mean_over_groups():
    rng = np.random.default_rng(2)
    sizes = {"a": 5, "b": 30, "c": 1, "d": 12}
    groups = np.repeat(list(sizes), list(sizes.values()))
    rng.shuffle(groups)  # groups need not be contiguous
    pred, true = random_case(rng, groups.size, ties=True)
    per_group = [ranking_report(pred[groups == g], true[groups == g]) for g in sizes]
    report = grouped_report(pred, true, groups)
    assert report["num_groups"] == 4.0
    for key in per_group[0]:
        assert report[key] == pytest.approx(np.mean([r[key] for r in per_group]))


def test_grouped_report_ranks_only_within_groups():
    # Each graph is ranked perfectly, but graph 1 is ten times slower and predicted faster:
    # pooled, the ranking is poor; grouped, it is perfect.
    true = np.array([1.0, 2.0, 3.0, 10.0, 20.0, 30.0])
    pred = np.array([5.0, 6.0, 7.0, 0.0, 1.0, 2.0])
    groups = np.array([0, 0, 0, 1, 1, 1])
    grouped = grouped_report(pred, true, groups, ks=(1,))
    assert grouped == {"kendall_tau": 1.0, "opa": 1.0, "top1_error": 0.0, "num_groups": 2.0}
    assert kendall_tau(pred, true) < 0.5


# ---- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [kendall_tau, ordered_pair_accuracy, ranking_report])
def test_bad_input_is_rejected(fn):
    with pytest.raises(ValueError, match="same length"):
        fn([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"pred must be 1-D.*\(2, 2\)"):
        fn(np.ones((2, 2)), np.ones(4))
    with pytest.raises(ValueError, match="true must be 1-D"):
        fn(np.ones(4), np.ones((4, 1)))
    with pytest.raises(ValueError, match="true contains 1 non-finite"):
        fn([1.0, 2.0], [1.0, np.nan])
    with pytest.raises(ValueError, match="true contains 1 non-finite"):
        fn([1.0, 2.0], [np.inf, 1.0])
    with pytest.raises(ValueError, match="pred contains 1 NaN"):
        fn([np.nan, 2.0], [1.0, 2.0])


def test_bad_k_and_runtimes_are_rejected():
    with pytest.raises(ValueError, match="k must be an integer >= 1, got 0"):
        top_k_error([1.0, 2.0], [1.0, 2.0], 0)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        ranking_report([1.0, 2.0], [1.0, 2.0], ks=(1, -2))
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        top_k_error([1.0, 2.0], [1.0, 2.0], 1.5)
    with pytest.raises(ValueError, match="at least one item"):
        top_k_error([], [], 1)
    with pytest.raises(ValueError, match="positive runtimes"):
        top_k_error([1.0, 2.0], [0.0, 2.0], 1)


def test_grouped_report_rejects_bad_groups():
    with pytest.raises(ValueError, match="one label per item"):
        grouped_report([1.0, 2.0], [1.0, 2.0], [0, 0, 1])
    with pytest.raises(ValueError, match="at least one item"):
        grouped_report([], [], [])
