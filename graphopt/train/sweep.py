"""Sweeps: one training run per (setting, seed), on this process or as Ray Tune trials.

A sweep crosses the values given for config keys (``--set learning_rate=1e-4,3e-4``) and runs
every setting with ``seeds`` seeds (``config.seed + 0 .. seeds - 1``). Each trial is a normal run
directory, ``runs/<task>/<sweep>-t<i>_1``, trained by :func:`graphopt.train.trainer.train`; the
sweep's own directory, ``runs/sweep/<name>_<k>/``, holds plain data only:

- ``sweep.json``: the base configuration, the trials (their overrides and run names);
- ``summary.csv`` and ``summary.png``: every trial's validation speed-up (the last one, of the
  final model) and, per setting, their mean, standard deviation, min and max over the seeds.

Every trial is checked as ``graphopt train`` checks a run before any work (its config, device,
graphs and cluster: :func:`check_trials`) before the first one starts. Trials run in this process
one after another, or, with ``workers`` above 1 or a Ray address, as Ray Tune trials (at most
``workers`` at once, one CPU each; :func:`_run_on_tune`). A trial that fails is recorded and the
others go on; :func:`sweep` with ``resume`` continues every trial that did not finish (a trial's
run resumes from its last checkpoint, one not started starts), and the finished ones are kept as
they are. The figures of a trial do not depend on where it ran.

Ctrl-C or SIGTERM stops a sweep as it stops ``graphopt train``: the trial that is training stops
after its current step and is checkpointed (status ``interrupted``), no further trial starts,
``sweep.json`` and the summary record every trial's state, and :class:`SweepInterrupted` is
raised; ``resume`` continues from there. On Ray Tune no further trial starts and the running ones
are stopped by Tune (each resumes from its last checkpoint).
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import json
import math
import traceback
from pathlib import Path
from typing import Any

import yaml

from graphopt import rundir, strict_json
from graphopt.distributed import check_workers, import_ray, uses_ray
from graphopt.errors import (
    DependencyNotInstalled,
    InvalidArgument,
    SweepInterrupted,
    check_integer,
)
from graphopt.file_set import FileSet, figure_bytes, write_file
from graphopt.train.config import FIELDS, TrainConfig, check_types

SWEEP_FILE = "sweep.json"
SUMMARY_CSV = "summary.csv"
SUMMARY_PNG = "summary.png"
NOT_SWEPT = ("version", "seed", "name")
"""Config keys ``--set`` does not take: the format, the seeds (``--seeds``), the trial names."""
MAX_SEEDS = 1_000
"""The most seeds per setting."""
MAX_TRIALS = 10_000
"""The most trials of a sweep (settings x seeds): each is a run directory, planned up front."""


STOP_NOTICE = "stopping the sweep: no further trial starts ({how} again to stop at once)"
"""What the first Ctrl-C or SIGTERM between two trials prints (during one, training's own)."""


def parse_sets(items: list[str]) -> dict[str, list[Any]]:
    """``["key=v1,v2", ...]`` as ``{key: [v1, v2]}``, each value read as YAML (so ``1e-4`` is
    a number) and checked against the key's type.

    Raises:
        ValueError: an item without ``=``, a key that is not a config key (the valid keys
            listed), a key given twice, a value of the wrong type.
    """
    out: dict[str, list[Any]] = {}
    valid = sorted(FIELDS - set(NOT_SWEPT))
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not values.strip():
            raise InvalidArgument(
                "{sets} {got!r} is not KEY=VALUE[,VALUE...] (e.g. learning_rate=1e-4,3e-4)",
                got=item,
            )
        if key not in valid:
            raise InvalidArgument(
                "{sets} {got!r} is not a config key"
                + ("; use {seeds} for seeds" if key == "seed" else "")
                + "; valid keys: {valid}",
                got=key,
                valid=", ".join(valid),
            )
        if key in out:
            raise InvalidArgument(
                "{sets} {got} is given twice; list its values once: {got}=V1,V2", got=key
            )
        out[key] = [check_types({key: yaml.safe_load(v.strip())})[key] for v in values.split(",")]
    return out


def plan_trials(sets: dict[str, list[Any]], seeds: int, base_seed: int) -> list[dict[str, Any]]:
    """Every (setting, seed) of the grid of ``sets``: ``{"setting": {key: value}, "seed": s}``,
    settings in the order given, seeds innermost.

    Raises:
        ValueError: ``seeds`` outside 1..:data:`MAX_SEEDS`, or more than :data:`MAX_TRIALS`
            trials (:class:`~graphopt.errors.InvalidArgument`).
    """
    check_integer(seeds, "seeds", 1, MAX_SEEDS)
    keys = list(sets)
    settings = math.prod(len(values) for values in sets.values())
    if settings * seeds > MAX_TRIALS:
        raise InvalidArgument(
            "the sweep would run {settings:,} settings x {count} seeds = {trials:,} trials; at "
            "most {high:,}: give fewer values of {sets} or fewer {seeds}",
            settings=settings,
            count=seeds,
            trials=settings * seeds,
            high=MAX_TRIALS,
        )
    grid = [dict(zip(keys, values, strict=True)) for values in itertools.product(*sets.values())]
    return [{"setting": s, "seed": base_seed + k} for s in grid for k in range(seeds)]


def setting_label(setting: dict[str, Any]) -> str:
    """``key=value key=value`` (or ``base`` for a sweep of seeds only)."""
    return " ".join(f"{k}={v}" for k, v in setting.items()) or "base"


def _trial_config(base: dict[str, Any], trial: dict[str, Any]) -> TrainConfig:
    data = {**base, **trial["setting"], "seed": trial["seed"], "name": trial["name"]}
    return TrainConfig(**data).validate()


def check_trials(base: dict[str, Any], trials: list[dict[str, Any]], name: str) -> None:
    """Refuse, before any trial starts, a trial that ``graphopt train`` would refuse before any
    work: its config (:meth:`TrainConfig.validate`), its device, and its graphs, cluster and
    environment settings (:func:`graphopt.train.vec_env.check_inputs`: one environment of each
    distinct setting is built, whatever the seeds).

    Raises:
        ValueError: the first trial refused, its setting and seed named, then the reason.
    """
    from graphopt.accelerator import resolve_device
    from graphopt.train.vec_env import check_inputs

    checked: set[str] = set()
    for t in trials:
        try:
            config = _trial_config(base, {**t, "name": t.get("name", name)})
            resolve_device(config.device)
            inputs = {k: v for k, v in config.to_dict().items() if k not in ("seed", "name")}
            key = json.dumps(inputs, sort_keys=True, default=str)
            if key not in checked:
                check_inputs(config)
                checked.add(key)
        except ValueError as e:
            raise ValueError(
                f"sweep trial {setting_label(t['setting'])} (seed {t['seed']}) would fail: {e}"
            ) from None


def trial_run(runs_root: Path, task: str, name: str) -> Path | None:
    """The run directory of trial ``name`` (``runs_root/<task>/<name>_<k>``), None before it
    started."""
    found = sorted((runs_root / task).glob(f"{name}_*")) if (runs_root / task).is_dir() else []
    return found[-1] if found else None


def run_trial(job: dict[str, Any]) -> dict[str, Any]:
    """Train (or resume) one trial; never raises: a failure is returned as its ``error``, a trial
    stopped by Ctrl-C or SIGTERM (checkpointed) as status ``interrupted``.

    Args:
        job: plain data: ``base`` (config dict), ``trial`` (setting, seed, name), ``runs_root``
            (an absolute path).

    Returns:
        ``{"name", "run", "status", "error"}``.
    """
    import torch

    from graphopt.train.trainer import RunAlreadyFinished, TrainingInterrupted, resume, train

    runs_root = Path(job["runs_root"])
    trial = job["trial"]
    out: dict[str, Any] = {"name": trial["name"], "run": None, "status": "failed", "error": None}
    try:
        config = _trial_config(job["base"], trial)
        torch.set_num_threads(config.threads)
        run = trial_run(runs_root, config.task, trial["name"])
        if run is None:
            run = train(config, runs_root=runs_root, show_progress=False, backend="dummy")
        else:
            with contextlib.suppress(RunAlreadyFinished):
                resume(run, show_progress=False, backend="dummy")
        out.update(run=str(run), status=rundir.read_state(run).get("status", "unknown"))
    except TrainingInterrupted as e:  # checkpointed; the sweep stops after it
        out.update(run=str(e.run), status="interrupted")
    except Exception as e:  # a failed trial is recorded; the others go on
        run = trial_run(runs_root, job["base"]["task"], trial["name"])
        out.update(
            run=None if run is None else str(run),
            error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
            traceback=traceback.format_exc(limit=6),
        )
    return out


def _run_on_tune(
    jobs: list[dict[str, Any]],
    workers: int,
    address: str | None,
    sweep_dir: Path,
    stop: rundir.StopRequest,
) -> list[dict[str, Any]]:
    """:func:`run_trial` of every job as a Ray Tune trial, at most ``workers`` at once; once
    ``stop`` is requested Tune starts no further trial and stops the running ones (status
    ``interrupted``: each resumes from its last checkpoint)."""
    import os

    from graphopt.distributed import connect

    ray = import_ray()
    try:
        from ray import tune
    except ImportError as e:
        from graphopt.distributed import INSTALL_HINT

        raise DependencyNotInstalled(f"sweeps on Ray need Ray Tune: {INSTALL_HINT}") from e
    os.environ.setdefault("RAY_CHDIR_TO_TRIAL_DIR", "0")  # trials keep the sweep's directory
    started = connect(address, num_cpus=None if address else max(workers, os.cpu_count() or 1))
    try:

        def trainable(param: dict[str, Any]) -> None:
            tune.report(run_trial(param["job"]))

        class StopOnSignal(tune.Stopper):  # Tune's experiment-wide stop, polled as it runs
            def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
                return False

            def stop_all(self) -> bool:
                return stop.requested

        tuner = tune.Tuner(
            tune.with_resources(trainable, {"cpu": 1}),
            param_space={"job": tune.grid_search(jobs)},
            tune_config=tune.TuneConfig(max_concurrent_trials=workers),
            run_config=tune.RunConfig(
                name="tune", storage_path=str(sweep_dir.resolve()), verbose=0, stop=StopOnSignal()
            ),
        )
        results = tuner.fit()
        by_name = {}
        for i in range(len(results)):
            result = results[i]
            metrics = result.metrics or {}
            if "name" in metrics:
                by_name[metrics["name"]] = {
                    k: metrics.get(k) for k in ("name", "run", "status", "error", "traceback")
                }
    finally:
        if started:
            ray.shutdown()
    out = []
    for job in jobs:  # a trial Tune lost (its worker died) counts as failed; resume reruns it
        name = job["trial"]["name"]
        if name in by_name:
            out.append(by_name[name])
        elif stop.requested:  # stopped by Tune, or never started
            run = trial_run(Path(job["runs_root"]), job["base"]["task"], name)
            if run is None:  # never started: as it was
                trial = job["trial"]
                out.append({"name": name, **{k: trial.get(k) for k in ("run", "status", "error")}})
            else:
                out.append({"name": name, "run": str(run), "status": "interrupted", "error": None})
        else:
            out.append(
                {"name": name, "run": None, "status": "failed", "error": "the Ray trial died"}
            )
    return out


def _val_speedup(run: str | None) -> float | None:
    if run is None:
        return None
    value = rundir.read_state(Path(run)).get("last_val_speedup")
    return None if value is None else float(value)


def summarize(trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per setting (in trial order): finished seeds, mean, standard deviation (ddof 1; 0 with one
    seed), min and max of the final validation speed-ups."""
    groups: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for t in trials:
        label = setting_label(t["setting"])
        groups.setdefault(label, [])
        counts[label] = counts.get(label, 0) + 1
        if t.get("status") == "finished" and t.get("val_speedup") is not None:
            groups[label].append(float(t["val_speedup"]))
    rows = []
    for label, values in groups.items():
        n = len(values)
        mean = sum(values) / n if n else math.nan
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
        rows.append(
            {
                "setting": label,
                "finished": f"{n}/{counts[label]}",
                "mean": mean,
                "std": std if n else math.nan,
                "min": min(values, default=math.nan),
                "max": max(values, default=math.nan),
            }
        )
    return rows


def _write_summary(sweep_dir: Path, trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Write the summary table and plot (they appear together, :class:`FileSet`); the rows."""
    rows = summarize(trials)
    with io.StringIO(newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["setting", "seed", "run", "status", "val_speedup"])
        for t in trials:
            writer.writerow(
                [
                    setting_label(t["setting"]),
                    t["seed"],
                    t.get("run"),
                    t.get("status"),
                    t.get("val_speedup"),
                ]
            )
        table = f.getvalue()
    png = _plot(trials, rows)
    files = FileSet(sweep_dir, "sweep directory")
    files.write(SUMMARY_CSV, table)
    files.write(SUMMARY_PNG, png)
    files.commit()
    return rows


def _plot(trials: list[dict[str, Any]], rows: list[dict[str, Any]]) -> bytes:
    """The summary plot, as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(rows)), 3.2))
    labels = [r["setting"] for r in rows]
    for i, label in enumerate(labels):
        values = [
            t["val_speedup"]
            for t in trials
            if setting_label(t["setting"]) == label and t.get("val_speedup") is not None
        ]
        ax.scatter([i] * len(values), values, color="tab:blue", alpha=0.6, s=18)
    ax.errorbar(
        range(len(rows)),
        [r["mean"] for r in rows],
        yerr=[r["std"] for r in rows],
        fmt="o",
        color="black",
        capsize=4,
        label="mean ± std over seeds",
    )
    ax.set_xticks(range(len(rows)), labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("validation speed-up (final model)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        return figure_bytes(fig, dpi=120)
    finally:
        plt.close(fig)


def sweep(
    config: TrainConfig | None = None,
    sets: dict[str, list[Any]] | None = None,
    seeds: int = 3,
    *,
    runs_root: str | Path = "runs",
    workers: int = 1,
    address: str | None = None,
    resume: str | Path | None = None,
    on_start: Any = None,
) -> tuple[Path, list[dict[str, Any]], list[dict[str, Any]]]:
    """Run a sweep (or continue the one at ``resume``); returns its directory, its trials
    (``setting``, ``seed``, ``name``, ``run``, ``status``, ``val_speedup``, ``error``) and the
    summary rows of :func:`summarize`.

    Raises:
        ValueError: a bad configuration or value, a trial that ``graphopt train`` would refuse
            (:func:`check_trials`; nothing is started then), ``resume`` that is not a sweep
            directory.
        SweepInterrupted: Ctrl-C or SIGTERM (module docstring); every trial's state is recorded.
    """
    check_workers(workers)
    if resume is not None:
        sweep_dir = Path(resume)
        if not (sweep_dir / SWEEP_FILE).is_file():
            raise ValueError(f"{sweep_dir} is not a sweep directory (no {SWEEP_FILE})")
        plan = json.loads((sweep_dir / SWEEP_FILE).read_text())
        base, trials, root = plan["base"], plan["trials"], Path(plan["runs_root"])
        check_trials(base, [t for t in trials if t.get("status") != "finished"], sweep_dir.name)
    else:
        assert config is not None and sets is not None
        config.validate()
        root = Path(runs_root).resolve()
        rundir.check_output_path(root, "runs directory", directory=True)
        trials = plan_trials(sets, seeds, config.seed)
        base = config.to_dict()
        check_trials(base, trials, config.name)  # every trial checked before any work
        sweep_dir = rundir.new_run_dir(root, "sweep", config.name, checkpoints=False)
        for i, t in enumerate(trials):
            t["name"] = f"{sweep_dir.name}-t{i}"
        plan_text = strict_json.dumps(
            {"base": base, "runs_root": str(root), "trials": trials}, indent=1
        )
        with rundir.removed_if_interrupted(sweep_dir):  # no plan yet: nothing to resume
            write_file(sweep_dir / SWEEP_FILE, plan_text)
    if on_start is not None:
        on_start(sweep_dir, len(trials))
    todo = [t for t in trials if t.get("status") != "finished"]
    jobs = [{"base": base, "trial": t, "runs_root": str(root)} for t in todo]
    with rundir.graceful_stop(STOP_NOTICE) as stop:  # a trial's training nests its own
        if uses_ray(workers, address):
            results = _run_on_tune(jobs, workers, address, sweep_dir, stop)
        else:
            results = []
            for job in jobs:
                if stop.requested:
                    break  # the trials left keep their state; resume starts them
                results.append(run_trial(job))
    for t, result in zip(todo, results, strict=False):  # fewer results once stopped
        t.update(run=result["run"], status=result["status"], error=result.get("error"))
        t["val_speedup"] = _val_speedup(result["run"]) if result["status"] == "finished" else None
    rundir.atomic_write_text(  # a second signal meanwhile leaves the old file or the new one
        sweep_dir / SWEEP_FILE,
        strict_json.dumps({"base": base, "runs_root": str(root), "trials": trials}, indent=1),
    )
    rows = _write_summary(sweep_dir, trials)
    if stop.requested and any(t.get("status") != "finished" for t in trials):
        raise SweepInterrupted(sweep_dir, trials, rows)  # (after the last step: done anyway)
    return sweep_dir, trials, rows
