"""Cost-model runs: train a :class:`~graphopt.costmodel.model.CostNet` into a run directory, and
score a run's model on a dataset.

A run lives in ``runs/costmodel/<name>_<k>/`` (numbered as PPO runs are, by
:func:`graphopt.rundir.new_run_dir`) and holds:

========================  ==============================================================
``config.yaml``           every argument of :func:`train_run`, the split, the data's sizes, the
                          feature layout and the network's ``NetLayout``
``state.json``            status (running, interrupted, crashed, finished), epochs done, best
                          validation tau and its epoch
``metrics.csv``           one row per epoch: the keys of :func:`graphopt.costmodel.fit.fit`'s
                          rows (``epoch``, ``train/loss``, ``val/kendall_tau``, ``val/opa``,
                          ``val/top{k}_error``, ``val/num_groups``, ``time``)
``model.pt``              the best epoch by validation tau so far
                          (:func:`graphopt.costmodel.fit.save_checkpoint`)
``test_metrics.json``     ranking metrics of the final model on the test configurations
========================  ==============================================================

Held-out data: without ``val_data``, a seeded random split of each graph's configurations
(:func:`graphopt.costmodel.data.split_samples`) into train, validation (``val_fraction``: picks
the best epoch) and test (``test_fraction``: scored once, in ``test_metrics.json``, and never
used for a choice, so its score is unbiased). With ``val_data``, all of ``data`` trains, ``val_data``
picks the epoch and ``test_data`` (if given) is scored; without ``test_data`` the validation set
is scored and ``test_metrics.json`` says so (``"scored_on": "val"``: slightly optimistic).

``config.yaml``, ``state.json``, ``model.pt`` and ``test_metrics.json`` are replaced atomically
(temporary name, then rename; ``metrics.csv`` is appended a row at a time), and ``model.pt`` is
written at the end of each improving epoch, so Ctrl-C leaves the best model so far and no
truncated checkpoint.
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from graphopt import rundir, strict_json
from graphopt.costmodel import fit as cm_fit
from graphopt.costmodel.data import DecisionConfigs, GraphSamples, load_dataset, split_samples
from graphopt.costmodel.losses import get_loss
from graphopt.costmodel.metrics import grouped_report, ranking_report
from graphopt.costmodel.model import CostNet
from graphopt.errors import CostModelInterrupted, InvalidArgument, check_integer
from graphopt.sim import PreparedGraph

TASK = rundir.COSTMODEL_TASK
"""Runs go to ``<runs_root>/costmodel/``."""
CONFIG_FILE = rundir.CONFIG_FILE
STATE_FILE = rundir.STATE_FILE
METRICS = rundir.METRICS
MODEL = rundir.COSTMODEL_FILE
TEST_METRICS = "test_metrics.json"
MAX_EPOCHS = 1_000_000
"""The most epochs a run takes (:func:`train_run`)."""
MAX_BATCH_SIZE = 4096
"""The most configurations per batch (training and scoring): a batch's activations are
configurations x ops x ``hidden`` floats, 2.5 GB at this bound for a 2,400-op graph of width 64."""
MAX_HIDDEN = 4096
"""The widest node embedding."""
MAX_LAYERS = 64
"""The most GraphSAGE layers."""
MAX_LR = 10.0
"""The largest learning rate (an infinite one makes every weight NaN)."""
MAX_SECONDS = 30 * 86_400
"""The longest ``time_budget``: 30 days."""


# ---------------------------------------------------------------------- run directory
def new_run(runs_root: str | Path, name: str) -> Path:
    """Create ``runs_root/costmodel/<name>_<k>`` with the next free ``k``."""
    return rundir.new_run_dir(runs_root, TASK, name, checkpoints=False)  # model.pt only


def write_json(path: Path, data: Any) -> None:
    rundir.atomic_write_text(path, strict_json.dumps(data, indent=2))


class EpochLog:
    """Appends ``fit``'s epoch rows to ``metrics.csv``; the first row fixes the columns."""

    def __init__(self, run: Path) -> None:
        self.path = run / METRICS
        self.columns: list[str] | None = None

    def write(self, row: dict[str, float]) -> None:
        new = self.columns is None
        if self.columns is None:
            self.columns = list(row)
        with self.path.open("a", newline="") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(self.columns)
            writer.writerow([row.get(c, "") for c in self.columns])


