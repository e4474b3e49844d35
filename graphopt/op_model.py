"""A learned per-op runtime model: the features it reads, its file, and its predictions.

The simulator prices an op on a device by its measured time for the device's kind, else by the
roofline (rule 3 of :mod:`graphopt.sim`). A cluster with ``op_times: learned`` and
``op_model: FILE`` (:mod:`graphopt.hardware`) takes the time of every op **without** a measured
time from an :class:`OpModel` instead, where the model can price it: the device's kind is one
the model was trained on and the op's type is one it has seen. Every other op keeps the roofline
(with the device's efficiency table, if any).

Features (:data:`OP_FEATURE_VERSION`, :data:`FEATURES`), one row per (op, device):

- the op's type and class (categorical, coded by the model's own vocabulary);
- ``log1p`` of its FLOPs, bytes accessed, output bytes and parameter bytes, its arithmetic
  intensity ``flops / bytes``, its roofline time on the device (``max(flops / peak, bytes /
  bandwidth)``, no efficiency, no overhead) in log seconds;
- its shapes (:mod:`graphopt.shapes`): outputs and tensor arguments, rank and ``log1p`` of the
  element count of the first output, the first four dims of the first output and of its first
  two arguments (``NaN`` where unknown or absent), the bytes per element of the first output;
- the device: log peak FLOP/s, log memory bandwidth, launch overhead in microseconds.

What it prices: an op of a type measured in at least :data:`MIN_FAMILIES` model families, whose
roofline time lies within the measured range of its type widened by ``exp(``:data:`MARGIN```)``
either way; a tree does not extrapolate, so an op unlike any measured one keeps the roofline.

Target: the op's time in log seconds, minus the log of its roofline time plus the device's launch
overhead (a tree model cannot extrapolate, a ratio to the roofline can: an op of a size never
measured keeps its roofline's scaling). Prediction: ``exp(prediction) * (roofline + overhead)``,
a finite number of seconds at most :data:`MAX_OP_SECONDS` (more is refused: a damaged model).

File (``graphopt-op-model``, JSON): ``version``, ``op_feature_version``, ``kinds`` (the device
kinds trained on), ``types`` and ``classes`` (the categorical codes), ``features`` (their names,
checked on load), ``ranges`` (per op type: the smallest and largest ``log_roofline`` measured
and the number of model families it was measured in), ``booster`` (LightGBM's own text model,
checked field by field by :mod:`graphopt.booster_text` and given to LightGBM in a canonical form:
no code runs on load, a damaged model is one line naming the file) and ``metadata`` (what it was trained on and its scores). A file of another
``op_feature_version`` is refused naming both versions. Train one with
``graphopt costmodel ops train`` (:mod:`graphopt.costmodel.op_fit`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graphopt import strict_json
from graphopt.booster_text import read_booster
from graphopt.file_set import write_file
from graphopt.graph import CompGraph
from graphopt.hardware import Device
from graphopt.op_classes import SOURCE
from graphopt.shapes import DTYPE_BYTES
from graphopt.weights import pickle_refusal

FORMAT_NAME = "graphopt-op-model"
FORMAT_VERSION = 1
OP_FEATURE_VERSION = 1
"""Bumped whenever :func:`op_features` changes: a model reads only the features it was fit on."""

TRAIN_COMMAND = "graphopt costmodel ops train GRAPH... --cluster CLUSTER.yaml -o MODEL.json"
"""The command that trains a model (named by the errors that need one)."""

MIN_FAMILIES = 2
"""Model families an op type must be measured in for the model to price it."""
MARGIN = 0.5
"""How far (in log seconds of roofline time) outside its type's measured range an op is priced."""

_DIMS = 4
FEATURES: tuple[str, ...] = (
    "type",
    "class",
    "log_flops",
    "log_bytes",
    "log_output_bytes",
    "log_param_bytes",
    "log_intensity",
    "log_roofline",
    "outputs",
    "inputs",
    "out_rank",
    "out_log_numel",
    *(f"out_dim{k}" for k in range(_DIMS)),
    *(f"in0_dim{k}" for k in range(_DIMS)),
    *(f"in1_dim{k}" for k in range(_DIMS)),
    "itemsize",
    "log_peak_flops",
    "log_bandwidth",
    "launch_us",
)
"""Column names of :func:`op_features`, in order."""
CATEGORICAL = (0, 1)
"""Columns of :data:`FEATURES` that are categorical codes (type, class)."""


