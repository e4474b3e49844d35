"""Training the per-op runtime model (:class:`graphopt.op_model.OpModel`) on measured op times.

:func:`fit_op_model` fits gradient-boosted trees (LightGBM, its native ``lightgbm.train`` API)
on every op of ``graphs`` that has a finite measured time for the kind of one of ``devices``
(``graph.measured[kind]``, written by ``graphopt profile``), ``source`` ops excepted. The target
is the log of the measured time over the op's roofline time plus the device's launch overhead
(:mod:`graphopt.op_model` gives the features and why). Squared error on that log ratio, each op
weighted by the square root of its measured time: a relative error on every op, with the ops that
take the step's time counting more.

:func:`op_errors` scores a model on measured ops: every op's relative error
``(predicted - measured) / measured``, ``NaN`` where the model cannot price the op.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphopt.errors import InvalidArgument
from graphopt.graph import CompGraph
from graphopt.hardware import Device
from graphopt.op_classes import SOURCE
from graphopt.op_model import CATEGORICAL, FEATURES, OpModel, op_features, roofline_seconds
from graphopt.sim.calibrate import source_of

PARAMS: dict[str, Any] = {
    "objective": "regression",
    "learning_rate": 0.05,
    "num_leaves": 15,
    "min_data_in_leaf": 10,
    "feature_fraction": 0.9,
    "lambda_l2": 1.0,
    "cat_smooth": 10.0,
    "min_data_per_group": 5,
    "num_threads": 1,
    "deterministic": True,
    "force_row_wise": True,
    "seed": 0,
    "verbose": -1,
}
"""LightGBM parameters of :func:`fit_op_model` (small trees, one thread, deterministic)."""

ROUNDS = 300
"""Boosting rounds."""
MAX_ROUNDS = 10_000
"""The most boosting rounds: each adds a tree to the model (and its file); a model stops improving
long before (``graphopt costmodel ops train --rounds`` names this range)."""


@dataclass(frozen=True)
class OpRows:
    """Measured ops as training rows.

    Attributes:
        x: ``float64 [M, F]`` features; seconds: ``[M]`` measured; base: ``[M]`` roofline plus
            overhead; graph / op: where each row comes from (a graph's index in the list given,
            the op's index); family: its graph's :func:`~graphopt.sim.calibrate.source_of`.
    """

    x: np.ndarray
    seconds: np.ndarray
    base: np.ndarray
    graph: np.ndarray
    op: np.ndarray
    family: np.ndarray


def measured_devices(graphs: Sequence[CompGraph], devices: Sequence[Device]) -> list[Device]:
    """The devices (one per kind, first wins) whose kind some graph has measured times for.

    Raises:
        ValueError: none of them.
    """
    kinds = {kind for g in graphs for kind in g.measured}
    chosen = list({d.kind: d for d in reversed(devices) if d.kind in kinds}.values())[::-1]
    if not chosen:
        raise ValueError(
            f"no graph has measured times for the device kind(s) "
            f"{', '.join(sorted({d.kind for d in devices}))} (they have: "
            f"{', '.join(sorted(kinds)) or 'none'}); profile them with graphopt profile, or give "
            "the cluster the graphs were profiled on"
        )
    return chosen


def op_rows(
    graphs: Sequence[CompGraph],
    devices: Sequence[Device],
    types: Mapping[str, int],
    classes: Mapping[str, int],
) -> OpRows:
    """Every measured, non-source op of ``graphs`` on each of ``devices`` (by kind) as a row."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("x", "t", "b", "g", "o", "f")}
    for gi, graph in enumerate(graphs):
        for device in devices:
            times = graph.measured.get(device.kind)
            if times is None:
                continue
            use = np.isfinite(times) & (times > 0) & (np.asarray(graph.op_classes) != SOURCE)
            if not use.any():
                continue
            parts["x"].append(op_features(graph, device, types, classes)[use])
            parts["t"].append(np.asarray(times)[use])
            base = roofline_seconds(graph, device) + device.launch_overhead
            parts["b"].append(base[use])
            parts["g"].append(np.full(int(use.sum()), gi))
            parts["o"].append(np.flatnonzero(use))
            parts["f"].append(np.full(int(use.sum()), source_of(graph), dtype=object))
    if not parts["x"]:
        empty = np.empty(0)
        return OpRows(np.empty((0, len(FEATURES))), empty, empty, empty, empty, empty)
    return OpRows(*(np.concatenate(parts[k]) for k in ("x", "t", "b", "g", "o", "f")))


def fit_op_model(
    graphs: Sequence[CompGraph],
    devices: Sequence[Device],
    *,
    rounds: int = ROUNDS,
    metadata: Mapping[str, Any] | None = None,
) -> OpModel:
    """Fit a per-op model on the measured ops of ``graphs`` on ``devices`` (module docstring).

    Raises:
        ValueError: no device has measured ops in the graphs, fewer than 20 measured ops, or
            ``rounds`` outside 1..:data:`MAX_ROUNDS` (:class:`~graphopt.errors.InvalidArgument`).
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS:
        raise InvalidArgument(
            "{rounds} must be an integer in 1..{high}, got {got!r}", high=MAX_ROUNDS, got=rounds
        )
    chosen = measured_devices(graphs, devices)
    # Only op types with measured ops get a code: any other type falls back to the roofline.
    types = sorted(
        {
            t
            for g in graphs
            for d in chosen
            if d.kind in g.measured
            for t, c, ok in zip(
                g.op_types, g.op_classes, np.isfinite(g.measured[d.kind]), strict=True
            )
            if ok and c != SOURCE
        }
    )
    classes = sorted({c for g in graphs for c in g.op_classes})
    type_codes = {t: i for i, t in enumerate(types)}
    rows = op_rows(graphs, chosen, type_codes, {c: i for i, c in enumerate(classes)})
    if len(rows.seconds) < 20:
        raise ValueError(
            f"only {len(rows.seconds)} measured op(s) to train on; the op model needs at least "
            "20 (profile more graphs with graphopt profile)"
        )
    import lightgbm as lgb

    target = np.log(rows.seconds / rows.base)
    weight = np.sqrt(rows.seconds / rows.seconds.mean())
    data = lgb.Dataset(
        rows.x,
        target,
        weight=weight,
        feature_name=list(FEATURES),
        categorical_feature=list(CATEGORICAL),
        params={"verbose": -1},
        free_raw_data=True,
    )
    booster = lgb.train(PARAMS, data, num_boost_round=rounds)
    log_roofline = rows.x[:, FEATURES.index("log_roofline")]
    ranges = {}
    for code, name in enumerate(types):
        mine = rows.x[:, 0] == code
        ranges[name] = (
            float(log_roofline[mine].min()),
            float(log_roofline[mine].max()),
            len(set(rows.family[mine])),
        )
    info = {
        "graphs": [g.name for g in graphs],
        "families": sorted(set(rows.family)),
        "ops": len(rows.seconds),
        "rounds": rounds,
        **dict(metadata or {}),
    }
    return OpModel(
        kinds=tuple(d.kind for d in chosen),
        types=tuple(types),
        classes=tuple(classes),
        booster_text=booster.model_to_string(),
        ranges=ranges,
        metadata=info,
    )


def op_errors(model: OpModel, graph: CompGraph, device: Device) -> np.ndarray:
    """``float64 [N]``: every op's relative error ``(predicted - measured) / measured`` on
    ``device``; ``NaN`` where the op has no measured time or the model cannot price it."""
    times = graph.measured.get(device.kind)
    if times is None:
        return np.full(graph.num_ops, np.nan)
    predicted = model.predict(graph, device)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(times > 0, (predicted - times) / times, np.nan)
