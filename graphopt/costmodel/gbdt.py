"""Gradient-boosted trees over flat configuration features: the baseline a learned GNN must beat.

:class:`GBDTRanker` fits LightGBM (Ke et al., "LightGBM: A Highly Efficient Gradient Boosting
Decision Tree", NeurIPS 2017) to one row per configuration, here the flattened layout features
of :func:`layout_features`; it sees no graph structure.

Objectives (``objective=``):

===============  =================================================================================
``regression``   (default) squared error on ``log(runtime)``; :meth:`GBDTRanker.predict` returns
                 the predicted log runtime.
``lambdarank``   LambdaRank (Burges, "From RankNet to LambdaRank to LambdaMART", 2010) on random
                 groups of :data:`RANK_GROUP_SIZE` configurations, relevance = the runtime's
                 quantile in its group on :data:`RANK_LEVELS` levels (fastest highest), linear
                 gain; :meth:`GBDTRanker.predict` returns the negated score.
===============  =================================================================================

On the XLA alexnet layout sample (:mod:`graphopt.costmodel.tpugraphs`; 38,170 training and 9,542
test configurations from ``split_configs(47712, 0.2, seed=0)``, defaults otherwise, one core),
regression reaches Kendall's tau 0.785 on the test set and top-5 error 0.00005 in 2.8 s of
fitting; lambdarank reaches tau 0.593 and top-5 error 0.00015 in 9.4 s. (Top-5 error: the best
true runtime among the 5 best-predicted configurations over the best of the test set, minus 1.) A random split leaves
about half of the test configurations with an identical twin in the training set
(:func:`~graphopt.costmodel.tpugraphs.duplicate_configs`), so these numbers flatter both.

LightGBM is driven through its native ``lightgbm.train`` API, which needs no scikit-learn.
"""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import numpy.typing as npt
from scipy.stats import rankdata

OBJECTIVES = ("regression", "lambdarank")
RANK_GROUP_SIZE = 256
"""Configurations per LambdaRank query group."""
RANK_LEVELS = 31
"""Relevance levels per group for LambdaRank (LightGBM's default label range is 0..30)."""


