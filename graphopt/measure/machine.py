"""This machine's CPU as a :class:`~graphopt.hardware.Device`, measured by short microbenchmarks.

:func:`probe_cpu` measures the three figures the simulator's roofline needs (rule 3 of
:mod:`graphopt.sim`), in a few seconds, with ``torch.set_num_threads(threads)`` set for the
duration (default **1 thread**; the previous setting is restored):

* ``peak_flops``: a float32 matrix product ``C = A @ B`` of ``n x n`` matrices (``n = 1024``, or
  2048 from 8 threads up; random values), ``2 n^3`` FLOPs per product; two products to warm up,
  then repeated until :data:`FLOPS_SECONDS` have passed (at least :data:`MIN_REPEATS` times). The
  figure is the **best** repeat: a peak is the fastest the machine goes, and a shared machine only
  ever slows a repeat down.
* ``mem_bandwidth``: ``dst.copy_(src)`` of a float32 tensor four times the size of the largest CPU
  cache (``/sys/devices/system/cpu/cpu0/cache``), at least 64 MiB, so that it streams from DRAM;
  bytes moved = read + write = ``2 x`` the tensor's size, counted as
  :attr:`~graphopt.graph.CompGraph.bytes_accessed` counts an op's bytes. Best repeat again, over
  :data:`BANDWIDTH_SECONDS`. (No non-temporal stores: the write-allocate read a plain copy also
  costs is not counted, as no op's bytes count it.)
* ``launch_overhead``: the per-op cost of eager PyTorch, i.e. the wall time of ``torch.add(a, b)``
  on one-element float32 tensors called from Python (dispatch, output allocation, the kernel of
  one element), in batches of :data:`DISPATCH_BATCH` calls; the **median** per-call time over
  :data:`DISPATCH_REPEATS` batches (an overhead is typical, not best-case).
* ``memory``: ``MemTotal`` of ``/proc/meminfo`` (else ``os.sysconf`` pages x page size); not
  measured, and not lowered by a container's memory limit.

The device's ``kind`` (:func:`cpu_kind`) names the CPU model and the thread count, e.g.
``cpu-amd-epyc-t1`` or ``cpu-intel-xeon-platinum-8375c-t4``: the key under which
:func:`graphopt.measure.profile.profile_graph` stores the ops' measured times, so a graph
profiled with ``t`` threads is simulated with its measured times only on a device of that kind.

:func:`probe_cuda` measures a CUDA GPU the same way, timed with CUDA events (each figure the best
of repeats after a warm-up): ``peak_flops`` from a float32 ``8192 x 8192`` matmul (with torch's
default TF32 setting), ``mem_bandwidth`` from ``dst.copy_(src)`` of 1 GiB (read + write counted),
``launch_overhead`` from the median wall time per eager one-element ``torch.add`` on the GPU
(batches of :data:`DISPATCH_BATCH`, synchronised), ``memory`` the device's total memory. Its kind
(:func:`cuda_kind`) is ``cuda-<GPU name slug>``, e.g. ``cuda-nvidia-h100-80gb-hbm3``.
"""

from __future__ import annotations

import math
import os
import platform
import re
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from graphopt.hardware import Cluster, Device

FLOPS_SECONDS = 0.6
BANDWIDTH_SECONDS = 0.6
MIN_REPEATS = 3
DISPATCH_BATCH = 200
DISPATCH_REPEATS = 25
MIN_COPY_BYTES = 64 * 2**20

_CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


