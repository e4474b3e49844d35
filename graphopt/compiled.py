"""How graphopt's numba code keeps its cold compilation short.

numba compiles an ``@njit(cache=True)`` function the first time a process calls it with a new
signature and keeps it in its disk cache; on a fresh clone the cache is empty, so every process (each
pytest worker) compiles what it calls: about 80 s of CPU for what ``python -m graphopt.warmup``
runs, in one process (123 s before these rules). ``bench/bench_compile_time.py`` measures it per
function. The compiled modules follow these rules, each worth seconds a process:

- **One signature per function.** numba types a read-only array apart from a writable one, ``int32``
  apart from ``int64``, a C-contiguous array apart from a strided one, and compiles the function
  again for each. Python callers pass one kind (the simulator copies a read-only decision array,
  the list scheduler takes read-only views, the decoders pass the engine's ``int32`` CSR).
- **No literals into compiled callees.** While typing a caller, numba compiles a non-inlined callee
  for the argument types known *so far*: a variable that starts as ``-1`` and is updated later is
  first ``Literal[int](-1)``, and the callee is compiled for that too. Such variables start as
  ``np.int64(-1)``.
- **No array assigned to a slice** (``a[i] = b`` with ``b`` an array): it needs numba's
  shape-mismatch error message, a library function of seconds to compile in every process (numba's
  own functions are not cached on disk). Copy element by element.
- **No wrappers for internal functions** (:data:`INTERNAL`).
"""

from __future__ import annotations

from typing import Any

INTERNAL: dict[str, Any] = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}
"""``njit`` options of a function that only compiled code calls: numba builds no Python wrapper
(the unboxing of every argument and the boxing of the result, seconds to compile for the engine's
named tuples) nor C wrapper for it. Python cannot call such a function."""
