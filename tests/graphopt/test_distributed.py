"""Independent jobs on this process or on Ray workers; the one-line errors of Ray's set-up."""

from __future__ import annotations

import math
import socket
import sys

import pytest

from graphopt.distributed import (
    INSTALL_HINT,
    check_address,
    import_ray,
    map_jobs,
    uses_ray,
)
from graphopt.importers.zoo import DependencyNotInstalled

# the jobs' functions come from an installed module: Ray workers import them by name
_factorial = math.factorial


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serial_without_workers_or_address():
    assert not uses_ray(1, None) and uses_ray(2, None) and uses_ray(1, "auto")
    assert map_jobs(_factorial, [3, 1, 2]) == [6, 1, 2]
    assert map_jobs(_factorial, []) == []


def test_ray_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(
        DependencyNotInstalled, match="not installed: pip install 'graphopt\\[ray\\]'"
    ):
        import_ray()
    with pytest.raises(DependencyNotInstalled, match=INSTALL_HINT.replace("[", "\\[")):
        map_jobs(_factorial, [1], workers=2)


def test_an_unreachable_address_fails_at_once(monkeypatch):
    # "at once": one TCP probe with a bounded timeout, not Ray's own minute of retries
    port = _closed_port()
    probes = []
    real = socket.create_connection

    def probe(address, timeout=None, *args, **kwargs):
        probes.append((address, timeout))
        return real(address, timeout, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", probe)
    with pytest.raises(
        ValueError, match=rf"no Ray cluster answers at 127.0.0.1:{port} .*ray start --head"
    ):
        check_address(f"127.0.0.1:{port}")
    assert probes == [(("127.0.0.1", port), 3.0)]
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        check_address("my-cluster")
    check_address("auto")  # left to Ray


def test_a_port_that_accepts_but_is_no_ray_head_fails_within_the_timeout():
    """Something listens but never answers the gRPC health check of a Ray head (another service,
    a proxy): refused after the bounded probe, not after ray.init's half minute of retries."""
    pytest.importorskip("grpc")
    import threading

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        accepted: list[socket.socket] = []
        threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
        with pytest.raises(
            ValueError,
            match=f"no Ray cluster answers at 127.0.0.1:{port} \\(it is not a Ray head: the health check got ",
        ):
            check_address(f"127.0.0.1:{port}", timeout=0.5)
        for conn in accepted:
            conn.close()


def test_on_a_local_ray_the_same_results_in_the_same_order():
    from ray_testing import local_ray

    for _ in local_ray():  # Ray with 2 CPUs for this test
        jobs = list(range(7))
        assert map_jobs(_factorial, jobs, workers=2) == map_jobs(_factorial, jobs)
        with pytest.raises(ValueError, match="^math domain error$"):  # a job's own error
            map_jobs(math.sqrt, [4.0, -1.0, 9.0], workers=2)


def test_two_node_cluster_runs_jobs_and_rollouts(tmp_path):
    """Two Ray nodes of one CPU each on this machine: jobs and a run's two environment workers
    are spread over both, with the results of one process."""
    from ray_testing import need_ray

    ray = need_ray()
    from ray.cluster_utils import Cluster
    from tiny_runs import tiny_config

    from graphopt.distributed import keep_sigterm
    from graphopt.train.trainer import train

    with keep_sigterm():  # starting a node installs a SIGTERM handler; later tests expect none
        cluster = Cluster(
            initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
        )
    try:
        with keep_sigterm():
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        address = cluster.address
        assert map_jobs(_factorial, list(range(4)), workers=2, address=address) == [1, 1, 2, 6]
        assert not ray.is_initialized()  # map_jobs leaves as it found
        with pytest.raises(ValueError, match="needs 3 CPUs, but the Ray cluster at .* has 2"):
            map_jobs(_factorial, [1, 2, 3], workers=3, address=address)
        config = tiny_config(n_envs=2, total_timesteps=32)
        a = train(config, runs_root=tmp_path / "a", show_progress=False, backend="dummy")
        b = train(
            config, runs_root=tmp_path / "b", show_progress=False, workers=2, ray_address=address
        )
        assert (a / "metrics.csv").read_text().count("\n") == (b / "metrics.csv").read_text().count(
            "\n"
        )
        assert not ray.is_initialized()
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_starting_ray_leaves_sigterm_to_the_training_loop():
    # ray.init installs a SIGTERM handler that outlives ray.shutdown; connect keeps the one the
    # process had, so graceful_stop still turns a SIGTERM into a checkpoint.
    import signal
    import threading

    from ray_testing import need_ray

    from graphopt.distributed import connect

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are only handled in the main thread")
    ray = need_ray()
    if ray.is_initialized():
        pytest.skip("Ray is already running in this process")
    before = signal.getsignal(signal.SIGTERM)
    try:
        assert connect(num_cpus=1)
        assert signal.getsignal(signal.SIGTERM) == before
    finally:
        ray.shutdown()
    assert signal.getsignal(signal.SIGTERM) == before
