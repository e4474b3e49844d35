"""Stable-Baselines3 callbacks of a training run: metrics, validation, checkpoints, progress.

Metric keys are namespaced (``train/``, ``val/``) in TensorBoard; ``metrics.csv`` has one row per
rollout (kind ``train``) and per validation (kind ``val``). Models are saved as weights only
(:func:`policies.checkpoint.save_weights`).

Progress shows as a rich progress bar on a terminal; where stdout is not one (a pipe, ``| tee``, a
CI log, which a live bar leaves empty until the end) as a plain line (:func:`progress_line`)
every :func:`progress_interval` timesteps and at the end, then ``final validation: ...`` once the
trainer has validated the finished run.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback

from envs.one_shot import GraphOptEnv
from envs.rewards import INVALID
from graphopt import rundir
from policies.checkpoint import save_weights
from policies.rollout import geomean, run_policy

PROGRESS_LINES = 20
"""About how many plain progress lines a run prints (more if it validates more often)."""


def progress_interval(total_timesteps: int, eval_every: int) -> int:
    """Timesteps between plain progress lines: a :data:`PROGRESS_LINES`-th of the run, or
    ``eval_every`` where that is shorter (a line follows each validation)."""
    return max(1, min(eval_every, math.ceil(total_timesteps / PROGRESS_LINES)))


def speedup_status(last: float | None, best: float | None) -> str:
    """``val speed-up 1.234x (best 1.301x)``, or ``val speed-up -`` before the first validation."""
    if last is None:
        return "val speed-up -"
    best_text = f" (best {best:.3f}x)" if best is not None and math.isfinite(best) else ""
    return f"val speed-up {last:.3f}x{best_text}"


def format_duration(seconds: float | None) -> str:
    """``m:ss`` or ``h:mm:ss``; ``-`` when unknown (``None``, negative, not finite)."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_line(
    done: int,
    total: int,
    last_val: float | None,
    best_val: float | None,
    rate: float,
    elapsed: float,
) -> str:
    """One line of training progress for a log::

        train 4,096/16,384 (25%) | val speed-up 1.023x (best 1.050x) | 27.3 decisions/s |
        elapsed 2:30 | ETA 7:30

    (on one line). ``rate`` is timesteps (decisions) per second; the ETA is the remaining
    timesteps at that rate (``-`` while it is unknown).
    """
    share = f" ({100 * done / total:.0f}%)" if total > 0 else ""
    remaining = max(total - done, 0)
    eta = remaining / rate if rate > 0 and math.isfinite(rate) else None
    return (
        f"train {done:,}/{total:,}{share} | {speedup_status(last_val, best_val)} | "
        f"{rate:.1f} decisions/s | elapsed {format_duration(elapsed)} | "
        f"ETA {format_duration(eta)}"
    )


