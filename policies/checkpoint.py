"""Model files of a training run: weights and plain data only, read back without running code.

A model file (``best_model.pt``, ``final_model.pt``, ``checkpoints/last.pt``, see
:mod:`graphopt.rundir`) is a ``torch.save`` of tensors, numbers and strings, read back with
``torch.load(path, weights_only=True)``, which refuses any other pickled object::

    {"format": "graphopt-ppo-weights", "version": 1,
     "policy": policy.state_dict(),               # tensors
     "optimizer": policy.optimizer.state_dict(),  # tensors and numbers (Adam's moments)
     "num_timesteps": int, "n_updates": int,      # where PPO's counters stand
     "method": "GOPolicy"}                        # the policy class (GDPPolicy, HDPPolicy, ...)

A file of one method is refused by a run of another, naming both (:func:`load_weights`; files
without ``method``, from before it was recorded, are checked by their weights' shapes only).

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
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np
import torch
import yaml
from gymnasium import spaces

from graphopt import encoding, rundir, strict_json
from graphopt.weights import load_pt

if TYPE_CHECKING:
    from graphopt.hardware import Cluster

WEIGHTS_FORMAT = "graphopt-ppo-weights"
INFO_FORMAT = "graphopt-ppo-model"
VERSION = 1
SAFE_TORCH = (2, 6)
"""Before torch 2.6, ``torch.load(weights_only=True)`` could be made to run code
(CVE-2025-32434); model files are read only with a later torch."""
_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64")

# A run directory is data from elsewhere: every size in model.json and config.yaml is checked
# against these bounds (and the run's own settings) before anything is allocated.
MAX_INFO_BYTES = 2**22
"""The largest ``model.json`` read (4 MiB; graphopt writes a few KB: uniform bounds are one
number)."""
MAX_SPACE_ENTRIES = 2**26
"""The most numbers one space may hold (its Box entries, MultiDiscrete and MultiBinary entries
together): 67 million, above an encoding of :data:`graphopt.encoding.MAX_OPS` op slots."""
MAX_CHOICES = 4096
"""The most values of a ``Discrete`` action or of one ``MultiDiscrete`` entry."""
MAX_MEMBERS = 64
"""The most members of a ``Dict`` space (an encoding has about ten)."""
MAX_DIMS = 8
"""The most axes of a ``Box``."""
POLICY_BOUNDS = {
    "hidden": 4096,
    "layers": 64,
    "sage_layers": 64,
    "attn_layers": 64,
    "head_layers": 64,
    "heads": 64,
    "segment_len": 4096,
    "mem_len": 4096,
    "ffn_mult": 16,
}
"""The largest value of each size argument of the policies (``policy_kwargs`` of a config)."""
MAX_WIDTH = 4096
"""The largest value of any other number in ``policy_kwargs`` (e.g. SB3's ``net_arch`` widths)."""


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
        "method": type(model.policy).__name__,
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
    data = load_pt(path, "graphopt loads only the .pt weights it writes")
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
    if not isinstance(data.get("method", ""), str):
        return "'method' is not a policy class name"
    return None


def load_weights(model: Any, weights: dict[str, Any], path: Path) -> None:
    """Fill PPO ``model`` with ``weights`` (:func:`read_weights` of ``path``): the policy's
    parameters, its optimizer's state and the timestep and update counters.

    Raises:
        ValueError: the file holds another method's model (both named), or the weights do not
            fit the model (another policy or network size than the run's ``config.yaml``
            builds); the message names the file.
    """
    found, expected = weights.get("method"), type(model.policy).__name__
    if found is not None and found != expected:
        raise ValueError(
            f"the weights in {path} do not fit the model: the file holds a model of {found}, "
            f"but its run's config.yaml builds {expected}; evaluate it with its own run"
        )
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


class _Entries:
    """What is left of :data:`MAX_SPACE_ENTRIES` while a space is read: each part takes its
    entries before it is built."""

    def __init__(self) -> None:
        self.left = MAX_SPACE_ENTRIES

    def take(self, count: int, where: str) -> None:
        if count > self.left:
            raise ValueError(
                f"{where} holds {count:,} entries; a space may hold at most "
                f"{MAX_SPACE_ENTRIES:,} in all"
            )
        self.left -= count


def _unrun(value: Any, what: str, entries: _Entries) -> list[int]:
    """The values of ``[value, count]`` runs, their total count taken from ``entries`` before
    any is expanded."""
    if not isinstance(value, list) or not all(isinstance(r, list) and len(r) == 2 for r in value):
        raise ValueError(f"{what} must be [value, count] pairs, got {value!r}")
    for v, count in value:
        _ints([v, count], what)
        if count < 1:
            raise ValueError(f"{what}: a run of {count}")
    entries.take(sum(count for _, count in value), what)
    out: list[int] = []
    for v, count in value:
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


def space_from_json(data: Any, where: str = "space") -> spaces.Space:
    """The space :func:`space_to_json` described; ``where`` names it in messages. Sizes are
    checked before anything is allocated: at most :data:`MAX_SPACE_ENTRIES` numbers in all,
    :data:`MAX_CHOICES` values per choice, :data:`MAX_MEMBERS` members of a Dict, :data:`MAX_DIMS`
    axes of a Box.

    Raises:
        ValueError: anything else, or a size beyond those bounds (naming the field).
    """
    return _space(data, where, _Entries(), depth=0)


def _space(data: Any, where: str, entries: _Entries, depth: int) -> spaces.Space:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a space is a JSON object, got a {type(data).__name__}")
    kind = data.get("type")
    if kind == "Dict":
        members = data.get("spaces")
        if not isinstance(members, dict):
            raise ValueError(f"{where}: a Dict space needs an object of spaces")
        if len(members) > MAX_MEMBERS or depth >= 2:
            raise ValueError(
                f"{where}: a Dict of {len(members):,} spaces at level {depth + 1}; a Dict holds "
                f"at most {MAX_MEMBERS} spaces, at most 2 levels deep"
            )
        return spaces.Dict(
            {str(k): _space(v, f"{where}.{k}", entries, depth + 1) for k, v in members.items()}
        )
    if kind == "Box":
        shape = tuple(_ints(data.get("shape"), f"{where}: a Box shape"))
        if any(n < 0 for n in shape) or len(shape) > MAX_DIMS:
            raise ValueError(
                f"{where}: a Box shape must be at most {MAX_DIMS} non-negative sizes, got "
                f"{list(shape)}"
            )
        entries.take(math.prod(shape), f"{where} (shape {list(shape)})")
        dtype = _dtype(data.get("dtype"))
        low, high = _array(data.get("low"), shape, dtype), _array(data.get("high"), shape, dtype)
        return spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
    if kind == "Discrete":
        n, start = _ints(data.get("n"), f"{where}.n"), _ints(data.get("start", 0), "start")
        if not 1 <= n[0] <= MAX_CHOICES:
            raise ValueError(f"{where}.n is {n[0]:,}; a Discrete space has 1..{MAX_CHOICES}")
        return spaces.Discrete(n[0], start=start[0])
    if kind == "MultiDiscrete":
        nvec = _unrun(data.get("nvec"), f"{where}.nvec", entries)
        if not all(1 <= v <= MAX_CHOICES for v in nvec):
            raise ValueError(
                f"{where}.nvec holds {max(nvec, default=0):,}; each entry has 1..{MAX_CHOICES} "
                "values"
            )
        start = _unrun(data.get("start"), f"{where}.start", entries)
        dtype = _dtype(data.get("dtype"))
        return spaces.MultiDiscrete(np.asarray(nvec), dtype=dtype, start=np.asarray(start))
    if kind == "MultiBinary":
        n = _ints(data.get("n"), f"{where}.n")
        if any(v < 0 for v in n) or len(n) > MAX_DIMS:
            raise ValueError(f"{where}.n must be at most {MAX_DIMS} non-negative sizes")
        entries.take(math.prod(n), f"{where}.n")
        return spaces.MultiBinary(n)
    raise ValueError(f"{where}: unknown space type {kind!r}")


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
    rundir.atomic_write_text(run / rundir.MODEL_INFO, strict_json.dumps(info, indent=1) + "\n")


def read_model_info(
    run: Path, defaults: Mapping[str, Any] | None = None, *, cluster: Cluster | None = None
) -> tuple[spaces.Space, spaces.Space]:
    """``(observation_space, action_space)`` of ``run/model.json``, their sizes checked before
    anything is built: against fixed bounds (:func:`space_from_json`; an encoding's op, edge and
    device slots: :data:`graphopt.encoding.MAX_OPS`, :data:`~graphopt.encoding.MAX_EDGES`,
    :data:`~graphopt.encoding.MAX_DEVICES`) and against the run's ``config.yaml`` (its
    ``max_ops``, cluster, priorities and candidates; its policy's sizes, :data:`POLICY_BOUNDS`;
    its rollout buffer against this machine's memory): :func:`check_run_sizes`. ``defaults``:
    the settings a key missing from ``config.yaml`` takes (the training config's defaults,
    which this layer does not import; None: such a key is not checked). ``cluster``: the
    run's cluster where the caller has resolved it already
    (:attr:`~graphopt.train.config.TrainConfig.resolved_cluster`); it is not resolved again.

    Raises:
        ValueError: no such file, not JSON, not a description of spaces, or a size beyond those
            bounds; one line naming the file and the field.
    """
    path = Path(run) / rundir.MODEL_INFO
    if not path.is_file():
        raise ValueError(
            f"run {run} has no {rundir.MODEL_INFO} (the spaces its model was built for); a run "
            "of this version writes it when training starts: retrain the run"
        )
    size = path.stat().st_size
    if size > MAX_INFO_BYTES:
        raise ValueError(
            f"{path}: not a graphopt model description: {size:,} bytes (graphopt writes a few "
            f"KB; at most {MAX_INFO_BYTES:,} are read)"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != INFO_FORMAT:
            raise ValueError(f"expected format {INFO_FORMAT!r}")
        if data.get("version") != VERSION:
            raise ValueError(f"version {data.get('version')!r}; this graphopt reads {VERSION}")
        observation_space = space_from_json(data["observation_space"], "observation_space")
        action_space = space_from_json(data["action_space"], "action_space")
    except (ValueError, KeyError, TypeError, AssertionError, RecursionError) as e:
        # JSONDecodeError is a ValueError; RecursionError: nesting too deep for the parser
        raise ValueError(f"{path}: not a graphopt model description: {e}") from None
    check_run_sizes(run, observation_space, action_space, defaults, cluster=cluster)
    return observation_space, action_space


def check_run_sizes(
    run: Path,
    observation_space: spaces.Space,
    action_space: spaces.Space,
    defaults: Mapping[str, Any] | None = None,
    *,
    cluster: Cluster | None = None,
) -> None:
    """Refuse spaces of ``run/model.json`` that an encoding never has, or that the run's
    ``config.yaml`` does not build, and a config whose policy or rollout buffer would not fit
    (module bounds): all before the model is built. A missing or unreadable ``config.yaml`` is
    left to the config loader; the checks that need it are skipped then. ``defaults`` and
    ``cluster``: see :func:`read_model_info`.

    Raises:
        ValueError: one line naming the file and the field, the size and the bound.
    """
    info = Path(run) / rundir.MODEL_INFO
    members = observation_space.spaces if isinstance(observation_space, spaces.Dict) else {}
    slots = {
        "op_features": (0, encoding.MAX_OPS, "op slots", "graphopt.encoding.MAX_OPS"),
        "edge_index": (1, encoding.MAX_EDGES, "edge slots", "graphopt.encoding.MAX_EDGES"),
        "device_features": (0, encoding.MAX_DEVICES, "device rows", "MAX_DEVICES"),
    }
    for key, (axis, bound, what, name) in slots.items():
        shape = members[key].shape if key in members else None
        if shape is not None and len(shape) > axis and shape[axis] > bound:
            raise ValueError(
                f"{info}: observation_space.{key} has {shape[axis]:,} {what}; an encoding has at "
                f"most {bound:,} ({name})"
            )
    config, where = _run_config(Path(run), defaults)
    if config is None:
        return
    op_shape = members["op_features"].shape if "op_features" in members else None
    op_slots = op_shape[0] if op_shape else 0
    max_ops = config.get("max_ops")
    if _count(max_ops) and op_slots > max_ops:
        raise ValueError(
            f"{info}: observation_space.op_features has {op_slots:,} op slots but {where} sets "
            f"max_ops: {max_ops:,}; the run's files do not belong together"
        )
    if isinstance(action_space, spaces.MultiDiscrete):
        priorities = config.get("num_priorities")
        spec = cluster if cluster is not None else config.get("cluster")
        choices = max(_devices(spec), 2, priorities if _count(priorities) else 0)
        groups = config.get("groups")  # policy hdp: a group per op slot
        if config.get("policy") == "hdp" and _count(groups):
            choices = max(choices, groups)
        if int(action_space.nvec.max(initial=0)) > choices:
            raise ValueError(
                f"{info}: action_space.nvec has {int(action_space.nvec.max()):,} values per op; "
                f"the run's cluster and num_priorities ({where}) give at most {choices}"
            )
    candidates = config.get("candidates")
    if (
        isinstance(action_space, spaces.Discrete)
        and _count(candidates)
        and int(action_space.n) > candidates + 1
    ):
        raise ValueError(
            f"{info}: action_space.n is {int(action_space.n):,}; {where} sets candidates: "
            f"{candidates}, so at most {candidates + 1}"
        )
    _check_policy_kwargs(config.get("policy_kwargs"), f"{where}: policy_kwargs")
    _check_rollout(config.get("n_steps"), observation_space, action_space, where)


def _count(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is a count (an int of at least 1, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _run_config(
    run: Path, defaults: Mapping[str, Any] | None
) -> tuple[dict[str, Any] | None, Path]:
    """The run's settings as the config loader reads them (``defaults``, then its
    ``config.yaml``) as plain data, and the file's path; None when the file is missing, too
    large or not a mapping (the loader says why)."""
    path = run / rundir.CONFIG_FILE
    try:
        if path.stat().st_size > rundir.MAX_RUN_FILE_BYTES:
            return None, path
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError, RecursionError):
        return None, path
    if not isinstance(data, dict):
        return None, path
    return {**(defaults or {}), **data}, path


def _devices(cluster: Any) -> int:
    """Devices of the run's cluster (a resolved Cluster, a preset or a file), at most an
    encoding's; the encoding's bound where it cannot be resolved here (the loader that uses it says why)."""
    from graphopt.hardware import get_cluster

    try:
        return min(get_cluster(cluster).num_devices, encoding.MAX_DEVICES)
    except (ValueError, TypeError, OSError):
        return encoding.MAX_DEVICES


def _check_policy_kwargs(value: Any, where: str) -> None:
    """Refuse a policy size beyond :data:`POLICY_BOUNDS` (any other number beyond
    :data:`MAX_WIDTH`), in ``value`` and the lists and mappings it holds."""
    if isinstance(value, dict):
        for key, item in value.items():
            bound = POLICY_BOUNDS.get(str(key), MAX_WIDTH)
            if _is_number(item) and item > bound:
                raise ValueError(
                    f"{where}.{key} is {item:,}; at most {bound:,} (a network of that size "
                    "would not fit in memory)"
                )
            _check_policy_kwargs(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if _is_number(item) and item > MAX_WIDTH:
                raise ValueError(f"{where}[{i}] is {item:,}; at most {MAX_WIDTH:,}")
            _check_policy_kwargs(item, f"{where}[{i}]")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_rollout(
    n_steps: Any, observation_space: spaces.Space, action_space: spaces.Space, where: Path
) -> None:
    """Refuse an ``n_steps`` whose rollout buffer (one environment; SB3 stores observations and
    actions as float32) is larger than this machine's memory."""
    if not _count(n_steps):
        return
    parts = [*getattr(observation_space, "spaces", {"": observation_space}).values(), action_space]
    entries = sum(math.prod(part.shape or ()) for part in parts)
    needed = n_steps * entries * 4
    memory = _memory_bytes()
    if memory is not None and needed > memory:
        raise ValueError(
            f"{where}: n_steps {n_steps:,} x {entries:,} numbers of an observation and action is "
            f"a rollout buffer of {needed / 1e9:,.1f} GB, more than this machine's "
            f"{memory / 1e9:.1f} GB"
        )


def _memory_bytes() -> int | None:
    """This machine's physical memory (None where the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def same_spaces(model: Any, observation_space: spaces.Space, action_space: spaces.Space) -> bool:
    """Whether PPO ``model`` was built for these spaces."""
    return bool(model.observation_space == observation_space and model.action_space == action_space)
