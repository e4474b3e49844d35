"""Measurement noise: how well can any cost model rank a set of measured configurations?

Real measurements repeat: TpuGraphs files list some configurations several times, each time with
a slightly different runtime. Those copies tell how noisy one measurement is, and so how high
Kendall's tau can go on a test set even for a model that knows every configuration's true mean
runtime.

Model: a measurement of configuration ``c`` is ``mu_c (1 + e)`` with ``e`` independent,
zero-mean, standard deviation ``sigma``. With ``k_c`` copies and their mean ``m_c``, the pooled
estimate is

    sigma^2 = sum_copies (r / m_c - 1)^2 / sum_c (k_c - 1)

(``k_c - 1`` degrees of freedom per configuration; configurations measured once add nothing).

- :func:`relative_noise` returns ``sigma``.
- :func:`noise_ceiling_tau` estimates the tau of a perfect model: tau between ``m_c`` and a fresh
  noisy measurement ``m_c (1 + sigma z)``, ``z`` standard normal, over the given rows. It is an
  estimate (``m_c`` itself is noisy for configurations measured once), not a bound.
- :func:`repeat_tau` is the tau of "measure it again": for every row whose configuration has other
  copies, the mean of the *other* copies against the row's runtime.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from graphopt.costmodel.metrics import kendall_tau
from graphopt.typing import FloatArray, IntArray

__all__ = ["noise_ceiling_tau", "relative_noise", "repeat_groups", "repeat_tau"]


def repeat_groups(config_feat: npt.ArrayLike) -> IntArray:
    """Group id per row: rows with identical configuration features share one id.

    ``config_feat`` has one row per measurement (any trailing shape, flattened per row).
    """
    feat = np.asarray(config_feat)
    if feat.ndim == 0 or len(feat) == 0:
        raise ValueError("config_feat must hold at least one configuration (one row each)")
    _, inverse = np.unique(feat.reshape(len(feat), -1), axis=0, return_inverse=True)
    return np.asarray(inverse, dtype=np.int64).reshape(-1)


def _group_stats(
    runtime: npt.ArrayLike, groups: IntArray
) -> tuple[FloatArray, FloatArray, IntArray]:
    r = np.asarray(runtime, dtype=np.float64)
    if r.shape != groups.shape:
        raise ValueError(
            f"runtime and groups must have one value per row, got {r.shape} and {groups.shape}"
        )
    if not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise ValueError("runtimes must be finite and positive")
    counts = np.bincount(groups).astype(np.int64)
    totals = np.bincount(groups, weights=r).astype(np.float64)
    return r, totals, counts


def relative_noise(runtime: npt.ArrayLike, groups: IntArray) -> float:
    """Pooled relative standard deviation of repeated measurements (``sigma`` above).

    Raises ``ValueError`` when no configuration is measured twice: the noise is then unknown.
    """
    r, totals, counts = _group_stats(runtime, groups)
    dof = float(np.sum(np.maximum(counts - 1, 0)))
    if dof == 0:
        raise ValueError(
            "no configuration is measured more than once, so the measurement noise cannot be "
            "estimated; repeat some measurements"
        )
    mean = totals[groups] / counts[groups]
    return float(np.sqrt(np.sum((r / mean - 1.0) ** 2) / dof))


def noise_ceiling_tau(
    runtime: npt.ArrayLike, groups: IntArray, rows: npt.ArrayLike, sigma: float, seed: int = 0
) -> float:
    """Tau of a model that predicts each configuration's mean, against one noisy measurement.

    ``rows`` selects the test rows; the means use every copy in ``runtime``.
    """
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    _, totals, counts = _group_stats(runtime, groups)
    mean = (totals / np.maximum(counts, 1))[groups[np.asarray(rows)]]
    rng = np.random.default_rng(seed)
    measured = mean * (1.0 + sigma * rng.standard_normal(len(mean)))
    return kendall_tau(mean, measured)


def repeat_tau(
    runtime: npt.ArrayLike, groups: IntArray, rows: npt.ArrayLike
) -> tuple[npt.NDArray[np.bool_], float]:
    """Tau of the mean of a row's other copies against the row's runtime.

    Returns the mask over ``rows`` of those with at least one other copy, and the tau over them.
    """
    r, totals, counts = _group_stats(runtime, groups)
    idx = np.asarray(rows)
    g = groups[idx]
    has_copy = counts[g] > 1
    if np.count_nonzero(has_copy) < 2:
        raise ValueError("fewer than two of these rows have a repeated measurement")
    others = (totals[g] - r[idx]) / np.maximum(counts[g] - 1, 1)
    return has_copy, kendall_tau(others[has_copy], r[idx][has_copy])