# ---------------------------------------------------------------------------- naming
def cpu_model_name() -> str:
    """The CPU's model name: ``model name`` of ``/proc/cpuinfo`` (``Hardware`` / ``Processor`` on
    some ARM kernels), else ``platform.processor()``, else ``platform.machine()``."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for key in ("model name", "Hardware", "Processor"):
        match = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        if match and match.group(1).strip():
            return match.group(1).strip()
    return platform.processor() or platform.machine() or "unknown"


def slugify_cpu(model_name: str) -> str:
    """``"Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"`` -> ``"intel-xeon-platinum-8375c"``:
    lower case, trademarks, the words CPU / processor and the clock after ``@`` dropped, every run
    of other characters a single ``-``."""
    text = model_name.split("@", 1)[0].lower()
    text = re.sub(r"\((r|tm|c)\)", " ", text)
    words = [w for w in re.split(r"[^a-z0-9.]+", text) if w and w not in ("cpu", "processor")]
    slug = re.sub(r"[^a-z0-9]+", "-", "-".join(words)).strip("-")
    return slug or "unknown"


def cpu_kind(threads: int = 1, model_name: str | None = None) -> str:
    """The device kind of this CPU run with ``threads`` threads: ``cpu-<model slug>-t<threads>``."""
    return f"cpu-{slugify_cpu(model_name or cpu_model_name())}-t{int(threads)}"


def cuda_kind(index: int = 0) -> str:
    """The device kind of CUDA GPU ``index``: ``cuda-<name slug>`` (:func:`slugify_cpu`'s rules)."""
    import torch

    return f"cuda-{slugify_cpu(torch.cuda.get_device_name(index))}"


def memory_bytes() -> float:
    """Physical memory, bytes (see the module docstring)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return float(line.split()[1]) * 1024  # the kernel's "kB" are KiB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX system
        return 8e9


def largest_cache_bytes() -> int:
    """Size of the largest CPU cache in ``/sys`` (0 when unknown)."""
    best = 0
    for size in _CACHE_DIR.glob("index*/size"):
        try:
            text = size.read_text().strip().upper()
        except OSError:
            continue
        match = re.fullmatch(r"(\d+)([KMG]?)", text)
        if match:
            scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2)]
            best = max(best, int(match.group(1)) * scale)
    return best


# ---------------------------------------------------------------------------- measuring
@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """``torch.set_num_threads(threads)`` for the duration; the previous setting restored."""
    import torch

    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _repeat(fn: Callable[[], Any], seconds: float, min_repeats: int) -> list[float]:
    """Wall times of ``fn()`` repeated until ``seconds`` have passed (at least ``min_repeats``)."""
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_repeats or time.perf_counter() - start < seconds:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def measure_peak_flops(threads: int = 1, seconds: float = FLOPS_SECONDS) -> float:
    """FLOP/s of the best float32 ``n x n`` matmul repeat (module docstring)."""
    import torch

    n = 2048 if threads >= 8 else 1024
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)
    for _ in range(2):
        torch.mm(a, b, out=out)
    best = min(_repeat(lambda: torch.mm(a, b, out=out), seconds, MIN_REPEATS))
    return 2.0 * n**3 / best


def measure_bandwidth(seconds: float = BANDWIDTH_SECONDS) -> float:
    """Bytes/s of the best ``dst.copy_(src)`` repeat (module docstring)."""
    import torch

    nbytes = max(MIN_COPY_BYTES, 4 * largest_cache_bytes())
    nbytes = min(nbytes, int(memory_bytes() / 8))  # never more than an eighth of the memory
    src = torch.rand(nbytes // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)  # first touch of dst's pages
    best = min(_repeat(lambda: dst.copy_(src), seconds, MIN_REPEATS))
    return 2.0 * src.numel() * src.element_size() / best


def measure_dispatch() -> float:
    """Median seconds per eager ``torch.add`` of one-element tensors (module docstring)."""
    import torch

    a, b = torch.ones(1), torch.ones(1)
    add = torch.add

    def batch() -> None:
        for _ in range(DISPATCH_BATCH):
            add(a, b)

    batch()
    return statistics.median(_repeat(batch, 0.0, DISPATCH_REPEATS)) / DISPATCH_BATCH


def probe_cpu(threads: int | None = None, *, name: str = "cpu0") -> Device:
    """Measure this CPU (see the module docstring for what is measured and how).

    Args:
        threads: torch threads to measure with (``None``: 1); part of the device kind.
        name: the device's name.

    Returns:
        ``Device(name, cpu_kind(threads), peak_flops, mem_bandwidth, memory, launch_overhead)``.

    Raises:
        ValueError: ``threads`` is not a positive integer.
    """
    threads = 1 if threads is None else threads
    with torch_threads(threads):
        flops = measure_peak_flops(threads)
        bandwidth = measure_bandwidth()
        launch = measure_dispatch()
    return Device(
        name=name,
        kind=cpu_kind(threads),
        peak_flops=flops,
        mem_bandwidth=bandwidth,
        memory=memory_bytes(),
        launch_overhead=launch,
    )


def _cuda_best(fn: Callable[[], Any], repeats: int) -> float:
    """Best seconds of ``fn()`` over ``repeats`` runs, each timed by CUDA events."""
    import torch

    best = math.inf
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) * 1e-3)
    return best


def probe_cuda(index: int = 0, *, name: str = "gpu0") -> Device:
    """Measure CUDA GPU ``index`` (module docstring).

    Raises:
        ValueError: no CUDA device.
    """
    import torch

    if not torch.cuda.is_available():
        raise ValueError("no CUDA device: torch.cuda.is_available() is False")
    dev = torch.device("cuda", index)

    def matmul() -> float:
        n = 8192
        a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
        out = torch.empty(n, n, device=dev)
        for _ in range(3):
            torch.mm(a, b, out=out)
        return 2.0 * n**3 / _cuda_best(lambda: torch.mm(a, b, out=out), 10)

    def copy() -> float:
        src = torch.rand(2**28, device=dev)  # 1 GiB of float32
        dst = torch.empty_like(src)
        dst.copy_(src)
        return 2.0 * src.numel() * 4 / _cuda_best(lambda: dst.copy_(src), 10)

    def dispatch() -> float:
        x, y = torch.ones(1, device=dev), torch.ones(1, device=dev)

        def batch() -> None:
            for _ in range(DISPATCH_BATCH):
                torch.add(x, y)
            torch.cuda.synchronize(dev)

        batch()
        return statistics.median(_repeat(batch, 0.0, DISPATCH_REPEATS)) / DISPATCH_BATCH

    with torch.cuda.device(dev):  # each figure's tensors are freed before the next
        flops, bandwidth, launch = matmul(), copy(), dispatch()
        memory = float(torch.cuda.get_device_properties(dev).total_memory)
    return Device(
        name=name,
        kind=cuda_kind(index),
        peak_flops=flops,
        mem_bandwidth=bandwidth,
        memory=memory,
        launch_overhead=launch,
    )


def machine_cluster(device: Device, *, name: str | None = None) -> Cluster:
    """A cluster of the single ``device`` (this machine), e.g. for ``graphopt simulate``."""
    model = device.kind if device.kind.startswith("cuda-") else cpu_model_name()
    return Cluster(
        name=name or device.kind,
        devices=(device,),
        bandwidth=np.full((1, 1), np.inf),
        latency=np.zeros((1, 1)),
        description=f"this machine: {model}, measured by graphopt profile "
        f"(peak {device.peak_flops / 1e9:.1f} GFLOP/s, {device.mem_bandwidth / 1e9:.1f} GB/s, "
        f"{device.launch_overhead * 1e6:.2f} us per op)",
    )