# ---------------------------------------------------------------------- training
def _check_arguments(
    loss: str,
    epochs: int,
    batch_size: int,
    lr: float,
    hidden: int,
    layers: int,
    test_fraction: float,
    val_fraction: float,
    time_budget: float | None,
) -> None:
    get_loss(loss)
    for key, value, low, high in (
        ("epochs", epochs, 1, MAX_EPOCHS),
        ("batch_size", batch_size, 2, MAX_BATCH_SIZE),
        ("hidden", hidden, 1, MAX_HIDDEN),
        ("layers", layers, 0, MAX_LAYERS),
    ):
        check_integer(value, key, low, high)
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr <= MAX_LR:
        raise InvalidArgument(
            "{lr} must be a number in (0, {high:g}], got {got!r}", high=MAX_LR, got=lr
        )
    for key, fraction in (("test_fraction", test_fraction), ("val_fraction", val_fraction)):
        if not 0.0 < fraction < 1.0:
            raise InvalidArgument(f"{{{key}}} must lie in (0, 1), got {{got}}", got=fraction)
    if test_fraction + val_fraction >= 1.0:
        raise InvalidArgument(
            "{test_fraction} + {val_fraction} must be < 1 (nothing left to train on), got "
            "{test} + {val}",
            test=test_fraction,
            val=val_fraction,
        )
    if time_budget is not None and not 0 < time_budget <= MAX_SECONDS:
        raise InvalidArgument(
            "{time_budget} must be in (0, {high}] seconds, got {got}",
            high=MAX_SECONDS,
            got=time_budget,
        )


