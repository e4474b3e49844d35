"""Suite-wide settings: thread count, and the `expensive` marker."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Two cores, often two pytest workers: one thread each avoids oversubscription.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass


def _run_expensive() -> bool:
    return os.environ.get("RUN_EXPENSIVE") == "1" or os.environ.get("CI", "").lower() == "true"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _run_expensive():
        return
    skip = pytest.mark.skip(reason="expensive: set RUN_EXPENSIVE=1 (CI runs these)")
    for item in items:
        if "expensive" in item.keywords:
            item.add_marker(skip)
