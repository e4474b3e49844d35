"""Suite-wide settings: thread count, and the `expensive` marker."""

from __future__ import annotations

import contextlib
import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Two cores, often two pytest workers: one thread each avoids oversubscription (the
    # variables are inherited by the workers).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    # pytest-xdist's controller runs no test: importing torch there (2-5 s) only delayed the
    # start of the workers, which import it themselves.
    if config.getoption("numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ:
        return
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


# numba's first compilation, shared by the two workers. On a fresh clone nothing is in numba's
# on-disk cache, and both workers' first tests need the simulator and the placement heuristics at
# once: each compiled both (about 80 s of duplicated compilation). Here each worker first compiles
# one of them (gw0 the simulator, gw1 the heuristics' cores and the step-wise decoder) under a lock
# file shared by the workers, then takes the other's lock: it loads what the other compiled from
# the cache, waiting while the other is still compiling. With a warm cache this only loads what
# the tests load anyway. A part that fails is left to the tests that use it to report.
def _warm_simulator() -> None:
    from graphopt import warmup

    warmup._simulator()


def _warm_heuristics() -> None:
    """The placers' numba cores and the step-wise decoders, without the simulator."""
    import numpy as np

    from graphopt import warmup
    from graphopt.baselines.placement import PLACERS
    from graphopt.decoders.event_step import decode_events, event_graph
    from graphopt.decoders.stepwise import HeadParams, decode, step_graph
    from graphopt.hardware import get_cluster
    from graphopt.workloads import get_graph

    graph, cluster = get_graph(warmup.GRAPH), get_cluster(warmup.CLUSTER)
    for placer in PLACERS.values():
        with contextlib.suppress(ValueError):  # a placer's documented refusal
            placer(graph, cluster)
    decode(
        step_graph(graph, cluster),
        "sample",
        HeadParams.zeros(graph.num_ops),
        rng=np.random.default_rng(0),
    )
    decode_events(event_graph(graph, cluster), given=np.zeros(graph.num_ops, dtype=np.int64))


_WARM_PARTS = {"simulator": _warm_simulator, "heuristics": _warm_heuristics}


@pytest.fixture(scope="session", autouse=True)
def _shared_numba_warmup(tmp_path_factory: pytest.TempPathFactory) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:  # one process: its tests compile what they use
        return
    import fcntl

    root = tmp_path_factory.getbasetemp().parent  # shared by the session's workers
    order = list(_WARM_PARTS)
    if worker != "gw0":
        order.reverse()
    for name in order:
        with open(root / f"numba-warmup-{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with contextlib.suppress(Exception):  # the tests that use the part report it
                _WARM_PARTS[name]()
