"""The scheduling decoder: the network shifts the best heuristic's priorities; the simulator's list
scheduler (:mod:`graphopt.sim`, rule 6: among ready ops on a device the lowest priority runs
first, ties by topological index) decodes them, exactly as it decodes any priorities.

``base`` (any integer priorities, e.g. critical-path ranks or all zeros) is first turned into its
rank ``r`` (ties by index, so ``r`` orders ops exactly as the simulator would); op ``i`` gets the
key ``r[i] - shift[i] * SHIFT_UNIT * N`` and the decoded priorities are the ranks of the keys
(ties by index). A positive shift runs an op earlier. With zero shifts the result orders every
device's ready ops exactly as ``base`` does (equal to ``base`` when it is a permutation).
"""

from __future__ import annotations

import numpy as np

from graphopt.baselines._costs import positions
from graphopt.typing import FloatArray, IntArray

SHIFT_UNIT = 0.05
"""A shift of 1 moves an op by 5% of the graph's ops in the priority order."""


def priority_rank(priority: IntArray) -> IntArray:
    """Rank of each op by ``(priority, index)``: a permutation of ``0..N-1`` with the same order."""
    n = len(priority)
    return positions(np.lexsort((np.arange(n), np.asarray(priority))).astype(np.int64))


def decode_priorities(base: IntArray, shift: FloatArray | None = None) -> IntArray:
    """Priorities ``(N,)`` from the heuristic's ``base`` shifted by ``shift`` (module docstring).

    Raises:
        ValueError: shapes that differ or a non-finite shift (naming its index).
    """
    rank = priority_rank(np.asarray(base, dtype=np.int64))
    if shift is None:
        return rank
    shift = np.asarray(shift, dtype=np.float64)
    if shift.shape != rank.shape:
        raise ValueError(f"shift has shape {shift.shape}; expected {rank.shape}")
    bad = np.flatnonzero(~np.isfinite(shift))
    if len(bad):
        raise ValueError(f"shift of op {int(bad[0])} is {shift[bad[0]]}; it must be finite")
    key = rank - shift * (SHIFT_UNIT * len(rank))
    return positions(np.lexsort((np.arange(len(rank)), key)).astype(np.int64))
