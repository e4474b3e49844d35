from __future__ import annotations

import numpy as np
import pytest

from graphopt.decoders.scheduling import decode_priorities, priority_rank


def test_zero_shift_keeps_the_order():
    base = np.array([3, 0, 2, 1])
    np.testing.assert_array_equal(decode_priorities(base, np.zeros(4)), base)
    ties = np.zeros(5, dtype=np.int64)  # topological: ties by index
    np.testing.assert_array_equal(decode_priorities(ties, np.zeros(5)), np.arange(5))
    np.testing.assert_array_equal(priority_rank(np.array([5, 5, 1])), [1, 2, 0])


def test_positive_shift_runs_an_op_earlier():
    base = np.arange(20)
    shift = np.zeros(20)
    shift[19] = 8.0  # key 19 - 8 * 5% * 20 = 11: right after op 11 (ties by index)
    out = decode_priorities(base, shift)
    assert out[19] == 12
    assert sorted(out.tolist()) == list(range(20))


def test_bad_shift_is_refused():
    with pytest.raises(ValueError, match="shape"):
        decode_priorities(np.arange(3), np.zeros(4))
    with pytest.raises(ValueError, match="op 1 is nan"):
        decode_priorities(np.arange(3), np.array([0.0, np.nan, 0.0]))