def train_run(
    data: str | Path,
    *,
    val_data: str | Path | None = None,
    test_data: str | Path | None = None,
    test_fraction: float = 0.2,
    val_fraction: float = 0.1,
    loss: str = "listmle",
    epochs: int = 10,
    batch_size: int = 32,
    lr: float = 1e-3,
    hidden: int = 64,
    layers: int = 3,
    seed: int = 0,
    time_budget: float | None = None,
    name: str = "cost",
    runs_root: str | Path = "runs",
    on_epoch: Callable[[dict[str, float]], None] | None = None,
) -> Path:
    """Train a cost model on ``data`` into a new run directory (see the module docstring).

    Args:
        data: a dataset directory, a sample ``.npz`` or a TpuGraphs ``.npz``
            (:func:`graphopt.costmodel.data.load_dataset`).
        val_data: validation data of the same layout (picks the best epoch); default:
            ``val_fraction`` of each graph's configurations, split with ``seed``.
        test_data: test data of the same layout, scored in ``test_metrics.json``; default
            (without ``val_data``): ``test_fraction`` of each graph's configurations.
        loss: a name of :data:`graphopt.costmodel.losses.LOSSES`.
        epochs, batch_size, lr: as :func:`graphopt.costmodel.fit.fit`.
        hidden, layers: the network's width and GraphSAGE layers
            (:func:`graphopt.costmodel.fit.net_layout`).
        seed: seeds the split, the initial parameters and the batch order.
        time_budget: stop after the epoch during which this many seconds have passed.
        name: run name (letters, digits, ``.``, ``_``, ``-``).
        runs_root: the run goes to ``runs_root/costmodel/<name>_<k>``.
        on_epoch: called with each epoch's row after it is logged and checkpointed.

    Returns:
        the run directory.

    Raises:
        ValueError: a bad argument or dataset (nothing is created then).
        CostModelInterrupted: after Ctrl-C, once the run is marked interrupted.
    """
    _check_arguments(
        loss, epochs, batch_size, lr, hidden, layers, test_fraction, val_fraction, time_budget
    )
    if test_data is not None and val_data is None:
        raise InvalidArgument("{test_data} needs {val_data} (without it, both are split off data)")
    # ---- data: everything is loaded and checked before the run directory exists
    samples = load_dataset(data)
    test: list[GraphSamples] | None
    if val_data is not None:
        train, held_out = samples, load_dataset(val_data)
        test = load_dataset(test_data) if test_data is not None else None
        split: dict[str, Any] = {
            "val_data": str(val_data),
            "test_data": None if test_data is None else str(test_data),
        }
    else:
        rest, test = split_samples(samples, test_fraction, seed)
        train, held_out = split_samples(rest, val_fraction / (1.0 - test_fraction), seed + 1)
        split = {"test_fraction": test_fraction, "val_fraction": val_fraction, "seed": seed}
    features = cm_fit.feature_layout(train + held_out + (test or []))
    layout = cm_fit.net_layout(features, hidden=hidden, layers=layers)
    torch.manual_seed(seed)
    net = CostNet(layout)

    # ---- run directory
    config = {
        "data": str(data),
        "val_data": None if val_data is None else str(val_data),
        "test_data": None if test_data is None else str(test_data),
        "test_fraction": test_fraction,
        "val_fraction": val_fraction,
        "loss": loss,
        "epochs": epochs,
        "batch_size": batch_size,
        "lr": lr,
        "hidden": hidden,
        "layers": layers,
        "seed": seed,
        "time_budget": time_budget,
        "name": name,
        "runs_root": str(runs_root),
        "split": split,
        "dataset": {
            "graphs": len(train),
            "train_configs": sum(s.num_configs for s in train),
            "val_configs": sum(s.num_configs for s in held_out),
            "test_configs": sum(s.num_configs for s in test or held_out),
        },
        "features": features,
        "net": layout.to_dict(),
    }
    run = new_run(runs_root, name)
    with rundir.removed_if_interrupted(run):  # stopped while set up: nothing to read, removed
        rundir.atomic_write_text(run / CONFIG_FILE, yaml.safe_dump(config, sort_keys=False))
        rundir.write_state(run, status="running", epochs=0)

    # ---- learn; every improving epoch replaces model.pt
    log = EpochLog(run)
    best = {"tau": -math.inf, "epoch": 0}
    done = 0

    def record(row: dict[str, float]) -> None:
        nonlocal done
        done = int(row["epoch"])
        log.write(row)
        tau = row.get("val/kendall_tau", -math.inf)
        if tau > best["tau"]:  # the rule fit uses to keep its best parameters
            best.update(tau=tau, epoch=done)
            cm_fit.save_checkpoint(run / MODEL, net, features, epoch=done, val_kendall_tau=tau)
        rundir.write_state(
            run, epochs=done, best_epoch=int(best["epoch"]), best_val_kendall_tau=best["tau"]
        )
        if on_epoch is not None:
            on_epoch(row)

    try:
        cm_fit.fit(
            net,
            train,
            held_out,
            loss=loss,
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            time_budget=time_budget,
            on_epoch=record,
        )
    except (Exception, KeyboardInterrupt) as e:  # Ctrl-C in a numba kernel surfaces as SystemError
        if rundir.is_interrupt(e):
            rundir.write_state(run, status="interrupted", epochs=done)
            saved = run / MODEL if (run / MODEL).exists() else None
            raise CostModelInterrupted(run, done, saved) from None
        rundir.write_state(run, status="crashed", epochs=done, error=f"{type(e).__name__}: {e}")
        raise

    # ---- final model (fit restored the best epoch's parameters) and its held-out score
    cm_fit.save_checkpoint(
        run / MODEL, net, features, epoch=int(best["epoch"]), val_kendall_tau=best["tau"]
    )
    scored_on = "test" if test is not None else "val"
    report = cm_fit.evaluate(net, test if test is not None else held_out)
    write_json(
        run / TEST_METRICS,
        {"held_out": split, "scored_on": scored_on, "best_epoch": int(best["epoch"]), **report},
    )
    rundir.write_state(run, status="finished", epochs=done)
    return run


