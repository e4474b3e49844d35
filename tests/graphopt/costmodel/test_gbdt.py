"""GBDT baseline: learns a known synthetic order, ranks the real alexnet layouts, refuses bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

from graphopt.costmodel.gbdt import GBDTRanker, layout_features
from graphopt.costmodel.tpugraphs import load_tpugraphs, split_configs
from graphopt.data import TPUGRAPHS_SAMPLE as ALEXNET

# Small and quick: 50 trees of 15 leaves, one thread.
SMALL = {"n_estimators": 50, "learning_rate": 0.2, "num_leaves": 15, "n_jobs": 1}


def _synthetic(rows: int = 2000, cols: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """runtime = exp(a . x + noise): the true order is known up to small noise."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, cols))
    a = rng.normal(size=cols)
    return x, np.exp(x @ a + 0.05 * rng.normal(size=rows))


@pytest.mark.parametrize(("objective", "min_tau"), [("regression", 0.8), ("lambdarank", 0.7)])
def test_learns_a_synthetic_order(objective: str, min_tau: float) -> None:
    x, runtime = _synthetic()
    model = GBDTRanker(**SMALL, objective=objective).fit(x[:1600], runtime[:1600])
    pred = model.predict(x[1600:])
    assert pred.shape == (400,) and pred.dtype == np.float64
    # Lower prediction = faster: tau against the true runtimes is positive.
    assert kendalltau(pred, runtime[1600:]).statistic > min_tau


def test_regression_predicts_log_runtime() -> None:
    x, runtime = _synthetic()
    model = GBDTRanker(**SMALL).fit(x, runtime)
    assert np.abs(model.predict(x) - np.log(runtime)).mean() < 0.5


def test_same_seed_same_model() -> None:
    x, runtime = _synthetic(400)
    first = GBDTRanker(**SMALL, seed=1, objective="lambdarank").fit(x, runtime).predict(x)
    second = GBDTRanker(**SMALL, seed=1, objective="lambdarank").fit(x, runtime).predict(x)
    np.testing.assert_array_equal(first, second)


def test_ranks_alexnet_layouts() -> None:
    layout = load_tpugraphs(ALEXNET)
    x = layout_features(layout.config_feat)
    train, test = split_configs(layout.num_configs, 0.2, seed=0)
    pred = GBDTRanker(**SMALL).fit(x[train], layout.runtime[train]).predict(x[test])
    assert kendalltau(pred, layout.runtime[test]).statistic > 0.7
    best = layout.runtime[test][np.argsort(pred)[:5]].min()
    assert best / layout.runtime[test].min() - 1 < 0.01


def test_layout_features_flattens_node_major() -> None:
    feat = np.arange(4 * 3 * 2, dtype=np.float32).reshape(4, 3, 2)
    flat = layout_features(feat)
    assert flat.shape == (4, 6) and flat.dtype == np.float32
    assert flat[2, 1 * 2 + 1] == feat[2, 1, 1]


def test_layout_features_needs_three_axes() -> None:
    with pytest.raises(ValueError, match=r"config_feat must have shape \(K, C, Fc\).*got \(4, 6\)"):
        layout_features(np.zeros((4, 6)))


def test_predict_before_fit() -> None:
    with pytest.raises(ValueError, match=r"not fitted; call fit\(X, runtime\) before predict"):
        GBDTRanker().predict(np.zeros((3, 2)))


def test_predict_with_other_columns() -> None:
    x, runtime = _synthetic(200)
    model = GBDTRanker(**SMALL).fit(x, runtime)
    with pytest.raises(ValueError, match=r"X has 7 feature columns but the model was fit on 8"):
        model.predict(x[:, :7])


@pytest.mark.parametrize(
    ("x", "runtime", "match"),
    [
        (np.zeros((5, 2)), np.ones(4), r"runtime must have shape \(K,\) = \(5,\).*got \(4,\)"),
        (
            np.zeros((5, 2)),
            np.ones((5, 1)),
            r"runtime must have shape \(K,\) = \(5,\).*got \(5, 1\)",
        ),
        (np.zeros(5), np.ones(5), r"X must have shape \(K, D\) .*got \(5,\); build it with"),
        (np.zeros((5, 0)), np.ones(5), r"X must have shape \(K, D\) with D >= 1"),
        (np.zeros((1, 2)), np.ones(1), r"fit needs at least 2 configurations, got 1"),
        (np.zeros((3, 2)), [1.0, 0.0, 2.0], r"runtime must be finite and positive"),
        (np.zeros((3, 2)), [1.0, np.nan, 2.0], r"runtime must be finite and positive"),
        ([[0.0, np.nan], [1.0, 2.0]], [1.0, 2.0], r"X holds NaN or inf"),
    ],
)
def test_fit_rejects_bad_input(x, runtime, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GBDTRanker(**SMALL).fit(x, runtime)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"objective": "xendcg"},
            r"unknown objective 'xendcg'; choose one of: regression, lambdarank",
        ),
        ({"n_estimators": 0}, r"n_estimators must be an integer >= 1, got 0"),
        ({"num_leaves": 1}, r"num_leaves must be an integer >= 2, got 1"),
        ({"n_jobs": 0}, r"n_jobs must be an integer >= 1, got 0"),
        ({"learning_rate": 0.0}, r"learning_rate must be positive, got 0\.0"),
    ],
)
def test_rejects_bad_settings(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GBDTRanker(**kwargs)
