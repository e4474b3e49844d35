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
``metrics.csv``             one row per rollout and per validation (appended on resume; the
                            rows past the resumed checkpoint, which are trained again, dropped)
``tb/``                     TensorBoard event files
``lock``                    the pid of the process that trains the run; held (``flock``) while
                            it does, so a second one is refused (:func:`locked`)
==========================  ============================================================

A model file holds tensors and numbers only (:mod:`policies.checkpoint`: read back with
``torch.load(weights_only=True)``); the model is rebuilt from ``config.yaml`` and ``model.json``.
Runs of older versions hold Stable-Baselines3 ``.zip`` models instead, which can run code when
loaded: graphopt refuses them (:func:`legacy_model_error`) and never opens them.

Every file is written to a temporary name and renamed into place, so an interrupted write never
leaves a truncated checkpoint or state file behind.
A run stopped by Ctrl-C or SIGTERM while it is set up, before it has anything to resume or
read, is removed whole (:func:`removed_if_interrupted`): a run directory holds a configuration
and a state that says where it stands, or is not there.

:func:`check_output_path` refuses an output path that cannot be created (a folder of it is a file,
or not writable) before a command does any work.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from graphopt import strict_json
from graphopt.errors import RunLocked
from graphopt.file_set import write_file
from graphopt.signals import held

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows: runs are not locked there
    fcntl = None  # type: ignore[assignment]

STATE_FILE = "state.json"
CONFIG_FILE = "config.yaml"
MODEL_INFO = "model.json"
LAST = "checkpoints/last.pt"
BEST = "best_model.pt"
FINAL = "final_model.pt"
LEGACY_MODELS = ("best_model.zip", "final_model.zip", "checkpoints/last.zip")
"""Model files of runs from older versions (Stable-Baselines3 zips, pickled): never loaded."""
METRICS = "metrics.csv"
LOCK = "lock"
MAX_RUN_FILE_BYTES = 2**22
"""The largest ``config.yaml``, ``state.json`` or ``model.json`` a run may hold (4 MiB; graphopt
writes a few KB): a larger one is refused unread (:func:`check_run_dir`, :func:`read_state`)."""
COSTMODEL_TASK = "costmodel"
"""Cost-model runs go to ``<runs_root>/costmodel/<name>_<k>/``."""
COSTMODEL_FILE = "model.pt"
"""The trained cost model of a cost-model run (weights only, :mod:`graphopt.costmodel.fit`)."""
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


def check_output_path(path: str | Path, what: str, *, directory: bool = False) -> Path:
    """Refuse an output path that cannot be created, before any work is done; returns it.

    ``path`` is a file to write (``directory=False``) or a directory to create or write into; its
    missing folders are created by whoever writes it, so the nearest one that exists must be a
    writable directory. ``what`` names the path in the message (a flag such as ``--out``).

    Raises:
        ValueError: one line naming the path, the culprit (a folder of it that is a file, a
            directory where a file goes or the reverse, a directory that is not writable) and the
            fix.
    """
    path = Path(path)
    shown = f"{what} {str(path)!r}"
    mode = _mode(path)
    if mode is not None:  # it exists: it must be of the right kind, in a writable directory
        if directory and not stat.S_ISDIR(mode):
            raise ValueError(
                f"{shown} is a file, not a directory; give a directory (created if missing)"
            )
        if not directory and stat.S_ISDIR(mode):
            raise ValueError(f"{shown} is a directory; give the name of a file to write")
        folder = path if directory else path.parent
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ValueError(
                f"{shown}: directory {str(folder)!r} is not writable; give another path"
            )
        return path
    for parent in path.parents:  # the nearest folder that exists is where it gets created
        mode = _mode(parent)
        if mode is None:
            continue
        if not stat.S_ISDIR(mode):
            raise ValueError(
                f"cannot create {shown}: {str(parent)!r} is a file, not a directory; give a path "
                "that does not go through it"
            )
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ValueError(
                f"cannot create {shown}: directory {str(parent)!r} is not writable; give another "
                "path"
            )
        break
    return path


def _mode(path: Path) -> int | None:
    """``path``'s ``st_mode`` (symbolic links followed), ``None`` where it cannot be reached."""
    try:
        return path.stat().st_mode
    except (OSError, ValueError):  # missing, a folder of it is a file, a NUL in the name
        return None


def check_run_name(name: str) -> str:
    """Refuse a run name that is not a plain directory name; returns it.

    Raises:
        ValueError: ``name`` has characters other than letters, digits, '.', '_' and '-'.
    """
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name) or name in (".", ".."):
        raise ValueError(f"run name {name!r} may only contain letters, digits, '.', '_' and '-'")
    return name


def new_run_dir(root: str | Path, task: str, name: str, checkpoints: bool = True) -> Path:
    """Create and return ``root/<task>/<name>_<k>`` with the next free ``k`` (from 1), with a
    ``checkpoints/`` folder (PPO's resume points) unless ``checkpoints=False``.

    Raises:
        ValueError: a bad run name (:func:`check_run_name`) or a ``root`` that cannot be created
            (:func:`check_output_path`).
    """
    check_run_name(name)
    check_output_path(root, "runs directory", directory=True)
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


