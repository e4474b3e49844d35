"""Run directories: ``runs/<task>/<name>_<k>/`` and what a run leaves in them.

==========================  ============================================================
``config.yaml``             the resolved :class:`~graphopt.train.config.TrainConfig`
``state.json``              status (running, interrupted, crashed, finished), timesteps done,
                            best validation speed-up, error message of a crash
``checkpoints/last.zip``    the latest PPO model (resume point), replaced atomically
``best_model.zip``          the model with the best validation speed-up so far
``final_model.zip``         the model at the end of training
``metrics.csv``             one row per rollout and per validation (appended on resume)
``tb/``                     TensorBoard event files
==========================  ============================================================

Every file is written to a temporary name and renamed into place, so an interrupted write never
leaves a truncated checkpoint or state file behind.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"
CONFIG_FILE = "config.yaml"
LAST = "checkpoints/last.zip"
BEST = "best_model.zip"
FINAL = "final_model.zip"
METRICS = "metrics.csv"
METRIC_COLUMNS = (
    "timesteps", "wall_seconds", "kind", "reward_mean", "speedup_geomean", "valid_fraction",
    "step_time_mean", "samples_per_second",
)  # fmt: skip


def new_run_dir(root: str | Path, task: str, name: str, checkpoints: bool = True) -> Path:
    """Create and return ``root/<task>/<name>_<k>`` with the next free ``k`` (from 1), with a
    ``checkpoints/`` folder (PPO's resume points) unless ``checkpoints=False``."""
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise ValueError(f"run name {name!r} may only contain letters, digits, '.', '_' and '-'")
    base = Path(root) / task
    base.mkdir(parents=True, exist_ok=True)
    taken = [
        int(m.group(1))
        for p in base.iterdir()
        if (m := re.fullmatch(rf"{re.escape(name)}_(\d+)", p.name))
    ]
    k = max(taken, default=0) + 1
    while True:
        path = base / f"{name}_{k}"
        try:
            path.mkdir()
            if checkpoints:
                (path / "checkpoints").mkdir()
            return path
        except FileExistsError:  # another run took it meanwhile
            k += 1


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_state(run: Path) -> dict[str, Any]:
    path = run / STATE_FILE
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def write_state(run: Path, **fields: Any) -> dict[str, Any]:
    state = read_state(run)
    state.update(fields)
    atomic_write_text(run / STATE_FILE, json.dumps(state, indent=2))
    return state


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) back until the block is done, then raise ``KeyboardInterrupt``.

    A ``KeyboardInterrupt`` raised inside a serialiser (``torch.save``'s zip writer) can leave it
    half-written and surface as some other error, so the run would be recorded as crashed instead
    of interrupted. Outside the main thread signals cannot be handled; the block then runs as is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def save_model_atomic(model: Any, path: Path) -> None:
    """``model.save`` to a temporary file, then rename into place; Ctrl-C waits until the file is
    complete (:func:`uninterrupted`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.zip")
    with uninterrupted():
        model.save(tmp)
        os.replace(tmp, path)


def check_run_dir(run: str | Path, need_model: bool = True) -> Path:
    """Validate that ``run`` is a run directory (and holds a model).

    Raises:
        ValueError: the directory does not exist, is not a run, or holds no model.
    """
    path = Path(run)
    if not path.is_dir():
        raise ValueError(
            f"run directory {str(path)!r} does not exist (runs are under runs/<task>/)"
        )
    if not (path / CONFIG_FILE).exists():
        raise ValueError(f"{path} is not a graphopt run: it has no {CONFIG_FILE}")
    if need_model and not any((path / f).exists() for f in (BEST, FINAL, LAST)):
        raise ValueError(
            f"run {path} holds no model yet ({BEST}, {FINAL} or {LAST}); train it first"
        )
    return path


def best_model_path(run: Path) -> Path:
    """The model to evaluate: the best by validation, else the final, else the last checkpoint."""
    for name in (BEST, FINAL, LAST):
        if (run / name).exists():
            return run / name
    raise ValueError(f"run {run} holds no model")


class MetricsLog:
    """Appends rows to ``metrics.csv`` (header written once)."""

    def __init__(self, run: Path) -> None:
        self.path = run / METRICS
        if not self.path.exists():
            with self.path.open("w", newline="") as f:
                csv.writer(f).writerow(METRIC_COLUMNS)

    def write(self, **row: Any) -> None:
        with self.path.open("a", newline="") as f:
            csv.writer(f).writerow([row.get(c, "") for c in METRIC_COLUMNS])