def layout_features(config_feat: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Flatten per-node configuration features into one row per configuration.

    Column ``c * Fc + f`` is feature ``f`` of configurable node ``c``; padding (-1) is kept.

    Shapes:
        - config_feat: ``(K, C, Fc)``
        - return: ``(K, C * Fc)`` float32 (a view when ``config_feat`` is contiguous float32)
    """
    feat = np.asarray(config_feat, dtype=np.float32)
    if feat.ndim != 3:
        raise ValueError(
            f"config_feat must have shape (K, C, Fc) (configurations, configurable nodes, "
            f"features), got {feat.shape}; pass LayoutGraph.config_feat"
        )
    return feat.reshape(feat.shape[0], -1)


class GBDTRanker:
    """LightGBM ranker of configurations by runtime; lower predictions mean faster.

    Args:
        n_estimators: boosting rounds (trees). Default 500.
        learning_rate: shrinkage per tree. Default 0.05.
        num_leaves: maximum leaves per tree. Default 63.
        n_jobs: LightGBM threads. Default 1 (set it deliberately: threads oversubscribe small
            machines).
        seed: seed of LightGBM and of the LambdaRank groups. Default 0.
        objective: ``"regression"`` (default) or ``"lambdarank"`` (module docstring).

    Shapes:
        - X: ``(K, D)`` one row per configuration, finite
        - runtime: ``(K,)`` finite, positive
        - predict: ``(K',)`` float64
    """

    def __init__(
        self,
        n_estimators: int = 500,
        learning_rate: float = 0.05,
        num_leaves: int = 63,
        n_jobs: int = 1,
        seed: int = 0,
        objective: str = "regression",
    ) -> None:
        if objective not in OBJECTIVES:
            raise ValueError(
                f"unknown objective {objective!r}; choose one of: {', '.join(OBJECTIVES)}"
            )
        for key, value, low in (
            ("n_estimators", n_estimators, 1),
            ("num_leaves", num_leaves, 2),
            ("n_jobs", n_jobs, 1),
        ):
            if int(value) != value or value < low:
                raise ValueError(f"{key} must be an integer >= {low}, got {value!r}")
        if not learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {learning_rate!r}")
        self.n_estimators = int(n_estimators)
        self.learning_rate = float(learning_rate)
        self.num_leaves = int(num_leaves)
        self.n_jobs = int(n_jobs)
        self.seed = int(seed)
        self.objective = objective
        self._booster: lgb.Booster | None = None
        self._num_features = 0

    def fit(self, X: npt.ArrayLike, runtime: npt.ArrayLike) -> GBDTRanker:
        """Fit on ``K`` configurations (at least 2) and their measured runtimes; returns ``self``."""
        x = self._check_features(X, fitting=True)
        y = np.asarray(runtime, dtype=np.float64)
        if y.ndim != 1 or y.shape[0] != x.shape[0]:
            raise ValueError(
                f"runtime must have shape (K,) = ({x.shape[0]},) to match X's {x.shape[0]} rows, "
                f"got {y.shape}; pass one runtime per row of X"
            )
        if x.shape[0] < 2:
            raise ValueError(f"fit needs at least 2 configurations, got {x.shape[0]}")
        if not (np.isfinite(y) & (y > 0)).all():
            raise ValueError(
                "runtime must be finite and positive (the model fits log runtime); drop the "
                "configurations whose measurement failed"
            )
        params = {
            "objective": self.objective,
            "learning_rate": self.learning_rate,
            "num_leaves": self.num_leaves,
            "num_threads": self.n_jobs,
            "seed": self.seed,
            "deterministic": True,
            "verbose": -1,
        }
        if self.objective == "regression":
            data = lgb.Dataset(x, np.log(y), params={"verbose": -1})
        else:
            order, groups, relevance = _rank_groups(y, RANK_GROUP_SIZE, RANK_LEVELS, self.seed)
            params["label_gain"] = list(range(RANK_LEVELS))
            data = lgb.Dataset(x[order], relevance, group=groups, params={"verbose": -1})
        self._booster = lgb.train(params, data, num_boost_round=self.n_estimators)
        self._num_features = x.shape[1]
        return self

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Predicted log runtime per row (``lambdarank``: negated score); lower means faster."""
        if self._booster is None:
            raise ValueError("GBDTRanker is not fitted; call fit(X, runtime) before predict(X)")
        x = self._check_features(X, fitting=False)
        score = np.asarray(self._booster.predict(x), dtype=np.float64)
        return score if self.objective == "regression" else -score

    def _check_features(self, X: npt.ArrayLike, *, fitting: bool) -> npt.NDArray[np.float32]:
        x = np.asarray(X, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] == 0:
            raise ValueError(
                f"X must have shape (K, D) with D >= 1, one row per configuration, got {x.shape}; "
                "build it with layout_features(config_feat)"
            )
        if not fitting and x.shape[1] != self._num_features:
            raise ValueError(
                f"X has {x.shape[1]} feature columns but the model was fit on "
                f"{self._num_features}; build X the same way as at fit time"
            )
        if not np.isfinite(x).all():
            raise ValueError("X holds NaN or inf; replace them with finite values (-1 pads)")
        return x


def _rank_groups(
    runtime: npt.NDArray[np.float64], size: int, levels: int, seed: int
) -> tuple[npt.NDArray[np.int64], list[int], npt.NDArray[np.int64]]:
    """LambdaRank query groups: a row order, the group sizes, and each row's relevance.

    Rows are shuffled with ``seed`` and cut into ``ceil(K / size)`` groups of near-equal size
    (``np.array_split``). In a group of ``n`` rows, the row of runtime rank ``r`` (0 = fastest, ties averaged) gets relevance
    ``levels - 1 - floor(r * levels / n)``.
    """
    order = np.random.default_rng(seed).permutation(runtime.shape[0])
    groups = [len(chunk) for chunk in np.array_split(order, -(-order.shape[0] // size))]
    relevance = np.empty(order.shape[0], dtype=np.int64)
    start = 0
    for n in groups:
        rank = rankdata(runtime[order[start : start + n]], method="average") - 1
        relevance[start : start + n] = levels - 1 - np.floor(rank * levels / n).astype(np.int64)
        start += n
    return order, groups, relevance
