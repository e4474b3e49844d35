"""Array-backed binary heaps for compiled loops (the simulator's, the Baechi baseline's).

Numba cannot hold a list of Python heaps, so every queue of one kind lives in one flat array: heap
``j`` occupies ``[base[j], base[j] + capacity_j)`` and its current size is ``size[j]``. Capacities
are known before the loop starts (for instance the number of kernels on a device), so nothing is
allocated inside it.

Two flavours:

- ``iheap``: keys are ``int64``; the smallest key pops first (device ready queues, where the key is
  ``(priority << 32) | kernel``, so that the lowest level runs first and ties go by topological index).
- ``fheap``: entries are ``(time: float64, tie: int64, payload: int64)``, ordered by ``(time, tie)``
  (time-ordered queues such as the Baechi baseline's; the simulator's own pending events are a
  short sorted list, see :mod:`graphopt.sim.engine`).
"""

from __future__ import annotations

from numba import njit


@njit(cache=True, inline="always", error_model="numpy")
def iheap_push(keys, base, size, j, key):
    start = base[j]
    i = size[j]
    size[j] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if keys[start + parent] <= key:
            break
        keys[start + i] = keys[start + parent]
        i = parent
    keys[start + i] = key


@njit(cache=True, inline="always", error_model="numpy")
def iheap_pop(keys, base, size, j):
    start = base[j]
    top = keys[start]
    n = size[j] - 1
    size[j] = n
    if n > 0:
        last = keys[start + n]
        i = 0
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            if child + 1 < n and keys[start + child + 1] < keys[start + child]:
                child += 1
            if last <= keys[start + child]:
                break
            keys[start + i] = keys[start + child]
            i = child
        keys[start + i] = last
    return top


@njit(cache=True, inline="always", error_model="numpy")
def _less(times, ties, a, b):
    return times[a] < times[b] or (times[a] == times[b] and ties[a] < ties[b])


@njit(cache=True, inline="always", error_model="numpy")
def fheap_push(times, ties, payloads, base, size, j, time, tie, payload):
    start = base[j]
    i = size[j]
    size[j] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        p = start + parent
        if times[p] < time or (times[p] == time and ties[p] < tie):
            break
        times[start + i] = times[p]
        ties[start + i] = ties[p]
        payloads[start + i] = payloads[p]
        i = parent
    times[start + i] = time
    ties[start + i] = tie
    payloads[start + i] = payload


@njit(cache=True, inline="always", error_model="numpy")
def fheap_pop(times, ties, payloads, base, size, j):
    """Pop the smallest entry and return its payload (read its time first if needed)."""
    start = base[j]
    top = payloads[start]
    n = size[j] - 1
    size[j] = n
    if n > 0:
        last_t = times[start + n]
        last_tie = ties[start + n]
        last_p = payloads[start + n]
        i = 0
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            c = start + child
            if child + 1 < n and _less(times, ties, c + 1, c):
                c += 1
                child += 1
            if last_t < times[c] or (last_t == times[c] and last_tie < ties[c]):
                break
            times[start + i] = times[c]
            ties[start + i] = ties[c]
            payloads[start + i] = payloads[c]
            i = child
        times[start + i] = last_t
        ties[start + i] = last_tie
        payloads[start + i] = last_p
    return top
