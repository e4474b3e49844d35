"""Stable-Baselines3 callbacks of a training run: metrics, validation, checkpoints, progress bar.

Metric keys are namespaced (``train/``, ``val/``) in TensorBoard; ``metrics.csv`` has one row per
rollout (kind ``train``) and per validation (kind ``val``). Models are saved as weights only
(:func:`policies.checkpoint.save_weights`).
"""

from __future__ import annotations

import math
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


class RunCallback(BaseCallback):
    """Everything a run records while PPO learns.

    Args:
        run: the run directory.
        val_env: environment over the validation graphs (same spaces as training).
        eval_every: timesteps between validations.
        checkpoint_every: timesteps between checkpoints of ``checkpoints/last.pt``.
        total_timesteps: the run's target, for the progress bar.
        show_progress: draw a rich progress bar with the live validation speed-up.
    """

    def __init__(
        self,
        run: Path,
        val_env: GraphOptEnv | None,
        eval_every: int,
        checkpoint_every: int,
        total_timesteps: int,
        show_progress: bool = True,
    ) -> None:
        super().__init__()
        self.run = run
        self.val_env = val_env
        self.eval_every = eval_every
        self.checkpoint_every = checkpoint_every
        self.total = total_timesteps
        self.show_progress = show_progress
        self.metrics = rundir.MetricsLog(run)
        state = rundir.read_state(run)
        self.best = float(state.get("best_val_speedup", -math.inf))
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
        self.stop = rundir.StopRequest()  # the trainer hands in the one Ctrl-C sets

    # ------------------------------------------------------------------ SB3 hooks
    def _on_training_start(self) -> None:
        now = self.num_timesteps
        self._next_eval = (now // self.eval_every + 1) * self.eval_every
        self._next_ckpt = (now // self.checkpoint_every + 1) * self.checkpoint_every
        if self.show_progress:
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

    # ------------------------------------------------------------------ actions
    def elapsed(self) -> float:
        """Wall seconds of training in this run: this session's plus every earlier session's (a
        resumed run continues the clock of ``metrics.csv``)."""
        return self._wall_before + time.perf_counter() - self._start

    def _status(self) -> str:
        if self.last_val is None:
            return "val speed-up: -"
        return f"val speed-up {self.last_val:.3f}x (best {self.best:.3f}x)"

    def checkpoint(self) -> None:
        save_weights(self.model, self.run / rundir.LAST)
        rundir.write_state(
            self.run, timesteps=int(self.num_timesteps), wall_seconds=round(self.elapsed(), 2)
        )

    def validate(self) -> float:
        """Greedy decisions on every validation graph; saves the best model; returns the geomean."""
        assert self.val_env is not None and isinstance(self.model, PPO)
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
        return speedup