# ---------------------------------------------------------------------- evaluation
def evaluate_run(run: str | Path, data: str | Path, batch_size: int = 256) -> dict[str, Any]:
    """Score a run's model on every configuration of ``data``.

    Returns:
        ``{"model", "data", "mean", "graphs", "throughput"}`` and, for a model with an analytic
        prior (graphopt decisions), ``"prior"``: the same averages for the prior alone (what the
        network adds to it is the difference). ``mean`` the per-graph averages of
        :func:`graphopt.costmodel.metrics.ranking_report` (plus ``num_groups``), ``graphs`` one
        row per graph (``graph``, ``configs`` and the report), ``throughput`` the configurations
        per second of the model (``batch_size`` per forward pass, features included) and, for
        graphopt datasets, of the simulator on the same decisions
        (:meth:`graphopt.sim.PreparedGraph.evaluate_batch`); both include the per-graph setup
        and exclude a first, untimed warm-up call (compilation).

    Raises:
        ValueError: no model at ``run``, nothing to load at ``data``, or a model trained on
            another feature layout than ``data``'s.
    """
    check_integer(batch_size, "batch_size", 1, MAX_BATCH_SIZE)
    model_path = rundir.resolve_cost_model(run)
    samples = [s for s in load_dataset(data) if s.num_configs > 0]
    if not samples:
        raise ValueError(f"{data}: no graph has a valid configuration to score")
    net, _ = cm_fit.load_checkpoint(model_path, expect=cm_fit.feature_layout(samples))
    torch_threads = torch.get_num_threads()

    # ---- ranking metrics and the model's throughput
    cm_fit.predict(net, samples[0].subset(np.arange(1)))  # warm-up
    preds, rows, seconds = [], [], 0.0
    for s in samples:
        start = time.perf_counter()
        p = cm_fit.predict(net, s, batch_size=batch_size)
        seconds += time.perf_counter() - start
        preds.append(p)
        rows.append({"graph": s.name, "configs": s.num_configs, **ranking_report(p, s.runtime)})
    groups = np.concatenate([np.full(s.num_configs, i) for i, s in enumerate(samples)])
    mean = grouped_report(
        np.concatenate(preds), np.concatenate([s.runtime for s in samples]), groups
    )
    total = sum(s.num_configs for s in samples)
    throughput: dict[str, Any] = {
        "configs": total,
        "batch_size": batch_size,
        "torch_threads": torch_threads,
        "model_seconds": seconds,
        "model_configs_per_second": total / max(seconds, 1e-12),
    }
    sim_seconds = simulator_seconds(samples)
    if sim_seconds is not None:
        throughput["simulator_seconds"] = sim_seconds
        throughput["simulator_configs_per_second"] = total / max(sim_seconds, 1e-12)
    result = {
        "model": str(model_path),
        "data": str(data),
        "mean": mean,
        "graphs": rows,
        "throughput": throughput,
    }
    if net.layout.prior_column >= 0:  # what the network adds to its analytic estimate
        prior = [
            s.configs.summary(np.arange(s.num_configs))[:, net.layout.prior_column] for s in samples
        ]
        result["prior"] = grouped_report(
            np.concatenate(prior), np.concatenate([s.runtime for s in samples]), groups
        )
    return result


def simulator_seconds(samples: list[GraphSamples]) -> float | None:
    """Seconds the simulator takes for all decisions of ``samples`` (batched, per-graph setup
    included); ``None`` when the samples are not graphopt decisions (TpuGraphs)."""
    if not all(isinstance(s.configs, DecisionConfigs) and s.graph is not None for s in samples):
        return None
    first = samples[0]
    assert first.graph is not None and first.cluster is not None
    c0 = first.configs
    assert isinstance(c0, DecisionConfigs)
    PreparedGraph(first.graph, first.cluster).evaluate_batch(  # warm-up (compilation)
        c0.placement[:1], c0.priority[:1], c0.fusion[:1]
    )
    seconds = 0.0
    for s in samples:
        c = s.configs
        assert isinstance(c, DecisionConfigs) and s.graph is not None and s.cluster is not None
        start = time.perf_counter()
        PreparedGraph(s.graph, s.cluster).evaluate_batch(c.placement, c.priority, c.fusion)
        seconds += time.perf_counter() - start
    return seconds