@contextlib.contextmanager
def removed_if_interrupted(run: Path, unless: Path | None = None) -> Iterator[None]:
    """Remove the new run directory ``run`` when Ctrl-C or SIGTERM (``KeyboardInterrupt``) ends
    the block before ``unless`` exists (without ``unless``: whenever it does). Around the
    set-up of a run, before training's own stop handling takes over: a run stopped there holds
    nothing to resume or read (no checkpoint, no model) and a status that says it is starting or
    running, so it is removed whole, with both signals held back meanwhile
    (:func:`graphopt.signals.held`), and the interrupt goes on."""
    try:
        yield
    except KeyboardInterrupt:
        if unless is None or not unless.exists():
            with held():
                shutil.rmtree(run, ignore_errors=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (:func:`graphopt.file_set.write_file`).

    Raises:
        ValueError: the file cannot be written (one line naming it).
    """
    write_file(path, text)


def read_state(run: Path) -> dict[str, Any]:
    """The run's ``state.json`` (``{}`` when it has none).

    Raises:
        ValueError: the file cannot be read or is not a JSON object; the message names it.
    """
    path = run / STATE_FILE
    if not path.exists():
        return {}
    _check_size(path)
    fix = (
        "repair it, or delete it (the run keeps its checkpoints and resumes from "
        f"{LAST}, forgetting its status and best validation speed-up)"
    )
    try:
        state = json.loads(path.read_text())
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from e
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{path} is corrupt ({e}); {fix}") from e
    if not isinstance(state, dict):
        raise ValueError(
            f"{path} is corrupt (it holds a JSON {type(state).__name__}, not an object); {fix}"
        )
    return state


def write_state(run: Path, *, drop: Iterable[str] = (), **fields: Any) -> dict[str, Any]:
    """Update the run's ``state.json`` with ``fields`` and without the keys ``drop``."""
    state = read_state(run)
    for key in drop:
        state.pop(key, None)
    state.update(fields)
    atomic_write_text(run / STATE_FILE, strict_json.dumps(state, indent=2))
    return state


def lock_holder(run: Path) -> int | None:
    """The pid written in the run's lock file (that of its last holder, alive or not)."""
    try:
        text = (run / LOCK).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


@contextlib.contextmanager
def locked(run: Path) -> Iterator[None]:
    """Hold the run for this process during the block: an exclusive ``flock`` on ``run/lock``, in
    which this process's pid is written. A second process (or a second ``locked`` here) is
    refused at once with :class:`RunLocked`, naming the holder. The kernel releases the lock when
    its holder ends, however it ends (``kill -9`` too): a lock file left behind by a dead process
    is not held, and is taken over.

    Raises:
        RunLocked: another process holds the run.
    """
    path = run / LOCK
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLocked(run, lock_holder(run), run / LOCK) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # nobody holds it (the kernel releases the lock on close)
    finally:
        os.close(fd)


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


_OPEN_STOPS: list[StopRequest] = []
"""The requests of the :func:`graceful_stop` blocks open in this process, outermost first."""


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

    Blocks nest (a sweep around each of its trials' training loops): a signal requests a stop of
    every open block, and a block opened after a stop was requested starts requested, so the
    training loop inside stops at its first check and the loop around it at its next.
    """
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    stop.requested = any(s.requested for s in _OPEN_STOPS)
    names: dict[int, str] = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
    ours = []
    if callable(signal.getsignal(signal.SIGINT)):  # Python's own Ctrl-C handling
        ours.append(signal.SIGINT)
    term = signal.getsignal(signal.SIGTERM)
    if term == signal.SIG_DFL or getattr(term, "graceful_stop", False):  # would end unsaved
        ours.append(signal.SIGTERM)

    def handler(signum: int, frame: Any) -> None:
        if stop.requested:
            stack.close()  # the previous handlers are back
            raise KeyboardInterrupt
        for request in _OPEN_STOPS:
            request.requested = True
        print(f"graphopt: {notice.format(how=names[signum])}", file=sys.stderr, flush=True)

    handler.graceful_stop = True  # type: ignore[attr-defined]
    with contextlib.ExitStack() as stack:
        for signum in ours:
            stack.enter_context(_handled_by(handler, signum))
        _OPEN_STOPS.append(stop)
        stack.callback(_OPEN_STOPS.remove, stop)
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
    """``write(tmp)`` a temporary file next to ``path``, then rename it into place
    (:func:`graphopt.file_set.write_file`, which keeps the suffix: ``last.pt`` ->
    ``.last.XXXXXXXX.tmp.pt``); Ctrl-C waits until the file is complete (:func:`uninterrupted`).
    A write that fails removes it, so ``path`` is either the old file or the new one and nothing
    else is left.

    Raises:
        ValueError: the file cannot be written (an ``OSError``: one line naming it).
    """
    with uninterrupted():
        write_file(path, write)


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


def _check_size(path: Path) -> None:
    """Refuse a run file larger than :data:`MAX_RUN_FILE_BYTES`, before it is read."""
    try:
        size = path.stat().st_size
    except OSError:
        return  # missing or unreadable: whoever reads it says so
    if size > MAX_RUN_FILE_BYTES:
        raise ValueError(
            f"{path} is {size:,} bytes; a run's {path.name} takes a few KB (at most "
            f"{MAX_RUN_FILE_BYTES:,} are read): not a file graphopt wrote"
        )


def check_run_dir(run: str | Path, need_model: bool = True) -> Path:
    """Validate that ``run`` is a run directory (and holds a model), and that its
    ``config.yaml``, ``state.json`` and ``model.json`` are of a size graphopt writes.

    Raises:
        ValueError: the directory does not exist, is not a run, holds a run file larger than
            :data:`MAX_RUN_FILE_BYTES`, or holds no model (a run that holds only ``.zip``
            models of an older version: :func:`legacy_model_error`).
    """
    path = Path(run)
    if not path.is_dir():
        raise ValueError(
            f"run directory {str(path)!r} does not exist (runs are under runs/<task>/)"
        )
    if not (path / CONFIG_FILE).exists():
        raise ValueError(f"{path} is not a graphopt run: it has no {CONFIG_FILE}")
    for name in (CONFIG_FILE, STATE_FILE, MODEL_INFO):
        _check_size(path / name)
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


def truncate_metrics(run: Path, timesteps: int) -> int:
    """Drop the rows of the run's ``metrics.csv`` past ``timesteps``: those a run recorded after
    the checkpoint it resumes from (it was interrupted, crashed or killed before its next
    checkpoint), whose steps it trains again. A last row without its line end (cut short by a
    kill) is dropped too; rows whose timesteps cannot be read are kept. Returns the number of rows
    dropped.

    Raises:
        ValueError: the file cannot be read; the message names it.
    """
    path = run / METRICS
    if not path.exists():
        return 0
    try:
        text = path.read_text()
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read {path} ({e}); repair or delete it") from e
    rows = list(csv.reader(text.splitlines()))
    header, body = rows[:1] or [list(METRIC_COLUMNS)], rows[1:]
    if body and not text.endswith(("\n", "\r")):
        body.pop()  # cut short: csv.writer ends every row it writes
    kept = [row for row in body if not _past(row, timesteps)]
    dropped = len(rows) - 1 - len(kept)
    if dropped <= 0 and rows and text.endswith(("\n", "\r")):
        return 0

    def write(tmp: Path) -> None:
        with tmp.open("w", newline="") as f:
            csv.writer(f).writerows(header + kept)

    write_atomic(path, write)
    return max(dropped, 0)


def _past(row: list[str], timesteps: int) -> bool:
    """Whether ``row`` of ``metrics.csv`` was recorded after ``timesteps`` (unreadable: no)."""
    try:
        return float(row[0]) > timesteps
    except (IndexError, ValueError):
        return False


class MetricsLog:
    """Appends rows to ``metrics.csv`` (header written once)."""

    def __init__(self, run: Path) -> None:
        self.path = run / METRICS
        if not self.path.exists():
            with self.path.open("w", newline="") as f:
                csv.writer(f).writerow(METRIC_COLUMNS)

    def last_wall_seconds(self) -> float:
        """``wall_seconds`` of the last row that has one (0 without): where a resumed run's clock
        goes on when its ``state.json`` does not record it (runs of older versions)."""
        with self.path.open(newline="") as f:
            walls = [row.get("wall_seconds") or "" for row in csv.DictReader(f)]
        for wall in reversed(walls):
            try:
                return float(wall)
            except ValueError:  # empty or damaged
                continue
        return 0.0

    def write(self, **row: Any) -> None:
        with self.path.open("a", newline="") as f:
            csv.writer(f).writerow([row.get(c, "") for c in METRIC_COLUMNS])


def resolve_cost_model(run: str | Path) -> Path:
    """The ``model.pt`` of a cost-model run directory (or ``run`` itself when it is a file);
    checked before any heavy import, so a wrong path fails at once.

    Raises:
        ValueError: nothing at ``run``, or a directory without ``model.pt``.
    """
    path = Path(run)
    if path.is_file():
        return path
    if not path.is_dir():
        raise ValueError(
            f"cost-model run {str(path)!r} does not exist; give a run directory "
            f"(runs/{COSTMODEL_TASK}/<name>_<k>) or its {COSTMODEL_FILE}"
        )
    if not (path / COSTMODEL_FILE).is_file():
        raise ValueError(
            f"{path} holds no {COSTMODEL_FILE} (not a cost-model run, or no epoch finished); "
            "train one with `graphopt costmodel train`"
        )
    return path / COSTMODEL_FILE
