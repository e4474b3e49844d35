"""Training configuration: one dataclass, parsed only at the edge (YAML file and CLI flags).

:class:`TrainConfig` is the one source of the run's defaults (each documented under its field),
except the environment settings it shares with :class:`envs.settings.EnvSettings` (``cluster``,
``reward_mode``, ``max_ops``, ``candidates``, ``horizon``), whose defaults it takes from there
(the cluster's from :data:`graphopt.hardware.DEFAULT_CLUSTER`, as EnvSettings does); ``graphs``
differs on purpose (a run trains on ``suite:default``, an environment made alone loads
``suite:tiny``). A ``--config FILE.yaml`` sets any subset of its keys, and CLI flags override both. Unknown keys are
errors that name the key. A config is validated once (:meth:`TrainConfig.validate`, which
:func:`load_config` calls): types and values checked, the device name checked and the cluster
resolved to a :class:`~graphopt.hardware.Cluster` (:attr:`TrainConfig.resolved_cluster`), which
every environment of a run then shares. The cluster is resolved once per command: a caller that
resolved it already passes it on (``graphopt train --cluster``: :func:`load_config`'s
``resolved_cluster``), and :meth:`TrainConfig.replace` carries it over to a changed copy.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from envs.settings import EnvSettings
from graphopt.accelerator import check_device_name
from graphopt.errors import InvalidArgument
from graphopt.file_set import write_file
from graphopt.hardware import DEFAULT_CLUSTER, Cluster, get_cluster
from graphopt.tasks import SIMULATED_MOVE_TASKS, get_task
from graphopt.train import policy_registry
from graphopt.train.policy_registry import LEARNED_BASELINES

CONFIG_VERSION = 1
ALGORITHMS = ("ppo", "reinforce")
MAX_GROUPS = 1024
"""The most groups of HDP's grouper."""


FLOAT_RANGES: dict[str, tuple[float, float, bool]] = {
    "learning_rate": (0.0, math.inf, False),
    "gamma": (0.0, 1.0, True),
    "gae_lambda": (0.0, 1.0, True),
    "clip_range": (0.0, math.inf, False),
    "ent_coef": (0.0, math.inf, True),
    "vf_coef": (0.0, math.inf, True),
    "max_grad_norm": (0.0, math.inf, False),
}
"""The range of every float hyper-parameter: ``(low, high, low included)``; ``high`` is included."""