def roofline_seconds(graph: CompGraph, device: Device) -> np.ndarray:
    """``float64 [N]``: every op's plain roofline time on ``device`` (no efficiency, no overhead),
    at least one nanosecond (the model's target is a log ratio to it)."""
    seconds = np.maximum(
        graph.flops / device.peak_flops, graph.bytes_accessed / device.mem_bandwidth
    )
    return np.maximum(seconds, 1e-9)


def _dims(shape: Sequence[int] | None) -> list[float]:
    if shape is None:
        return [math.nan] * _DIMS
    dims = [float(d) for d in shape[:_DIMS]]
    return [math.log1p(d) for d in dims] + [math.nan] * (_DIMS - len(dims))


def op_features(
    graph: CompGraph, device: Device, types: Mapping[str, int], classes: Mapping[str, int]
) -> np.ndarray:
    """``float64 [N, F]``: the features of :data:`FEATURES` of every op of ``graph`` on
    ``device``; ``types``/``classes`` code the categorical columns (``NaN`` for a name not in
    them: LightGBM's missing value)."""
    n = graph.num_ops
    x = np.full((n, len(FEATURES)), np.nan)
    x[:, 0] = [types.get(t, math.nan) for t in graph.op_types]
    x[:, 1] = [classes.get(c, math.nan) for c in graph.op_classes]
    x[:, 2] = np.log1p(graph.flops)
    x[:, 3] = np.log1p(graph.bytes_accessed)
    x[:, 4] = np.log1p(graph.output_bytes)
    x[:, 5] = np.log1p(graph.param_bytes)
    x[:, 6] = np.log1p(graph.flops / np.maximum(graph.bytes_accessed, 1.0))
    x[:, 7] = np.log(roofline_seconds(graph, device))
    x[:, -3] = math.log(device.peak_flops)
    x[:, -2] = math.log(device.mem_bandwidth)
    x[:, -1] = device.launch_overhead * 1e6
    start = FEATURES.index("outputs")
    for u in range(n):
        shapes = graph.output_shapes[u] if graph.output_shapes else None
        dtypes = graph.output_dtypes[u] if graph.output_dtypes else None
        inputs = graph.input_shapes[u] if graph.input_shapes else None
        row = x[u]
        if shapes is not None:
            row[start] = len(shapes)
            if shapes:
                row[start + 2] = len(shapes[0])
                row[start + 3] = math.log1p(math.prod(shapes[0]))
                row[start + 4 : start + 4 + _DIMS] = _dims(shapes[0])
        if inputs is not None:
            row[start + 1] = len(inputs)
            for k in range(2):
                at = start + 4 + (k + 1) * _DIMS
                row[at : at + _DIMS] = _dims(inputs[k] if k < len(inputs) else None)
        if dtypes:
            row[start + 4 + 3 * _DIMS] = DTYPE_BYTES[dtypes[0]]
    return x


MAX_OP_SECONDS = 3600.0
"""The largest time the model may predict for one op, in seconds: an op that ``graphopt profile``
measures runs for micro- to milliseconds, and the model prices only ops whose roofline time lies
near the measured ones, so an hour per op means a damaged model (leaves that pass
:data:`MAX_LOG_RATIO` can still multiply the roofline by ``exp(689)``). :meth:`OpModel.predict`
refuses it."""

MAX_LOG_RATIO = 690.0
"""The largest prediction, in log seconds over the roofline, a model's trees can add up to (the
sum over trees of their largest leaf): ``exp`` of more overflows a float64. A trained model stays
far below; a larger bound means a damaged file."""


def check_booster(text: str, source: str) -> str:
    """LightGBM's text model ``text`` checked field by field for :data:`FEATURES`
    (:func:`graphopt.booster_text.read_booster`), its trees' largest leaves adding up to at most
    :data:`MAX_LOG_RATIO`; returns the canonical text LightGBM is given.

    Raises:
        ValueError: one line starting with ``source`` and naming the key ``booster``.
    """
    again = f"train the model again with {TRAIN_COMMAND}"
    try:
        booster = read_booster(text, FEATURES)
    except ValueError as e:
        raise ValueError(f"{source}: 'booster': {e}; {again}") from None
    if booster.largest_sum > MAX_LOG_RATIO:
        raise ValueError(
            f"{source}: 'booster': its trees' largest leaves add up to {booster.largest_sum:.4g} "
            f"log seconds over the roofline (at most {MAX_LOG_RATIO:g}: exp of more is not a "
            f"number); {again}"
        )
    return booster.text