class RunCallback(BaseCallback):
    """Everything a run records while PPO learns.

    Args:
        run: the run directory.
        val_env: environment over the validation graphs (same spaces as training).
        eval_every: timesteps between validations.
        checkpoint_every: timesteps between checkpoints of ``checkpoints/last.pt``.
        total_timesteps: the run's target, for the progress display.
        show_progress: show progress with the live validation speed-up: a rich progress bar
            where stdout is a terminal, else a :func:`progress_line` every
            :func:`progress_interval` timesteps and at the end.
        plain: force the plain lines (True) or the bar (False); default: by stdout.
    """

    def __init__(
        self,
        run: Path,
        val_env: GraphOptEnv | None,
        eval_every: int,
        checkpoint_every: int,
        total_timesteps: int,
        show_progress: bool = True,
        plain: bool | None = None,
    ) -> None:
        super().__init__()
        self.run = run
        self.val_env = val_env
        self.eval_every = eval_every
        self.validated_at = -1
        """The timestep of the last validation (-1: none yet), so that none is repeated."""
        self.checkpoint_every = checkpoint_every
        self.total = total_timesteps
        self.show_progress = show_progress
        self.plain = plain
        self.metrics = rundir.MetricsLog(run)
        state = rundir.read_state(run)
        best = state.get("best_val_speedup")  # null: none yet (state.json is strict JSON)
        self.best = float(best) if best is not None else -math.inf
        self.last_val = state.get("last_val_speedup")
        wall = state.get("wall_seconds")  # earlier sessions of a resumed run
        self._wall_before = float(wall) if wall is not None else self.metrics.last_wall_seconds()
        self._rewards: list[float] = []
        self._speedups: list[float] = []
        self._valid: list[bool] = []
        self._times: list[float] = []
        self._start = time.perf_counter()
        self._rollout_start = time.perf_counter()
        self._next_eval = 0
        self._next_ckpt = 0
        self._progress: Any = None
        self._task: Any = None
        self._lines = False  # plain progress lines instead of the bar
        self._line_every = progress_interval(total_timesteps, eval_every)
        self._next_line = 0
        self._last_line = -1  # timesteps of the last line printed
        self._session_steps = 0  # timesteps and clock at the start of learning (for the rate)
        self._session_start = time.perf_counter()
        self.stop = rundir.StopRequest()  # the trainer hands in the one Ctrl-C sets

    # ------------------------------------------------------------------ SB3 hooks
    def _on_training_start(self) -> None:
        now = self.num_timesteps
        self._next_eval = (now // self.eval_every + 1) * self.eval_every
        self._next_ckpt = (now // self.checkpoint_every + 1) * self.checkpoint_every
        self._session_start = time.perf_counter()
        self._session_steps = now
        plain = self.plain
        if plain is None:
            from rich.console import Console

            plain = not Console().is_terminal
        self._lines = self.show_progress and plain
        self._next_line = (now // self._line_every + 1) * self._line_every
        if self.show_progress and not plain:
            from rich.progress import (
                BarColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]train[/bold]"),
                BarColumn(),
                TextColumn("{task.completed:,}/{task.total:,}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[status]}"),
            )
            self._progress.start()
            self._task = self._progress.add_task(
                "train", total=self.total, completed=now, status=self._status()
            )

    def _on_rollout_start(self) -> None:
        self._rollout_start = time.perf_counter()

    def _on_step(self) -> bool:
        for info, reward in zip(self.locals["infos"], self.locals["rewards"], strict=True):
            if "step_time" in info:  # an episode ended (multi-step ones report their return)
                self._rewards.append(float(info.get("episode_return", reward)))
                self._valid.append(bool(info["valid"]))
                self._times.append(float(info["step_time"]))
                self._speedups.append(info["speedup"] if info["valid"] else 1.0 / INVALID)
        if self.num_timesteps >= self._next_ckpt:
            self._next_ckpt += self.checkpoint_every
            self.checkpoint()
        if self.val_env is not None and self.num_timesteps >= self._next_eval:
            self._next_eval += self.eval_every
            self.validate()
        if self._progress is not None:
            self._progress.update(self._task, completed=self.num_timesteps, status=self._status())
        if self._lines and self.num_timesteps >= self._next_line:
            self._next_line = (self.num_timesteps // self._line_every + 1) * self._line_every
            self._print_line()
        return not self.stop.requested  # False ends model.learn after this step

    def _on_rollout_end(self) -> None:
        if not self._rewards:
            return
        elapsed = time.perf_counter() - self._rollout_start
        row = {
            "timesteps": self.num_timesteps,
            "wall_seconds": round(self.elapsed(), 2),
            "kind": "train",
            "reward_mean": float(np.mean(self._rewards)),
            "speedup_geomean": geomean(self._speedups),
            "valid_fraction": float(np.mean(self._valid)),
            "step_time_mean": float(np.mean(self._times)),
            "samples_per_second": len(self._rewards) / max(elapsed, 1e-9),
        }
        self.metrics.write(**row)
        for key in ("reward_mean", "speedup_geomean", "valid_fraction", "samples_per_second"):
            self.logger.record(f"train/{key}", row[key])
        self._rewards, self._speedups, self._valid, self._times = [], [], [], []

    def _on_training_end(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        if self._lines and self._last_line != self.num_timesteps:
            self._print_line()  # where the run ended (done, or stopped)

    def _print_line(self) -> None:
        seconds = time.perf_counter() - self._session_start
        steps = self.num_timesteps - self._session_steps
        rate = steps / seconds if seconds > 0 else 0.0
        best = self.best if math.isfinite(self.best) else None
        line = progress_line(
            self.num_timesteps, self.total, self.last_val, best, rate, self.elapsed()
        )
        print(line, file=sys.stdout, flush=True)
        self._last_line = self.num_timesteps

    # ------------------------------------------------------------------ actions
    def elapsed(self) -> float:
        """Wall seconds of training in this run: this session's plus every earlier session's (a
        resumed run continues the clock of ``metrics.csv``)."""
        return self._wall_before + time.perf_counter() - self._start

    def _status(self) -> str:
        return speedup_status(self.last_val, self.best)

    def checkpoint(self) -> None:
        save_weights(self.model, self.run / rundir.LAST)
        rundir.write_state(
            self.run, timesteps=int(self.num_timesteps), wall_seconds=round(self.elapsed(), 2)
        )

    def validate(self) -> float:
        """Greedy decisions on every validation graph; saves the best model; returns the geomean."""
        assert self.val_env is not None and isinstance(self.model, PPO)
        self.validated_at = int(self.num_timesteps)
        results = [run_policy(self.model, self.val_env, i) for i in range(len(self.val_env.graphs))]
        speedup = geomean([r.speedup for r in results])
        valid = float(np.mean([r.measurement.valid for r in results]))
        self.last_val = speedup
        self.metrics.write(
            timesteps=self.num_timesteps,
            wall_seconds=round(self.elapsed(), 2),
            kind="val",
            speedup_geomean=speedup,
            valid_fraction=valid,
            step_time_mean=float(np.mean([r.measurement.step_time for r in results])),
        )
        self.logger.record("val/speedup_geomean", speedup)
        self.logger.record("val/valid_fraction", valid)
        if speedup > self.best:
            self.best = speedup
            save_weights(self.model, self.run / rundir.BEST)
        rundir.write_state(self.run, best_val_speedup=self.best, last_val_speedup=speedup)
        if self._lines and self._last_line == self.num_timesteps:  # after the last line
            print(f"final validation: {self._status()}", file=sys.stdout, flush=True)
        return speedup