@dataclass
class TrainConfig:
    """Everything a training run needs; written to ``config.yaml`` in the run directory."""

    version: int = CONFIG_VERSION
    """Config format version; a file with another version is refused."""
    task: str = "placement"
    """placement, scheduling, fusion, joint (one-shot, GO policy); placement-edit (one move at
    a time from the best heuristic, priced by the analytic estimate: envs.placement_edit) or
    scheduling-edit, fusion-edit, joint-edit (one simulated move per step: envs.decision_edit),
    all four edit tasks with MovePolicy."""
    graphs: str = "suite:default"
    """Training graphs: names, suite:NAME, graph files, pipedream:/torch: sources, comma-separated."""
    val_graphs: str = "suite:heldout-small"
    """Validation graphs, evaluated greedily every ``eval_every`` steps (best model by these)."""
    cluster: str = DEFAULT_CLUSTER
    """Cluster preset or cluster file."""
    total_timesteps: int = 20000
    """Episodes (= decisions = simulator calls) to train for."""
    seed: int = 0
    """Seeds the environments, PPO and torch."""
    name: str = "go"
    """Run name; the run directory is runs/<task>/<name>_<k>."""
    policy: str = "go"
    """go (graphopt's: the GO policy, or MovePolicy for the edit tasks), graph (scheduling-,
    fusion-, joint-edit: GOMovePolicy, the GO graph network scoring the candidates), mlp (SB3's stock
    MultiInputPolicy / MlpPolicy, a compatibility baseline), or a learned baseline
    (docs/learned_baselines.md): gdp (task placement: GDP, GraphSAGE + attention, no FiLM nor
    hint), hdp (task placement: HDP's grouper and seq2seq placer) or placeto (task
    placement-edit: Placeto, one node per step in topological order)."""
    algorithm: str = "ppo"
    """ppo, or reinforce: PPO's update with one epoch over one minibatch of the whole rollout
    (n_epochs and batch_size are then ignored). At that single gradient step the probability
    ratio is exactly 1, so the clipped surrogate's gradient is REINFORCE's (Williams 1992), with
    the value head as the baseline."""
    groups: int = 16
    """policy hdp: the grouper's groups (the placer decides one device per group)."""
    reward_mode: str = EnvSettings.reward_mode
    """speedup, neg_sqrt_time or log_speedup (see envs.rewards)."""
    num_priorities: int = 8
    """Priority levels for the scheduling and joint tasks."""
    max_ops: int | None = EnvSettings.max_ops
    """Padding size; default: the largest training or validation graph."""
    n_envs: int = 4
    """Environments stepped together (in one process)."""
    learning_rate: float = 3e-4
    n_steps: int = 64
    """Rollout length per environment; a PPO update uses n_steps * n_envs decisions."""
    batch_size: int = 64
    n_epochs: int = 4
    gamma: float = 1.0
    """Irrelevant for one-step episodes; kept at 1. For placement-edit, 0 credits each move with its
    own simulated gain only."""
    gae_lambda: float = 1.0
    clip_range: float = 0.2
    ent_coef: float = 0.0
    """Entropy bonus. 0 by default: the entropy is summed over every op slot (hundreds of terms),
    so even 0.01 outweighs the reward and drives the policy away from its hint."""
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    eval_every: int = 2048
    """Timesteps between validations (and best-model updates)."""
    checkpoint_every: int = 2048
    """Timesteps between checkpoints (a run can resume from the last one)."""
    threads: int = 1
    """torch threads. 1 by default: the simulator and environments are single-threaded, and on a
    shared 2-core machine a second torch thread spin-waits and slows training many times over."""
    device: str = "auto"
    """Where the policy trains: auto (a CUDA GPU when torch sees one, else the CPU), cpu, cuda or
    cuda:N (:mod:`graphopt.accelerator`). The environments and the simulator run on the CPU."""
    candidates: int = EnvSettings.candidates
    """Edit tasks: candidate moves offered per step."""
    horizon: int = EnvSettings.horizon
    """Edit tasks: steps per episode."""
    policy_kwargs: dict[str, Any] = field(default_factory=dict)
    """Passed to the policy (e.g. hidden size, layers, segment length)."""
    decoder: str = "none"
    """One-shot tasks: none (the policy's action is the decision), or heft / heft-lc: the GO
    network's per-op outputs steer the decoders of graphopt.decoders (a list scheduler in the
    given model for placement, shifted priorities, the fusion pass), trained with
    GODecoderPolicy. A new key with a default: older runs load as none."""
    decoder_anchor: bool = True
    """With a decoder: ops stay on the best heuristic's device (and its fusion bits) unless the
    network releases them; false places every op by the list scheduler."""
    cost_model: str = "simulator"
    """simulator, or the path of a cost-model run directory / model.pt: the training reward then
    comes from the learned model; validation always uses the simulator, so the gap shows in
    metrics.csv (``train`` rows: speed-up and step time as the learned model prices them, the
    reference included; ``val`` rows: the simulator's; list the training graphs in val_graphs to
    compare on the same graphs). A new key with a default: older config files stay valid."""

    def validate(self, cluster: Cluster | None = None) -> TrainConfig:
        """Check types and values, check the device name and resolve the cluster
        (:attr:`resolved_cluster`); returns self. A config validated before and unchanged since
        is not checked again, so :func:`~graphopt.train.trainer.train` of a config that
        :func:`load_config` returned costs nothing more.

        Args:
            cluster: the :class:`~graphopt.hardware.Cluster` of :attr:`cluster` where the caller
                resolved it already (``graphopt train --cluster``); it is not resolved again.

        Raises:
            ValueError: naming the bad key (or the cluster preset or file).
        """
        if getattr(self, "_validated", None) == self.to_dict():
            return self
        for key, value in check_types(self.to_dict()).items():
            setattr(self, key, value)
        if self.version != CONFIG_VERSION:
            raise ValueError(
                f"config version {self.version} is not supported; this graphopt reads version "
                f"{CONFIG_VERSION} (graphopt.train.config.TrainConfig)"
            )
        get_task(self.task)
        try:
            check_device_name(self.device)
        except InvalidArgument as e:  # the config key, not the argument of a command
            raise ValueError(str(e)) from None
        self._cluster = cluster if cluster is not None else get_cluster(self.cluster)
        policy_registry.get_policy(self.policy)
        if self.algorithm not in ALGORITHMS:
            raise ValueError(
                f"algorithm {self.algorithm!r} is unknown; choose one of: {', '.join(ALGORITHMS)}"
            )
        wanted = LEARNED_BASELINES.get(self.policy)
        if wanted is not None and self.task != wanted:
            raise ValueError(
                f"policy {self.policy} is trained on task {wanted}, got task {self.task}: set "
                f"task: {wanted}"
            )
        if self.policy == "graph" and self.task not in SIMULATED_MOVE_TASKS:
            raise ValueError(
                f"policy 'graph' scores the candidate moves of {', '.join(SIMULATED_MOVE_TASKS)}; "
                f"task {self.task} takes policy go or mlp"
            )
        for key in (
            "total_timesteps",
            "n_envs",
            "n_steps",
            "batch_size",
            "n_epochs",
            "eval_every",
            "checkpoint_every",
            "threads",
            "num_priorities",
            "candidates",
            "horizon",
            "groups",
        ):
            if int(getattr(self, key)) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")
        if self.groups > MAX_GROUPS:
            raise ValueError(f"groups must be at most {MAX_GROUPS}, got {self.groups}")
        for key, (low, high, closed) in FLOAT_RANGES.items():
            value = float(getattr(self, key))
            inside = (low <= value if closed else low < value) and value <= high
            if not inside:
                bound = f"[{low}, {high}]" if closed else f"({low}, {high}]"
                raise ValueError(f"{key} must be in {bound}, got {getattr(self, key)}")
        if self.decoder != "none":
            from graphopt.decoders.decision import DECODERS

            if self.decoder not in DECODERS:
                raise ValueError(
                    f"decoder {self.decoder!r} is unknown; choose none or one of: "
                    f"{', '.join(DECODERS)}"
                )
            if not get_task(self.task).one_shot or self.policy != "go":
                raise ValueError(
                    f"decoder {self.decoder} steers the one-shot tasks' decisions with the GO "
                    f"policy; task {self.task} with policy {self.policy} takes decoder: none"
                )
        cls = self.policy_class()
        if not isinstance(cls, str):
            from policies.sb3_policy import argument_defaults, check_argument_types

            check_argument_types(cls.__name__, argument_defaults(cls), self.policy_kwargs)
        if self.max_ops is not None and self.max_ops < 1:
            raise ValueError(f"max_ops must be >= 1 (or left out), got {self.max_ops}")
        if self.cost_model != "simulator":
            from graphopt.rundir import resolve_cost_model

            try:
                resolve_cost_model(self.cost_model)
            except ValueError as e:
                raise ValueError(
                    f"cost_model {self.cost_model!r} is neither 'simulator' nor a usable "
                    f"cost-model run: {e}"
                ) from None
        self._validated = self.to_dict()
        return self

    @property
    def resolved_cluster(self) -> Cluster:
        """The :class:`~graphopt.hardware.Cluster` of :attr:`cluster`, resolved once by
        :meth:`validate` (a cluster file is read once, not once per environment)."""
        return self.validate()._cluster

    def policy_class(self) -> Any:
        """The policy the run trains: ``GOPolicy`` (one-shot), ``GODecoderPolicy`` (one-shot with
        a decoder), ``MovePolicy`` or ``GOMovePolicy`` (``policy: graph``) for the edit tasks,
        SB3's stock ``MultiInputPolicy`` / ``MlpPolicy`` by name (``policy: mlp``), or a learned
        baseline's: ``GDPPolicy``, ``HDPPolicy``, ``PlacetoPolicy``
        (:data:`graphopt.train.policy_registry.REGISTRY`)."""
        return policy_registry.policy_class(self.policy, self.task, self.decoder)

    def replace(self, **changes: Any) -> TrainConfig:
        """A validated copy of the config with ``changes`` (config keys to values); the cluster
        of a validated config is carried over, not resolved again, unless ``cluster`` changes.

        Raises:
            ValueError: as :meth:`validate`.
        """
        copy = dataclasses.replace(self, **changes)
        validated = getattr(self, "_validated", None)  # the keys _cluster was resolved with
        if validated is not None and copy.cluster == validated["cluster"]:
            return copy.validate(self._cluster)
        return copy.validate()

    @property
    def decides(self) -> str:
        """The one-shot task whose decision the task produces (``placement`` for placement-edit,
        ``scheduling`` for scheduling-edit, ...)."""
        return get_task(self.task).decides_as

    def env_settings(
        self, max_ops: int | None = None, max_edges: int | None = None
    ) -> dict[str, Any]:
        """The settings of the task's environment (:func:`envs.make_env`) for policies of
        ``max_ops`` op slots and ``max_edges`` edge slots (one-shot tasks only; None: sized to
        the environment's graphs)."""
        padded = {"reward_mode": self.reward_mode, "max_ops": max_ops, "max_edges": max_edges}
        variant = policy_registry.get_policy(self.policy).variant
        if variant == "hierarchical":  # envs.hierarchical: groups and their devices
            return {**padded, "variant": variant, "groups": self.groups}
        if variant is not None:  # envs.placeto: one node per step
            return {**padded, "variant": variant}
        if get_task(self.task).one_shot:
            return {
                **padded,
                "num_priorities": self.num_priorities,
                "decoder": self.decoder,
                "decoder_anchor": self.decoder_anchor,
            }
        settings: dict[str, Any] = {
            "reward_mode": self.reward_mode,
            "candidates": self.candidates,
            "horizon": self.horizon,
        }
        if self.policy == "graph":
            settings.update(obs_mode="graph", max_ops=max_ops, max_edges=max_edges)
        return settings

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: Path) -> None:
        """Write the config as YAML, whole or not at all (:func:`graphopt.file_set.write_file`)."""
        write_file(path, yaml.safe_dump(self.to_dict(), sort_keys=False))


FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}
_TYPES: dict[str, Any] = typing.get_type_hints(TrainConfig)


def _coerce(key: str, value: Any) -> Any:
    """``value`` as the type of config key ``key``, or ValueError naming the key, the expected type
    and the value. A float key takes any number, and a numeric string, which YAML 1.1 makes of
    exponent forms such as ``3e-4``; nothing else is converted (a bool is not a number here)."""
    expected = _TYPES[key]
    if expected is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        wanted = "a number"
    elif expected is int or expected == int | None:
        optional = expected is not int
        if (isinstance(value, int) and not isinstance(value, bool)) or (optional and value is None):
            return value
        wanted = "an integer or null" if optional else "an integer"
    elif expected is str:
        if isinstance(value, str):
            return value
        wanted = "a string"
    elif expected is bool:
        if isinstance(value, bool):
            return value
        wanted = "true or false"
    elif typing.get_origin(expected) is dict:
        if isinstance(value, dict):
            return value
        wanted = "a mapping"
    else:  # pragma: no cover - a field of a new type needs a case above
        raise AssertionError(f"no type check for config key {key!r} ({expected})")
    raise ValueError(f"config key {key!r} must be {wanted}, got {value!r} ({type(value).__name__})")


def check_types(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` (config keys to values) with each value checked against, and converted to, the
    key's type (see :func:`_coerce`).

    Raises:
        ValueError: a value of the wrong type; the message names the key, the type and the value.
    """
    return {key: _coerce(key, value) for key, value in values.items()}


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ValueError(f"config file {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of config keys, got {type(data).__name__}")
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise ValueError(
            f"{path}: unknown config key {unknown[0]!r}"
            + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "")
            + f"; valid keys: {', '.join(sorted(FIELDS))}"
        )
    return data


def load_config(
    path: str | Path | None = None, *, resolved_cluster: Cluster | None = None, **overrides: Any
) -> TrainConfig:
    """The defaults of :class:`TrainConfig`, then the YAML file at ``path`` (if any), then
    ``overrides`` (None values skipped); validated (:meth:`TrainConfig.validate`).
    ``resolved_cluster``: the Cluster of the ``cluster`` override, resolved by the caller (the
    command line's ``--cluster`` check), so that it is not resolved again.

    Raises:
        ValueError: a missing or malformed file, an unknown key (named), a value of the wrong type
            (key, type and value named), or a bad value.
    """
    data: dict[str, Any] = {}
    if path is not None:
        from_file = _read_yaml(Path(path))
        try:  # checked here only to name the file; validate() checks every value's type
            check_types(from_file)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        data.update(from_file)
    for key, value in overrides.items():
        if key not in FIELDS:
            raise ValueError(f"unknown config key {key!r}; valid keys: {', '.join(sorted(FIELDS))}")
        if value is not None:
            data[key] = value
    try:
        config = TrainConfig(**data)
    except TypeError as e:  # pragma: no cover - guarded by the key checks above
        raise ValueError(f"bad config: {e}") from e
    return config.validate(resolved_cluster if overrides.get("cluster") is not None else None)
