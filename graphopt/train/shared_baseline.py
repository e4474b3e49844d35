"""The shared per-graph baseline of sampled decisions: returns and their standardisation.

Several decisions of the same graph are sampled and priced; each one's return is ``log(t_ref /
t)`` (``t_ref``: the graph's reference step time, e.g. the best heuristic's) and its advantage is
that return standardised among the samples of the *same* graph (Decima's shared baseline, POMO,
Jeon et al., ICLR 2023). No critic is needed, and no value of one graph's scale leaks into
another's. Both trainers that sample decisions use it: the step-wise policy's
(:mod:`graphopt.train.stepwise`) and the one-pass decoder policy's (:mod:`graphopt.train.one_pass`).
"""

from __future__ import annotations

import math

import numpy as np

from envs.rewards import INVALID

INVALID_LOG_REWARD = -math.log(INVALID)
"""The return of an invalid decision: as if its step took ``INVALID`` (16) times the reference's."""


def log_returns(step_times: np.ndarray, valid: np.ndarray, reference_time: float) -> np.ndarray:
    """``log(reference_time / t)`` of each sample; an invalid one scores ``INVALID_LOG_REWARD``.

    Shapes:
        - step_times, valid: ``(K,)``; output ``(K,)`` float64.
    """
    valid = np.asarray(valid, dtype=bool)
    t = np.where(valid, np.asarray(step_times, dtype=np.float64), np.inf)
    with np.errstate(divide="ignore"):
        r = np.log(reference_time / t)
    return np.where(valid & np.isfinite(r), r, INVALID_LOG_REWARD)


def advantages(r: np.ndarray, floor: float) -> np.ndarray:
    """Returns standardised within their graph's group: ``(r - mean) / max(std, floor)``."""
    return (r - r.mean()) / max(float(r.std()), floor)


def geomean(values: np.ndarray) -> float:
    """Geometric mean (0 if any value is 0 or there is none)."""
    v = np.asarray(values, dtype=np.float64)
    return float(np.exp(np.log(v).mean())) if len(v) and (v > 0).all() else 0.0
