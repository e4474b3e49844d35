"""Step-wise training runs: a YAML configuration, a run directory, the training and its report.

A run is configured by :class:`StepRunConfig` (what to train on and where to write) and the
hyper-parameters of :class:`graphopt.train.stepwise.StepTrainConfig`; a ``--config FILE.yaml``
sets any of both's keys (unknown keys are errors naming the key), command-line flags override it.
The run directory ``runs/placement-step/<name>_<k>/`` holds:

==================  =============================================================================
``config.yaml``     the whole configuration (safe YAML)
``progress.jsonl``  one JSON object per update (``imitation/*``, ``ppo/*``, ``train/*``) and per
                    validation (``val/speedup``: geometric mean over the validation graphs)
``policy.pt``       the last weights (also written when the run is interrupted)
``best.pt``         the weights of the best validation
``state.json``      ``status`` (``running``, ``finished``, ``interrupted``), decisions, seconds
==================  =============================================================================

Graphs come from :func:`graphopt.workloads.graph_cache.load_graphs` (built once, cached on disk),
references from :func:`graphopt.baselines.reference_cache.cached_best_placement` (cached by
fingerprints), so a second run starts in seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from graphopt.file_set import write_file
from graphopt.graph import CompGraph
from graphopt.hardware import DEFAULT_CLUSTER, Cluster, get_cluster
from graphopt.train.stepwise import Item, StepTrainConfig, make_item, train

TASK_DIR = "placement-step"
"""Runs go to ``runs/placement-step/``."""


@dataclass
class StepRunConfig:
    """What a step-wise run trains on and where it goes (hyper-parameters: ``train``)."""

    graphs: str = "suite:train-gen-small"
    """Training graphs: names, suite:NAME, files, gen:/torch:/pipedream: sources, comma list."""
    val_graphs: str = "suite:heldout-small"
    """Validation graphs (the best checkpoint by their greedy geometric mean)."""
    clusters: str = DEFAULT_CLUSTER
    """Cluster presets or files, comma-separated: every graph is trained on every cluster."""
    name: str = "step"
    """Run name: the directory is ``runs/placement-step/<name>_<k>``."""
    train: StepTrainConfig = field(default_factory=StepTrainConfig)
    """The hyper-parameters."""

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "train"}
        out.update(dataclasses.asdict(self.train))
        return out


RUN_KEYS = tuple(f.name for f in dataclasses.fields(StepRunConfig) if f.name != "train")
TRAIN_KEYS = tuple(f.name for f in dataclasses.fields(StepTrainConfig))


def load_step_config(path: str | Path | None = None, **overrides: Any) -> StepRunConfig:
    """The configuration of ``path`` (YAML, optional) with ``overrides`` (None: not given).

    Raises:
        ValueError: an unreadable file, a key that is neither a run nor a training key, a value
            of the wrong type or range (naming the key).
    """
    values: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        try:
            loaded = yaml.safe_load(p.read_text())
        except FileNotFoundError:
            raise ValueError(f"config file {path} does not exist") from None
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise ValueError(f"config file {path} is not readable YAML: {e}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ValueError(
                f"config file {path} must hold a mapping of keys, got {type(loaded).__name__}"
            )
        values.update(loaded)
    values.update({k: v for k, v in overrides.items() if v is not None})
    unknown = sorted(set(values) - set(RUN_KEYS) - set(TRAIN_KEYS))
    if unknown:
        raise ValueError(
            f"unknown step-wise config key(s) {', '.join(unknown)}; known: "
            f"{', '.join(RUN_KEYS + TRAIN_KEYS)}"
        )
    run = {k: values[k] for k in RUN_KEYS if k in values}
    hyper = {k: values[k] for k in TRAIN_KEYS if k in values}
    for key in RUN_KEYS:
        if key in run and not isinstance(run[key], str):
            raise ValueError(f"config key {key} must be a string, got {run[key]!r}")
    floats = {f.name for f in dataclasses.fields(StepTrainConfig) if f.type in ("float", float)}
    for key, value in hyper.items():
        if key in floats and isinstance(value, int) and not isinstance(value, bool):
            hyper[key] = float(value)
        if key == "policy" and not isinstance(value, dict):
            raise ValueError(
                f"config key policy must be a mapping of StepPolicy arguments, got {value!r}"
            )
        if key == "self_imitation" and not isinstance(value, bool):
            raise ValueError(f"config key self_imitation must be true or false, got {value!r}")
    config = StepRunConfig(**run, train=StepTrainConfig(**hyper))
    config.train.validate()
    return config


def resolve_clusters(spec: str) -> list[Cluster]:
    """The clusters of a comma-separated list of presets or files (ValueError naming a bad one)."""
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise ValueError("clusters: give at least one cluster preset or file")
    return [get_cluster(n) for n in names]


def resolve_run_graphs(spec: str) -> list[CompGraph]:
    """The graphs of ``spec``; suites and generated names through the disk cache."""
    from graphopt.workloads import list_suites
    from graphopt.workloads.graph_cache import load_graphs

    suites = list_suites()
    names: list[str] = []
    for part in (s.strip() for s in spec.split(",")):
        if not part:
            continue
        if part.startswith("suite:"):
            suite = part[len("suite:") :]
            if suite not in suites:
                raise ValueError(f"unknown suite {suite!r}; choose one of: {', '.join(suites)}")
            names.extend(suites[suite])
        else:
            names.append(part)
    if not names:
        raise ValueError(f"no graph in {spec!r}: the split is empty; name graphs or a suite")
    return load_graphs(names)


def build_items(
    graphs: Sequence[CompGraph],
    clusters: Sequence[Cluster],
    progress: Callable[[int, int], None] | None = None,
) -> list[Item]:
    """One :class:`Item` per (graph, cluster) pair (references cached on disk)."""
    items = []
    total = len(graphs) * len(clusters)
    for cluster in clusters:
        for graph in graphs:
            items.append(make_item(graph, cluster))
            if progress is not None:
                progress(len(items), total)
    return items


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so the run is saved either way (the
    main thread only: elsewhere signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_training(
    config: StepRunConfig,
    runs_root: str | Path = "runs",
    *,
    log: Callable[[str], None] = print,
) -> Path:
    """Train a step-wise policy as ``config`` says; returns the run directory (module docstring).

    Everything is checked (graphs, clusters, references) before the run directory is created.

    Raises:
        ValueError: a bad graph, suite or cluster; a graph the best heuristic cannot place.
        KeyboardInterrupt: on Ctrl-C or SIGTERM, after ``policy.pt`` and ``state.json``
            (``interrupted``) are written.
    """
    from graphopt import rundir

    rundir.check_run_name(config.name)
    start = time.perf_counter()
    clusters = resolve_clusters(config.clusters)
    graphs = resolve_run_graphs(config.graphs)
    val_graphs = resolve_run_graphs(config.val_graphs) if config.val_graphs else []
    log(
        f"building {len(graphs) * len(clusters)} training and {len(val_graphs) * len(clusters)} "
        "validation pairs (references cached on disk)"
    )
    items = build_items(graphs, clusters)
    val_items = build_items(val_graphs, clusters)
    setup = time.perf_counter() - start
    run = rundir.new_run_dir(runs_root, TASK_DIR, config.name, checkpoints=False)
    with rundir.removed_if_interrupted(run):  # stopped while set up: nothing to read, removed
        write_file(run / "config.yaml", yaml.safe_dump(config.to_dict(), sort_keys=False))
        rundir.write_state(run, status="running", setup_seconds=round(setup, 2))
    log(
        f"run: {run} (set-up {setup:.1f} s; {config.train.imitation_updates} imitation and "
        f"{config.train.updates} {config.train.algorithm} updates)"
    )

    def show(row: dict[str, float]) -> None:
        if "val/speedup" in row:
            log(
                f"update {int(row['update'])}: validation speed-up {row['val/speedup']:.4f}x "
                f"(min {row['val/min']:.3f}), {int(row['decisions']):,} decisions in "
                f"{row['seconds']:.0f} s"
            )

    try:
        with _sigterm_interrupts():
            _, rows = train(items, val_items, config.train, out_dir=run, log=show)
    except KeyboardInterrupt:
        rundir.write_state(run, status="interrupted")
        log(f"interrupted: {run / 'policy.pt'} holds the weights so far")
        raise
    last = rows[-1] if rows else {}
    vals = [r["val/speedup"] for r in rows if "val/speedup" in r]
    if not all(math.isfinite(v) for v in vals):  # pragma: no cover (geomean is finite or 0)
        raise AssertionError("validation speed-ups must be finite")
    rundir.write_state(
        run,
        status="finished",
        decisions=int(last.get("decisions", 0)),
        seconds=round(float(last.get("seconds", 0.0)), 2),
        best_val_speedup=max(vals) if vals else None,
        last_val_speedup=vals[-1] if vals else None,
    )
    return run