@dataclass(frozen=True)
class OpModel:
    """A trained per-op runtime model (module docstring).

    Attributes:
        kinds: device kinds it was trained on (it prices ops on these only).
        types / classes: op types and classes seen in training, in code order.
        booster_text: the LightGBM model, as LightGBM writes it.
        metadata: what it was trained on, and its scores.
    """

    kinds: tuple[str, ...]
    types: tuple[str, ...]
    classes: tuple[str, ...]
    booster_text: str
    ranges: Mapping[str, tuple[float, float, int]] = field(default_factory=dict)
    """Per op type: smallest and largest ``log_roofline`` measured, and its model families."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    source: str = field(default="op model", compare=False)
    """How errors name the model (its file, when loaded)."""

    @property
    def type_codes(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.types)}

    @property
    def class_codes(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.classes)}

    def booster(self) -> Any:
        """The LightGBM booster (parsed once per model)."""
        cached = _BOOSTERS.get(id(self))
        if cached is None or cached[0] is not self:
            import lightgbm

            text = check_booster(self.booster_text, self.source)  # LightGBM trusts its input
            try:
                cached = (self, lightgbm.Booster(model_str=text))
            except lightgbm.basic.LightGBMError as e:
                raise ValueError(
                    f"{self.source}: 'booster' is not a model LightGBM can read ({e}); train the "
                    f"model again with {TRAIN_COMMAND}"
                ) from None
            _BOOSTERS[id(self)] = cached
        return cached[1]

    def predict(self, graph: CompGraph, device: Device) -> np.ndarray:
        """``float64 [N]``: every op's predicted seconds on ``device``; ``NaN`` where the model
        cannot price it (a device kind or op type it was not trained on, a ``source`` op).

        Raises:
            ValueError: a prediction is not a finite number of seconds at most
                :data:`MAX_OP_SECONDS` (a damaged model; one line naming its file and the op).
        """
        n = graph.num_ops
        out = np.full(n, np.nan)
        if device.kind not in self.kinds or n == 0:
            return out
        x = op_features(graph, device, self.type_codes, self.class_codes)
        known = ~np.isnan(x[:, 0]) & (np.asarray(graph.op_classes) != SOURCE)
        roofline = x[:, FEATURES.index("log_roofline")]
        for u in np.flatnonzero(known):
            low, high, families = self.ranges.get(graph.op_types[u], (math.inf, -math.inf, 0))
            if families < MIN_FAMILIES or not low - MARGIN <= roofline[u] <= high + MARGIN:
                known[u] = False
        if not known.any():
            return out
        ratio = self.booster().predict(x[known])
        base = roofline_seconds(graph, device)[known] + device.launch_overhead
        with np.errstate(over="ignore", invalid="ignore"):  # checked below, in one line
            seconds = np.exp(ratio) * base
        bad = ~(np.isfinite(seconds) & (seconds <= MAX_OP_SECONDS))
        if bad.any():
            first = int(np.argmax(bad))
            op = graph.op_names[int(np.flatnonzero(known)[first])]
            got = (
                f"{seconds[first]:.4g} s, above the bound of {MAX_OP_SECONDS:g} s per op"
                if np.isfinite(seconds[first])
                else "a time that is not a finite number"
            )
            raise ValueError(
                f"{self.source}: predicts {got} for op {op!r} on {device.kind} (log ratio "
                f"{ratio[first]:.4g} over the roofline); train the model again with "
                f"{TRAIN_COMMAND}"
            )
        out[known] = seconds
        return out

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "op_feature_version": OP_FEATURE_VERSION,
            "features": list(FEATURES),
            "kinds": list(self.kinds),
            "types": list(self.types),
            "classes": list(self.classes),
            "ranges": {t: list(r) for t, r in self.ranges.items()},
            "metadata": dict(self.metadata),
            "booster": self.booster_text,
        }

    def save(self, path: str | Path) -> Path:
        """Write the model file, whole or not at all (:func:`graphopt.file_set.write_file`).

        Raises:
            ValueError: the file cannot be written (one line naming it).
        """
        return write_file(path, strict_json.dumps(self.to_json_dict()))

    @classmethod
    def from_json_dict(cls, data: Any, source: str) -> OpModel:
        """Parse a model file's dict.

        Raises:
            ValueError: not an op model file, another format or op-feature version (both named),
                or a missing or malformed key (one line naming the file and the key; the booster
                checked by :func:`check_booster`).
        """
        if not isinstance(data, Mapping) or data.get("format") != FORMAT_NAME:
            raise ValueError(
                f'{source}: not an op model file (expected "format": "{FORMAT_NAME}"); train one '
                f"with {TRAIN_COMMAND}"
            )
        for key, version in (
            ("version", FORMAT_VERSION),
            ("op_feature_version", OP_FEATURE_VERSION),
        ):
            value = data.get(key)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(
                    f"{source}: {key!r} must be the integer {version} (a JSON number, not a "
                    f"string), got {json.dumps(value)[:40]}"
                )
        got = data.get("op_feature_version")
        if data.get("version") != FORMAT_VERSION or got != OP_FEATURE_VERSION:
            raise ValueError(
                f"{source}: op model of file version {data.get('version')!r}, op-feature version "
                f"{got!r}; this graphopt reads file version {FORMAT_VERSION}, op-feature version "
                f"{OP_FEATURE_VERSION}: train it again with {TRAIN_COMMAND}"
            )
        missing = [
            k
            for k in ("features", "kinds", "types", "classes", "ranges", "booster")
            if k not in data
        ]
        if missing:
            raise ValueError(f"{source}: op model file is missing the key {missing[0]!r}")
        if data["features"] != list(FEATURES):
            raise ValueError(f"{source}: its feature names differ from this graphopt's")
        names = {}
        for key in ("kinds", "types", "classes"):
            value = data[key]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{source}: {key!r} must be a list of names, got {value!r:.60}")
            names[key] = tuple(value)
        booster = data["booster"]
        if not isinstance(booster, str) or not booster:
            raise ValueError(f"{source}: 'booster' must be LightGBM's text model")
        check_booster(booster, source)
        ranges = data["ranges"]
        if not isinstance(ranges, Mapping):
            raise ValueError(f"{source}: 'ranges' must map op types to [low, high, families]")
        for t, r in ranges.items():
            good = (
                isinstance(r, list)
                and len(r) == 3
                and all(isinstance(v, (int, float)) and math.isfinite(v) for v in r[:2])
                and isinstance(r[2], int)
                and not isinstance(r[2], bool)
            )
            if not good:
                raise ValueError(
                    f"{source}: 'ranges' of op type {t!r} must be [low, high, families] (two "
                    f"finite numbers and an integer), got {r!r:.60}"
                )
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise ValueError(
                f"{source}: 'metadata' must be an object, got {type(metadata).__name__}"
            )
        return cls(
            kinds=names["kinds"],
            types=names["types"],
            classes=names["classes"],
            booster_text=booster,
            ranges={str(t): (float(r[0]), float(r[1]), int(r[2])) for t, r in ranges.items()},
            metadata=dict(metadata),
            source=source,
        )

    @classmethod
    def load(cls, path: str | Path) -> OpModel:
        """Read a model file (cached by path and modification time).

        Raises:
            ValueError: a missing or unreadable file, or any error of :meth:`from_json_dict`.
        """
        path = Path(path)
        if not path.is_file():
            raise ValueError(
                f"op model file {str(path)!r} does not exist; train one with {TRAIN_COMMAND}"
            )
        key = (str(path.resolve()), path.stat().st_mtime_ns)
        cached = _MODELS.get(key)
        if cached is not None:
            return cached
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, OSError, RecursionError) as e:
            pickled = pickle_refusal(path, f"give an op model file (JSON) of {TRAIN_COMMAND}")
            if pickled is not None:
                raise ValueError(pickled) from None
            reason = "nested too deeply" if isinstance(e, RecursionError) else e
            raise ValueError(f"{path}: cannot read op model file: {reason}") from None
        model = cls.from_json_dict(data, str(path))
        _MODELS[key] = model
        return model


_MODELS: dict[tuple[str, int], OpModel] = {}
_BOOSTERS: dict[int, tuple[OpModel, Any]] = {}


def learned_op_times(graph: CompGraph, cluster: Any, measured: np.ndarray) -> np.ndarray:
    """``measured`` (``float64 [N, D]``, ``NaN`` where an op has no measured time on a device)
    with its ``NaN`` entries filled by the op model of ``cluster.op_model`` where it can price
    them (``cluster.op_times == "learned"``; :class:`~graphopt.hardware.Cluster`). Devices of
    one kind and spec are predicted once.

    Raises:
        ValueError: the model file is missing, unreadable, or of another version.
    """
    model = OpModel.load(cluster.op_model)
    out = np.array(measured, dtype=np.float64, copy=True)
    done: dict[Device, np.ndarray] = {}
    for d, device in enumerate(cluster.devices):
        key = Device(
            "_", device.kind, device.peak_flops, device.mem_bandwidth, 1.0, device.launch_overhead
        )
        if key not in done:
            done[key] = model.predict(graph, device)
        column = out[:, d]
        np.copyto(column, done[key], where=np.isnan(column))
    return out
