"""Argument checks shared by the workload families."""

from __future__ import annotations


def check_positive(**sizes: int) -> None:
    """Raise ``ValueError`` naming the first size that is not a positive integer."""
    for key, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive integer, got {value!r}")
