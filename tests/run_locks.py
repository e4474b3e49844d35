"""Another process that holds a run directory's lock, for tests of what a second writer meets."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

HOLDER = """
import sys, time
from pathlib import Path
from graphopt import rundir
with rundir.locked(Path(sys.argv[1])):
    print("locked", flush=True)
    time.sleep(600)
"""


@contextlib.contextmanager
def lock_held_elsewhere(run: Path) -> Iterator[subprocess.Popen[str]]:
    """A Python process that takes ``run``'s lock and sleeps; yields it once it holds the lock,
    and ends it with ``kill -9`` (which leaves its pid in the lock file) after the block."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the lock is held (or the child failed)
        assert line.strip() == "locked", proc.communicate(timeout=60)
        yield proc
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
