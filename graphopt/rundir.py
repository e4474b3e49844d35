"""Run directories: ``runs/<task>/<name>_<k>/`` and what a run leaves in them.

==========================  ============================================================
``config.yaml``             the resolved :class:`~graphopt.train.config.TrainConfig`
``state.json``              status (running, interrupted, crashed, finished), timesteps done
                            and the target, wall seconds of training (over every session),
                            best and last validation speed-up, error message of a crash
``model.json``              the spaces the policy was built for (observation and action),
                            JSON: with ``config.yaml`` all that rebuilds the model
``checkpoints/last.pt``     the latest PPO weights (resume point), replaced atomically
``best_model.pt``           the weights with the best validation speed-up so far
``final_model.pt``          the weights at the end of training
``metrics.csv``             one row per rollout and per validation (appended on resume)
``tb/``                     TensorBoard event files
==========================  ============================================================

A model file holds tensors and numbers only (:mod:`policies.checkpoint`: read back with
``torch.load(weights_only=True)``); the model is rebuilt from ``config.yaml`` and ``model.json``.
Runs of older versions hold Stable-Baselines3 ``.zip`` models instead, which can run code when
loaded: graphopt refuses them (:func:`legacy_model_error`) and never opens them.

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
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"
CONFIG_FILE = "config.yaml"
MODEL_INFO = "model.json"
LAST = "checkpoints/last.pt"
BEST = "best_model.pt"
FINAL = "final_model.pt"
LEGACY_MODELS = ("best_model.zip", "final_model.zip", "checkpoints/last.zip")
"""Model files of runs from older versions (Stable-Baselines3 zips, pickled): never loaded."""
METRICS = "metrics.csv"
METRIC_COLUMNS = (
    "timesteps",
    "wall_seconds",
    "kind",
    "reward_mean",
    "speedup_geomean",
    "valid_fraction",
    "step_time_mean",
    "samples_per_second",
)


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
def _handled_by(handler: Callable[[int, Any], None], signum: int = signal.SIGINT) -> Iterator[Any]:
    """Run the block with ``handler`` for ``signum``, then put the previous handler back; yields
    the previous handler. Outside the main thread signals cannot be handled: nothing is installed
    and ``None`` is yielded."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    previous = signal.signal(signum, handler)
    try:
        yield previous
    finally:
        signal.signal(signum, previous)


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) back until the block is done, then deliver it to the handler that was
    in place (Python's default raises ``KeyboardInterrupt``; :func:`graceful_stop` requests a stop;
    an ignored SIGINT stays ignored).

    A ``KeyboardInterrupt`` raised inside a serialiser (``torch.save``'s zip writer) can leave it
    half-written and surface as some other error, so the run would be recorded as crashed instead
    of interrupted. Outside the main thread signals cannot be handled; the block then runs as is.
    """
    caught: list[int] = []
    with _handled_by(lambda signum, frame: caught.append(signum)) as previous:
        yield
    if caught:  # hand the held Ctrl-C to whoever would have had it
        if callable(previous):
            previous(signal.SIGINT, None)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt


class StopRequest:
    """Set by the first Ctrl-C (or SIGTERM) inside :func:`graceful_stop`; a training loop polls
    ``requested`` between steps and winds down cleanly."""

    def __init__(self) -> None:
        self.requested = False


@contextlib.contextmanager
def graceful_stop(
    notice: str = "stopping after this step ({how} again to stop at once)",
) -> Iterator[StopRequest]:
    """Turn the first Ctrl-C (SIGINT) or SIGTERM into a stop request instead of an exception.

    A ``KeyboardInterrupt`` raised while compiled code runs (a numba kernel of the simulator) does
    not surface as itself: numba returns with the exception pending and Python reports a
    ``SystemError``, so a run would be recorded as crashed; and SIGTERM (``kill``, a batch
    scheduler's preemption, ``docker stop``) would end the process without saving anything. Inside
    this block the first of either only sets ``requested`` and prints ``notice`` to stderr
    (``{how}`` names the signal); the loop stops at its next check. A second one restores the
    previous handlers and raises ``KeyboardInterrupt`` (see :func:`is_interrupt` for recognising it
    however it surfaces). Outside the main thread nothing is installed and nothing is ever
    requested. A SIGINT that is ignored (``nohup``, a background job) or not Python's to handle,
    and a SIGTERM with a handler of its own or ignored, are left alone.
    """
    stop = StopRequest()
    names: dict[int, str] = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
    ours = []
    if callable(signal.getsignal(signal.SIGINT)):  # Python's own Ctrl-C handling
        ours.append(signal.SIGINT)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:  # would end the process unsaved
        ours.append(signal.SIGTERM)

    def handler(signum: int, frame: Any) -> None:
        if stop.requested:
            stack.close()  # the previous handlers are back
            raise KeyboardInterrupt
        stop.requested = True
        print(f"graphopt: {notice.format(how=names[signum])}", file=sys.stderr, flush=True)

    with contextlib.ExitStack() as stack:
        for signum in ours:
            stack.enter_context(_handled_by(handler, signum))
        yield stop


def is_interrupt(error: BaseException) -> bool:
    """Whether ``error`` is a ``KeyboardInterrupt`` or was caused by one (e.g. the ``SystemError``
    numba raises when Ctrl-C arrives during a compiled call)."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        if e.__cause__ is not None:
            e = e.__cause__
        else:  # ``raise ... from None`` hides the context
            e = None if e.__suppress_context__ else e.__context__
    return False


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` a temporary file next to ``path``, then rename it into place; Ctrl-C waits
    until the file is complete (:func:`uninterrupted`). The temporary name keeps the suffix
    (``last.pt`` -> ``last.tmp.pt``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp" + path.suffix)
    with uninterrupted():
        write(tmp)
        os.replace(tmp, path)


def legacy_model_error(run: Path, names: list[str] | tuple[str, ...]) -> ValueError:
    """The error for a run that holds only Stable-Baselines3 ``.zip`` models (``names``)."""
    return ValueError(
        f"run {run} holds only an SB3 .zip model ({', '.join(names)}), which can execute code "
        f"when loaded; graphopt loads only weights ({BEST}, {FINAL}, {LAST}: torch.load with "
        f"weights_only) and never a .zip: retrain the run (graphopt train --config "
        f"{run / CONFIG_FILE})"
    )


def _refuse_legacy(run: Path) -> None:
    """Raise :func:`legacy_model_error` if ``run`` holds an old ``.zip`` model."""
    legacy = [name for name in LEGACY_MODELS if (run / name).exists()]
    if legacy:
        raise legacy_model_error(run, legacy)


def check_run_dir(run: str | Path, need_model: bool = True) -> Path:
    """Validate that ``run`` is a run directory (and holds a model).

    Raises:
        ValueError: the directory does not exist, is not a run, or holds no model (a run that
            holds only ``.zip`` models of an older version: :func:`legacy_model_error`).
    """
    path = Path(run)
    if not path.is_dir():
        raise ValueError(
            f"run directory {str(path)!r} does not exist (runs are under runs/<task>/)"
        )
    if not (path / CONFIG_FILE).exists():
        raise ValueError(f"{path} is not a graphopt run: it has no {CONFIG_FILE}")
    if need_model and not any((path / f).exists() for f in (BEST, FINAL, LAST)):
        _refuse_legacy(path)
        raise ValueError(
            f"run {path} holds no model yet ({BEST}, {FINAL} or {LAST}); train it first"
        )
    return path


def best_model_path(run: Path) -> Path:
    """The model to evaluate: the best by validation, else the final, else the last checkpoint."""
    for name in (BEST, FINAL, LAST):
        if (run / name).exists():
            return run / name
    _refuse_legacy(run)
    raise ValueError(f"run {run} holds no model")


class MetricsLog:
    """Appends rows to ``metrics.csv`` (header written once)."""

    def __init__(self, run: Path) -> None:
        self.path = run / METRICS
        if not self.path.exists():
            with self.path.open("w", newline="") as f:
                csv.writer(f).writerow(METRIC_COLUMNS)

    def last_wall_seconds(self) -> float:
        """``wall_seconds`` of the last row (0 without rows): where a resumed run's clock goes on
        when its ``state.json`` does not record it (runs of older versions)."""
        with self.path.open(newline="") as f:
            walls = [row["wall_seconds"] for row in csv.DictReader(f) if row.get("wall_seconds")]
        return float(walls[-1]) if walls else 0.0

    def write(self, **row: Any) -> None:
        with self.path.open("a", newline="") as f:
            csv.writer(f).writerow([row.get(c, "") for c in METRIC_COLUMNS])
