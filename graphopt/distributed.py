"""Where independent work runs: on this process, or on Ray workers (local by default).

Ray is the optional extra ``graphopt[ray]`` and is imported only here, and only when work is
sent to it (``workers`` above 1 or an ``address``), so every command starts without it.

- :func:`connect` joins the Ray cluster at an address (``HOST:PORT`` of ``ray start --head``,
  ``ray://HOST:10001``, or ``auto``), or starts Ray on this machine with its local CPUs. An
  address that answers nothing fails at once with a one-line error, before Ray waits on it.
- :func:`map_jobs` runs ``fn(job)`` for every job, serially or as one Ray task per job, and
  returns the results in the order of the jobs, the same either way (``fn`` and the jobs must be
  picklable plain data: functions of a module and dicts, strings, numbers).

Errors are one line that names the fix: :class:`~graphopt.errors.DependencyNotInstalled`
(Ray missing), :class:`~graphopt.errors.InvalidArgument` (a ``ValueError`` naming the argument:
workers below 1, an unreachable address, more workers than the cluster has CPUs; a command line
names its flag instead), :class:`WorkerDied` (a Ray worker process died while it held work).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from graphopt.errors import DependencyNotInstalled, InvalidArgument, WorkerDied

INSTALL_HINT = "pip install 'graphopt[ray]'"
"""How to install Ray for graphopt."""

J = TypeVar("J")
R = TypeVar("R")


def uses_ray(workers: int, address: str | None) -> bool:
    """Whether work of ``workers`` workers at ``address`` goes to Ray: more than one worker, or
    any address."""
    return workers > 1 or address is not None


def import_ray() -> Any:
    """The ``ray`` module, or :class:`DependencyNotInstalled` saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise DependencyNotInstalled(
            f"more than one worker, or a Ray address, runs the work on Ray, which is not "
            f"installed: {INSTALL_HINT}"
        ) from e
    return ray


def check_workers(workers: int) -> int:
    """``workers`` if it is at least 1, else a one-line :class:`InvalidArgument`."""
    if workers < 1:
        raise InvalidArgument("{workers} must be >= 1, got {got}", got=workers)
    return workers


def check_options(workers: int, address: str | None) -> bool:
    """Refuse bad ``workers`` / ``address`` before any work: workers below 1, Ray missing when
    work would go to it, an address where nothing answers.

    Returns:
        :func:`uses_ray` of the two.

    Raises:
        ValueError, DependencyNotInstalled: one line naming the fix.
    """
    check_workers(workers)
    if not uses_ray(workers, address):
        return False
    if address is not None:  # a bad address is named whether Ray is installed or not
        check_address(address)
    import_ray()
    return True


def check_ray_device(device: str | None, workers: int, address: str | None) -> None:
    """Refuse a CUDA torch ``device`` for work that goes to Ray: :func:`map_jobs`'s tasks hold one
    CPU each and no GPU.

    Raises:
        ValueError: one line naming the fix.
    """
    if uses_ray(workers, address) and device is not None and device.startswith("cuda"):
        raise InvalidArgument(
            "{device} {got} with {workers}/{address}: the Ray tasks hold one CPU each and no GPU; "
            "use {device} cpu, or run on the GPU without {workers}",
            got=device,
        )


