"""Model files of a training run: weights and plain data only, read back without running code.

A model file (``best_model.pt``, ``final_model.pt``, ``checkpoints/last.pt``, see
:mod:`graphopt.rundir`) is a ``torch.save`` of tensors, numbers and strings, read back with
``torch.load(path, weights_only=True)``, which refuses any other pickled object::

    {"format": "graphopt-ppo-weights", "version": 1,
     "policy": policy.state_dict(),               # tensors
     "optimizer": policy.optimizer.state_dict(),  # tensors and numbers (Adam's moments)
     "num_timesteps": int, "n_updates": int}      # where PPO's counters stand

The run's ``model.json`` (plain JSON, :func:`write_model_info`) holds the observation and action
spaces the policy was built for::

    {"format": "graphopt-ppo-model", "version": 1, "task": "placement",
     "observation_space": {"type": "Dict", "spaces": {...}}, "action_space": {...}}

A model is rebuilt from the run's ``config.yaml`` (policy and hyper-parameters, safe YAML) and
these spaces (:func:`graphopt.train.trainer.build_model`), then filled by :func:`load_weights`.
Stable-Baselines3's own ``.zip`` format pickles parts of the model (``cloudpickle``), so loading
one can run any code its author chose; graphopt never writes nor opens one.
"""

from __future__ import annotations

import json
import math
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from graphopt import rundir

WEIGHTS_FORMAT = "graphopt-ppo-weights"
INFO_FORMAT = "graphopt-ppo-model"
VERSION = 1
SAFE_TORCH = (2, 6)
"""Before torch 2.6, ``torch.load(weights_only=True)`` could be made to run code
(CVE-2025-32434); model files are read only with a later torch."""
_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64")


# ---------------------------------------------------------------------- weights
def model_weights(model: Any) -> dict[str, Any]:
    """What a model file holds for PPO ``model`` (see the module docstring)."""
    return {
        "format": WEIGHTS_FORMAT,
        "version": VERSION,
        "policy": model.policy.state_dict(),
        "optimizer": model.policy.optimizer.state_dict(),
        "num_timesteps": int(model.num_timesteps),
        "n_updates": int(getattr(model, "_n_updates", 0)),
    }


def save_weights(model: Any, path: Path) -> None:
    """Write PPO ``model``'s weights to ``path`` (a temporary file renamed into place; Ctrl-C waits
    until it is complete: :func:`graphopt.rundir.write_atomic`)."""
    weights = model_weights(model)
    rundir.write_atomic(path, lambda tmp: torch.save(weights, tmp))


def read_weights(path: Path) -> dict[str, Any]:
    """The contents of model file ``path``, read with ``torch.load(weights_only=True)`` and checked.

    Raises:
        ValueError: a ``.zip`` (Stable-Baselines3's pickled format, never opened), a file that holds
            anything but tensors and plain data (a pickled object is refused unexecuted), not a
            graphopt model file, or a torch older than :data:`SAFE_TORCH`; the message names the
            file.
    """
    path = Path(path)
    if path.suffix == ".zip":
        raise ValueError(
            f"{path} is an SB3 .zip model, which can execute code when loaded; graphopt loads only "
            "weights (.pt, torch.load with weights_only): retrain the run"
        )
    if not path.is_file():
        raise ValueError(f"{path}: no such model file")
    if _torch_version() < SAFE_TORCH:
        raise ValueError(
            f"not reading {path}: torch {torch.__version__} can be made to run code from a file "
            "even with weights_only (CVE-2025-32434); install torch>=2.6"
        )
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many kinds on a bad or hostile file
        raise ValueError(
            f"{path} is not a plain weights file ({_refusal(e)}); torch.load with weights_only "
            "refused it, nothing in it was run: graphopt loads only the .pt weights it writes"
        ) from None
    problem = _weights_problem(data)
    if problem:
        raise ValueError(
            f"{path} is not a graphopt model file ({problem}); expected format {WEIGHTS_FORMAT!r} "
            f"version {VERSION}"
        )
    return data


