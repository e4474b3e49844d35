"""Ranking metrics for a learned cost model: how well predicted scores order true runtimes.

A cost model is judged by whether it ranks the configurations of one graph correctly, not by its
absolute error (TpuGraphs; Kaufman et al., "A Learned Performance Model for TPUs", MLSys 2021).
Every function takes ``pred`` (a score per configuration) and ``true`` (its measured runtime);
for both, lower means faster. Ranking only makes sense among configurations of the same graph:
:func:`grouped_report` computes the metrics per group and averages them.

Metrics, for ``n`` items and the ``n0 = n (n - 1) / 2`` unordered pairs ``{i, j}``:

- ``C``, ``D``: concordant and discordant pairs, those tied in neither array whose order agrees
  (``(pred_i - pred_j)(true_i - true_j) > 0``) or disagrees (``< 0``);
- ``T_pred``, ``T_true``, ``T_both``: pairs tied in ``pred``, in ``true``, in both.

Kendall's tau-b is ``(C - D) / sqrt((n0 - T_pred)(n0 - T_true))``; the ordered-pair accuracy is
``(C + (T_pred - T_both) / 2) / (n0 - T_true)``; the top-k error is the runtime lost by trusting
the model's top ``k`` picks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import stats

from graphopt.typing import FloatArray

__all__ = [
    "grouped_report",
    "kendall_tau",
    "ordered_pair_accuracy",
    "ranking_report",
    "top_k_error",
]


def _check_inputs(pred: npt.ArrayLike, true: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Validate a prediction/runtime pair and return both as float64 arrays."""
    p = np.asarray(pred, dtype=np.float64)
    t = np.asarray(true, dtype=np.float64)
    for name, a in (("pred", p), ("true", t)):
        if a.ndim != 1:
            raise ValueError(
                f"{name} must be 1-D (one value per configuration), got shape {a.shape}; "
                "flatten it, or use grouped_report for several graphs"
            )
    if p.shape != t.shape:
        raise ValueError(
            f"pred and true must have the same length, got {p.shape[0]} and {t.shape[0]}"
        )
    bad = int(np.count_nonzero(~np.isfinite(t)))
    if bad:
        raise ValueError(
            f"true contains {bad} non-finite value(s) (NaN or inf); runtimes must be finite: "
            "drop invalid measurements before ranking"
        )
    bad = int(np.count_nonzero(np.isnan(p)))
    if bad:
        raise ValueError(f"pred contains {bad} NaN value(s); NaN scores have no order")
    return p, t