def check_address(address: str, timeout: float = 3.0) -> None:
    """Refuse at once an address where nothing listens (Ray itself would wait a minute).

    ``auto`` (the cluster that ``ray start`` left on this machine) is left to Ray.

    Raises:
        ValueError: the address is malformed, or its host does not accept a connection on its
            port within ``timeout`` seconds, or (a GCS address, not ``ray://``) what answers
            there fails the health check of a Ray head (:func:`check_gcs_health`).
    """
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise InvalidArgument(
            "{address} {got!r} is not HOST:PORT; give the address 'ray start --head' printed "
            "(e.g. 10.0.0.5:6379, or ray://10.0.0.5:10001)",
            got=address,
        )
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
        if "://" not in address:
            check_gcs_health(hostport, timeout)
    except (OSError, ConnectionError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise InvalidArgument(
            "no Ray cluster answers at {got} ({reason}); start one there with "
            "'ray start --head --port {port}' or check {address}",
            got=address,
            reason=reason,
            port=port,
        ) from None


def check_gcs_health(hostport: str, timeout: float) -> None:
    """Ask the Ray head's GCS at ``hostport`` the standard gRPC health check
    (``grpc.health.v1.Health/Check``, which a Ray head answers ``SERVING``) within ``timeout``
    seconds: a port that accepts connections but is no Ray head (another service, a proxy) is
    told apart at once, where ``ray.init`` would retry for half a minute. Needs ``grpcio`` (a
    dependency of Ray); without it only the TCP probe is made.

    Raises:
        ConnectionError: no health answer, with gRPC's status and details.
    """
    try:
        import grpc
    except ImportError:  # pragma: no cover - Ray depends on grpcio
        return
    with grpc.insecure_channel(hostport) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        try:
            check(b"", timeout=timeout)
        except grpc.RpcError as e:
            code, details = e.code(), e.details()
            raise ConnectionError(
                f"it is not a Ray head: the health check got {code.name}: {details}"
            ) from None


@contextlib.contextmanager
def keep_sigterm() -> Iterator[None]:
    """Leave this process's SIGTERM handler as it was, whatever the block installs.

    ``ray.init`` installs a SIGTERM handler of its own in the driver (and ``ray.shutdown`` leaves
    it there); training turns SIGTERM into a checkpoint and a clean stop only where SIGTERM has
    its default action (:func:`graphopt.rundir.graceful_stop`), so without this a run on Ray
    workers would end unsaved when killed. Outside the main thread nothing is done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def connect(address: str | None = None, *, num_cpus: int | None = None) -> bool:
    """Join the Ray cluster at ``address``, or start Ray on this machine (``address`` None) with
    ``num_cpus`` CPUs (default: all of them). Nothing happens when Ray is already initialised in
    this process (a test's cluster, an earlier call).

    Returns:
        Whether this call started Ray (so its caller shuts it down when done).

    Raises:
        DependencyNotInstalled: Ray is not installed.
        ValueError: nothing answers at ``address``.
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    if address is not None:
        check_address(address)
    kwargs: dict[str, Any] = dict(
        include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False
    )  # the workers' logs stay in Ray's session directory; errors come back as exceptions
    if address is None:
        kwargs.update(address="local", num_cpus=num_cpus or os.cpu_count() or 1)
    else:
        kwargs.update(address=address)
    try:
        with keep_sigterm():
            ray.init(**kwargs)
    except ConnectionError as e:
        raise InvalidArgument(
            "cannot join the Ray cluster at {got}: {why}; check {address} (the address "
            "'ray start --head' printed)",
            got=address,
            why=str(e).splitlines()[0],
        ) from None
    return True


def cluster_cpus() -> int:
    """CPUs of the Ray cluster this process is connected to."""
    return int(import_ray().cluster_resources().get("CPU", 0))


def check_capacity(workers: int, address: str | None) -> None:
    """Refuse more workers than a Ray cluster given by ``address`` has CPUs (their actors would
    wait forever); Ray started on this machine is sized to the workers instead.

    Raises:
        ValueError: one line with the CPU count and the fix.
    """
    if address is None:
        return
    cpus = cluster_cpus()
    if workers > cpus:
        raise InvalidArgument(
            "{workers} {got} needs {got} CPUs, but the Ray cluster at {at} has {cpus}; lower "
            "{workers} or add nodes (ray start --address {at})",
            got=workers,
            at=address,
            cpus=cpus,
        )


def died(e: BaseException, what: str) -> WorkerDied:
    """The :class:`WorkerDied` of Ray's exception ``e`` for ``what`` (e.g. ``"worker 2"``)."""
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return WorkerDied(f"Ray {what} died ({type(e).__name__}: {first[:200]})")


def _run_one(fn: Callable[[Any], Any], job: Any) -> Any:
    return fn(job)


def map_jobs(
    fn: Callable[[J], R],
    jobs: Sequence[J],
    *,
    workers: int = 1,
    address: str | None = None,
) -> list[R]:
    """``[fn(job) for job in jobs]``: in this process when :func:`uses_ray` is false, else one Ray
    task per job with at most ``workers`` running at once (on this machine by default, or on the
    cluster at ``address``). The results come back in the order of ``jobs`` either way.

    Raises:
        the first exception a job raised (the job's own, not Ray's wrapper);
        WorkerDied: a worker died while it ran a job;
        DependencyNotInstalled, ValueError: see :func:`connect`.
    """
    check_workers(workers)
    if not uses_ray(workers, address) or not jobs:
        return [fn(job) for job in jobs]
    ray = import_ray()
    started = connect(address, num_cpus=None if address else max(workers, os.cpu_count() or 1))
    try:
        check_capacity(workers, address)
        task = ray.remote(num_cpus=1, max_retries=0)(_run_one)
        fn_ref = ray.put(fn)
        pending: dict[Any, int] = {}
        results: list[Any] = [None] * len(jobs)
        queue = list(enumerate(jobs))
        queue.reverse()
        while queue or pending:
            while queue and len(pending) < workers:
                index, job = queue.pop()
                pending[task.remote(fn_ref, job)] = index
            done, _ = ray.wait(list(pending), num_returns=1)
            index = pending.pop(done[0])
            try:
                results[index] = ray.get(done[0])
            except ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None)
                raise (cause if isinstance(cause, Exception) else e) from None
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.RayActorError) as e:
                raise died(e, f"worker of job {index}") from None
        return results
    finally:
        if started:
            ray.shutdown()