def _torch_version() -> tuple[int, int]:
    found = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def _refusal(error: Exception) -> str:
    """What ``torch.load(weights_only=True)``'s ``error`` says about the file, in a few words
    (torch's own message suggests loading without ``weights_only``, advice not to pass on)."""
    found = re.search(r"Unsupported (global: GLOBAL [\w.]+|operand \d+)", str(error))
    if found:
        return f"it holds a pickled object: {found.group(0)}"
    if isinstance(error, pickle.UnpicklingError):
        return "it holds a pickled object"
    return "not a file written by torch.save"


def _weights_problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return f"it holds a {type(data).__name__}, not a dict"
    if data.get("format") != WEIGHTS_FORMAT or data.get("version") != VERSION:
        return f"format {data.get('format')!r} version {data.get('version')!r}"
    policy = data.get("policy")
    if not isinstance(policy, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in policy.items()
    ):
        return "'policy' is not a dict of tensors"
    if not isinstance(data.get("optimizer"), dict):
        return "'optimizer' is not a dict"
    for key in ("num_timesteps", "n_updates"):
        value = data.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"{key!r} is not a count"
    return None


def load_weights(model: Any, weights: dict[str, Any], path: Path) -> None:
    """Fill PPO ``model`` with ``weights`` (:func:`read_weights` of ``path``): the policy's
    parameters, its optimizer's state and the timestep and update counters.

    Raises:
        ValueError: the weights do not fit the model (another policy or network size than the
            run's ``config.yaml`` builds); the message names the file.
    """
    try:
        model.policy.load_state_dict(weights["policy"], strict=True)
        model.policy.optimizer.load_state_dict(weights["optimizer"])
    except (RuntimeError, ValueError, KeyError, TypeError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(
            f"the weights in {path} do not fit the model its run's config.yaml and model.json "
            f"build ({reason})"
        ) from None
    model.num_timesteps = int(weights["num_timesteps"])
    model._n_updates = int(weights["n_updates"])


# ---------------------------------------------------------------------- spaces as JSON
def _number(x: float | int) -> float | int | str:
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _bound(values: np.ndarray) -> Any:
    """A Box bound: one number when every entry is the same (the usual case), else a flat list."""
    flat = values.ravel().tolist()
    if flat and all(v == flat[0] for v in flat):
        return _number(flat[0])
    return [_number(v) for v in flat]


def _runs(values: list[int]) -> list[list[int]]:
    """``values`` as ``[value, count]`` runs (an action layout is a few blocks of equal sizes)."""
    runs: list[list[int]] = []
    for v in values:
        if runs and runs[-1][0] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    return runs


def _unrun(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(r, list) and len(r) == 2 for r in value):
        raise ValueError(f"{what} must be [value, count] pairs, got {value!r}")
    out: list[int] = []
    for v, count in value:
        _ints([v, count], what)
        if count < 1:
            raise ValueError(f"{what}: a run of {count}")
        out.extend([v] * count)
    return out


def space_to_json(space: spaces.Space) -> dict[str, Any]:
    """``space`` (Dict, Box, Discrete, 1-D MultiDiscrete, MultiBinary) as plain JSON data."""
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_to_json(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": _bound(space.low),
            "high": _bound(space.high),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
        return {
            "type": "MultiDiscrete",
            "nvec": _runs(space.nvec.tolist()),
            "start": _runs(space.start.tolist()),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    raise TypeError(f"cannot describe a {type(space).__name__} space as JSON")


def _ints(value: Any, what: str) -> list[int]:
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise ValueError(f"{what} must be integers, got {value!r}")
    return items


def _dtype(value: Any) -> np.dtype:
    if value not in _DTYPES:
        raise ValueError(f"dtype {value!r} is not one of {', '.join(_DTYPES)}")
    return np.dtype(value)


def _array(value: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    items = value if isinstance(value, list) else [value]
    numbers = []
    for v in items:
        if isinstance(v, str) and v in ("inf", "-inf"):
            numbers.append(float(v))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            numbers.append(v)
        else:
            raise ValueError(f"a Box bound must be numbers, 'inf' or '-inf', got {v!r}")
    if isinstance(value, list):
        if len(numbers) != int(np.prod(shape)):
            raise ValueError(f"a Box bound of {len(numbers)} numbers for shape {shape}")
        return np.asarray(numbers).reshape(shape).astype(dtype)
    return np.full(shape, numbers[0]).astype(dtype)


def space_from_json(data: Any) -> spaces.Space:
    """The space :func:`space_to_json` described. Raises ValueError for anything else."""
    if not isinstance(data, dict):
        raise ValueError(f"a space is a JSON object, got {data!r}")
    kind = data.get("type")
    if kind == "Dict":
        members = data.get("spaces")
        if not isinstance(members, dict):
            raise ValueError("a Dict space needs an object of spaces")
        return spaces.Dict({str(k): space_from_json(v) for k, v in members.items()})
    if kind == "Box":
        shape = tuple(_ints(data.get("shape"), "a Box shape"))
        if any(n < 0 for n in shape):
            raise ValueError(f"a Box shape must be non-negative, got {shape}")
        dtype = _dtype(data.get("dtype"))
        low, high = _array(data.get("low"), shape, dtype), _array(data.get("high"), shape, dtype)
        return spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
    if kind == "Discrete":
        n, start = _ints(data.get("n"), "n"), _ints(data.get("start", 0), "start")
        return spaces.Discrete(n[0], start=start[0])
    if kind == "MultiDiscrete":
        nvec, start = _unrun(data.get("nvec"), "nvec"), _unrun(data.get("start"), "start")
        dtype = _dtype(data.get("dtype"))
        return spaces.MultiDiscrete(np.asarray(nvec), dtype=dtype, start=np.asarray(start))
    if kind == "MultiBinary":
        return spaces.MultiBinary(_ints(data.get("n"), "n"))
    raise ValueError(f"unknown space type {kind!r}")


# ---------------------------------------------------------------------- model.json
def write_model_info(run: Path, model: Any, task: str) -> None:
    """Record in ``run/model.json`` the spaces PPO ``model`` was built for."""
    info = {
        "format": INFO_FORMAT,
        "version": VERSION,
        "task": task,
        "observation_space": space_to_json(model.observation_space),
        "action_space": space_to_json(model.action_space),
    }
    rundir.atomic_write_text(run / rundir.MODEL_INFO, json.dumps(info, indent=1) + "\n")


def read_model_info(run: Path) -> tuple[spaces.Space, spaces.Space]:
    """``(observation_space, action_space)`` of ``run/model.json``.

    Raises:
        ValueError: no such file, not JSON, or not a description of spaces; names the file.
    """
    path = Path(run) / rundir.MODEL_INFO
    if not path.is_file():
        raise ValueError(
            f"run {run} has no {rundir.MODEL_INFO} (the spaces its model was built for); a run "
            "of this version writes it when training starts: retrain the run"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != INFO_FORMAT:
            raise ValueError(f"expected format {INFO_FORMAT!r}")
        if data.get("version") != VERSION:
            raise ValueError(f"version {data.get('version')!r}; this graphopt reads {VERSION}")
        return space_from_json(data["observation_space"]), space_from_json(data["action_space"])
    except (ValueError, KeyError, TypeError, AssertionError) as e:  # JSONDecodeError: ValueError
        raise ValueError(f"{path}: not a graphopt model description: {e}") from None


def same_spaces(model: Any, observation_space: spaces.Space, action_space: spaces.Space) -> bool:
    """Whether PPO ``model`` was built for these spaces."""
    return bool(model.observation_space == observation_space and model.action_space == action_space)
