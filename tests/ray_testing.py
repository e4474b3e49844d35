"""Ray for the tests that need it: skipped, with the install command, where the ``graphopt[ray]``
extra is not installed (``make test-ray`` installs it and runs them; CI does)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

REASON = "needs the Ray extra: pip install -c constraints.txt -e '.[ray]' (make test-ray installs it and runs these)"


def need_ray() -> Any:
    """The ``ray`` module, or skip the calling test module."""
    return pytest.importorskip("ray", reason=REASON)


def local_ray() -> Iterator[Any]:
    """Ray on this machine with 2 CPUs and no dashboard, for a module's tests (a fixture body)."""
    from graphopt.distributed import keep_sigterm

    ray = need_ray()
    with keep_sigterm():  # later tests in this process expect SIGTERM's default action
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", address="local")
    try:
        yield ray
    finally:
        ray.shutdown()