def _tied_pairs(*keys: FloatArray) -> int:
    """Number of unordered pairs equal in every one of ``keys`` (each 1-D, same length)."""
    n = keys[0].shape[0]
    if n < 2:
        return 0
    order = np.lexsort(keys[::-1])
    change = np.zeros(n - 1, dtype=bool)
    for k in keys:
        s = k[order]
        change |= s[1:] != s[:-1]
    # run lengths of equal rows in sorted order
    starts = np.flatnonzero(np.concatenate(([True], change)))
    runs = np.diff(np.append(starts, n)).astype(np.int64)
    return int(np.sum(runs * (runs - 1) // 2))


def _tau_and_opa(p: FloatArray, t: FloatArray) -> tuple[float, float]:
    """Kendall's tau-b and the ordered-pair accuracy of validated inputs, in O(n log n).

    ``C - D`` is recovered from scipy's tau-b, ``C - D = tau_b * sqrt(n0 - T_pred) *
    sqrt(n0 - T_true)``, and ``C + D = n0 - T_pred - T_true + T_both`` from the tie counts. Both
    are integers of the same parity, so the float estimate of ``C - D`` is snapped to the nearest
    integer of that parity: exact while its float error is below 1, i.e. for ``n0`` up to about
    ``1e14`` (``n`` about ``1e7``); float64 tau-b carries a relative error of a few ulp.
    """
    n = p.shape[0]
    n0 = n * (n - 1) // 2
    t_pred = _tied_pairs(p)
    t_true = _tied_pairs(t)
    if n0 == 0 or t_true == n0:
        return 0.0, 0.5  # no pair differs in runtime: nothing to rank
    if t_pred == n0:
        return 0.0, 0.5  # a constant prediction ties every pair
    t_both = _tied_pairs(p, t)
    tau = float(stats.kendalltau(p, t, variant="b").statistic)
    c_plus_d = n0 - t_pred - t_true + t_both
    c_minus_d_est = tau * float(np.sqrt(n0 - t_pred)) * float(np.sqrt(n0 - t_true))
    c_minus_d = 2 * int(round((c_minus_d_est + c_plus_d) / 2)) - c_plus_d
    assert abs(c_minus_d - c_minus_d_est) < 1.0, "tau-b too imprecise to recover C - D"
    concordant = (c_plus_d + c_minus_d) // 2
    opa = (concordant + 0.5 * (t_pred - t_both)) / (n0 - t_true)
    return tau, float(opa)


def kendall_tau(pred: npt.ArrayLike, true: npt.ArrayLike) -> float:
    r"""Kendall's tau-b between predicted scores and true runtimes.

    .. math::
        \tau_b = \frac{C - D}{\sqrt{(n_0 - T_{pred})(n_0 - T_{true})}}

    with ``C``/``D`` the concordant/discordant pairs and ``T`` the tied pairs (module docstring);
    computed by :func:`scipy.stats.kendalltau`. 1 is a perfect ranking, -1 a reversed one.

    Args:
        pred: predicted scores, lower = faster.
        true: measured runtimes, lower = faster; finite.

    Returns:
        tau-b in ``[-1, 1]``; ``0.0`` when it is undefined (fewer than 2 items, or either array
        constant), never NaN.

    Raises:
        ValueError: inputs not 1-D or of different lengths, ``true`` not finite, ``pred`` NaN.

    Shapes:
        ``pred``, ``true``: ``(n,)``.
    """
    return _tau_and_opa(*_check_inputs(pred, true))[0]


def ordered_pair_accuracy(pred: npt.ArrayLike, true: npt.ArrayLike) -> float:
    r"""Fraction of pairs with different runtimes that ``pred`` orders correctly (ties count 1/2).

    .. math::
        \mathrm{OPA} = \frac{C + (T_{pred} - T_{both}) / 2}{n_0 - T_{true}}

    Over the pairs with ``true_i != true_j``: concordant pairs count 1, pairs tied in ``pred``
    count 1/2 (``T_pred - T_both`` of them), discordant pairs 0. O(n log n): ``C`` is recovered
    from tau-b and exact tie counts (see ``_tau_and_opa``), no pair is enumerated.

    Args:
        pred: predicted scores, lower = faster.
        true: measured runtimes, lower = faster; finite.

    Returns:
        OPA in ``[0, 1]``; ``0.5`` (chance) when no pair has different runtimes.

    Raises:
        ValueError: as :func:`kendall_tau`.

    Shapes:
        ``pred``, ``true``: ``(n,)``.
    """
    return _tau_and_opa(*_check_inputs(pred, true))[1]


def _check_k(k: int) -> int:
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    return int(k)


def _top_k_error(p: FloatArray, t: FloatArray, k: int) -> float:
    if p.shape[0] == 0:
        raise ValueError("top-k error needs at least one item, got empty arrays")
    best = float(t.min())
    if best <= 0:
        raise ValueError(f"top-k error needs positive runtimes, got min(true) = {best}")
    picks = np.argsort(p, kind="stable")[:k]
    return float(t[picks].min() / best - 1.0)


def top_k_error(pred: npt.ArrayLike, true: npt.ArrayLike, k: int) -> float:
    r"""Relative slowdown of the best of the model's top ``k`` picks over the true best.

    .. math::
        \mathrm{err}_k = \frac{\min_{i \in \mathrm{top}_k(pred)} true_i}{\min_i true_i} - 1

    where ``top_k(pred)`` are the ``k`` items with the lowest ``pred``, ties broken by index
    (stable sort); ``k > n`` uses all items (error 0). 0 means the true best is among the picks.

    Args:
        pred: predicted scores, lower = faster.
        true: measured runtimes, positive and finite.
        k: number of picks, ``>= 1``.

    Returns:
        The error, ``>= 0``.

    Raises:
        ValueError: as :func:`kendall_tau`; also ``k < 1``, empty input, ``min(true) <= 0``.

    Shapes:
        ``pred``, ``true``: ``(n,)`` with ``n >= 1``.
    """
    k = _check_k(k)
    return _top_k_error(*_check_inputs(pred, true), k)


def ranking_report(
    pred: npt.ArrayLike, true: npt.ArrayLike, ks: Sequence[int] = (1, 5, 10)
) -> dict[str, float]:
    """All ranking metrics of one ranking (one graph's configurations).

    Args:
        pred: predicted scores, lower = faster.
        true: measured runtimes, positive and finite.
        ks: the ``k`` of each top-k error.

    Returns:
        ``{"kendall_tau", "opa", "top{k}_error" for k in ks}``.

    Raises:
        ValueError: as :func:`top_k_error`.

    Shapes:
        ``pred``, ``true``: ``(n,)`` with ``n >= 1``.
    """
    ks = [_check_k(k) for k in ks]
    return _report(*_check_inputs(pred, true), ks)


def _report(p: FloatArray, t: FloatArray, ks: Sequence[int]) -> dict[str, float]:
    tau, opa = _tau_and_opa(p, t)
    report = {"kendall_tau": tau, "opa": opa}
    for k in ks:
        report[f"top{k}_error"] = _top_k_error(p, t, k)
    return report


def grouped_report(
    pred: npt.ArrayLike,
    true: npt.ArrayLike,
    groups: npt.ArrayLike,
    ks: Sequence[int] = (1, 5, 10),
) -> dict[str, float]:
    """:func:`ranking_report` per group (e.g. per graph), averaged over groups.

    Each metric is the unweighted mean over groups, so a graph with many configurations counts as
    much as one with few. A group where a metric is undefined enters the mean with that metric's
    documented fallback (tau 0, OPA 0.5; a one-item group has top-k error 0).

    Args:
        pred: predicted scores, lower = faster.
        true: measured runtimes, positive and finite.
        groups: group label of each item (any sortable values; need not be contiguous).
        ks: the ``k`` of each top-k error.

    Returns:
        The keys of :func:`ranking_report`, plus ``num_groups``.

    Raises:
        ValueError: as :func:`top_k_error`; also ``groups`` not of shape ``(n,)``, empty input.

    Shapes:
        ``pred``, ``true``, ``groups``: ``(n,)`` with ``n >= 1``.
    """
    ks = [_check_k(k) for k in ks]
    p, t = _check_inputs(pred, true)
    g = np.asarray(groups)
    if g.shape != p.shape:
        raise ValueError(
            f"groups must have one label per item, shape {p.shape}, got shape {g.shape}"
        )
    if p.shape[0] == 0:
        raise ValueError("grouped_report needs at least one item, got empty arrays")
    _, inverse = np.unique(g, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    reports = [_report(p[idx], t[idx], ks) for idx in np.split(order, bounds)]
    mean = {key: float(np.mean([r[key] for r in reports])) for key in reports[0]}
    mean["num_groups"] = float(len(reports))
    return mean
