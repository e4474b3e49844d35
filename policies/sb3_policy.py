"""``GOPolicy``: the GO network as a Stable-Baselines3 actor-critic policy.

Works with stock algorithms::

    env = envs.PlacementEnv(graphs=["txl-tiny"], cluster="v100-nvlink-2")
    model = PPO(GOPolicy, env, policy_kwargs={"hidden": 64, "task": "placement"})
    model.learn(10_000)

For ``obs_mode="id"`` environments, give the encodings:
``policy_kwargs={"graphs": env.encoded_graphs()}`` (converted to tensors once, kept out of the
``state_dict``; saved with the model's ``policy_kwargs``).

**Told, not guessed.** The policy is told its task (``task=env.unwrapped.task``); the action
space must have that task's blocks (:data:`graphopt.tasks.TASKS`), each of ``max_ops`` equal
entries (checked by :func:`check_blocks`). ``max_ops`` comes from the observation space (or the
given graphs).

**Each distinct graph is embedded once** per call: in ``id`` mode by graph id, otherwise by an
exact-enough key of the observation (:mod:`policies.dedup`); the network runs on the distinct
graphs and the batched distribution reads them through an index (:mod:`policies.distributions`).

**What every graphopt policy shares** lives here too: :func:`check_kwargs` and
:func:`own_parameters` for their arguments, :class:`NetworkPolicy` (a network of their own that
reads the observation, one optimizer) and :class:`CategoricalPolicy` (one of ``n`` choices).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.distributions import CategoricalDistribution
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from torch import Tensor

from graphopt.nn.batching import GraphBatch, graph_batch
from policies.dedup import observation_keys, unique_rows
from policies.distributions import GOActionDistribution
from policies.go_network import GONetwork, GOSettings
from policies.heads import blocks_of

# ActorCriticPolicy arguments that GOPolicy accepts (SB3 passes them back on load) but ignores.
_IGNORED_SB3_KWARGS = (
    "net_arch",
    "activation_fn",
    "ortho_init",
    "log_std_init",
    "full_std",
    "use_expln",
    "squash_output",
    "features_extractor_class",
    "features_extractor_kwargs",
    "share_features_extractor",
    "normalize_images",
)


def check_kwargs(policy: str, kwargs: dict[str, Any], allowed: str) -> dict[str, Any]:
    """``kwargs`` of a policy's constructor without SB3's MLP arguments, which graphopt's
    policies ignore (:data:`_IGNORED_SB3_KWARGS`); ``ValueError`` naming ``policy``, the unknown
    ones and the ``allowed`` ones when anything but the optimizer's arguments is left."""
    for key in _IGNORED_SB3_KWARGS:
        kwargs.pop(key, None)
    unknown = set(kwargs) - {"optimizer_class", "optimizer_kwargs"}
    if unknown:
        raise ValueError(
            f"unknown {policy} argument(s) {sorted(unknown)}; allowed: {allowed}, "
            "optimizer_class, optimizer_kwargs"
        )
    return kwargs


def check_argument_types(
    policy: str, defaults: Mapping[str, Any], kwargs: Mapping[str, Any]
) -> None:
    """Each of ``kwargs`` with a default in ``defaults`` has the default's type: a bool is a bool,
    an int an int (not a float, bool or string), a float any number (not a bool), ``None``
    defaults take None or an int; ``ValueError`` naming ``policy``, the argument and the value."""
    for key, value in kwargs.items():
        if key not in defaults:
            continue
        default = defaults[key]
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if isinstance(default, bool):
            ok, wanted = isinstance(value, bool), "true or false"
        elif isinstance(default, int):
            ok, wanted = isinstance(value, int) and not isinstance(value, bool), "an integer"
        elif isinstance(default, float):
            ok, wanted = number, "a number"
        elif default is None:
            ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
            wanted = "an integer or null"
        else:
            continue
        if not ok:
            raise ValueError(
                f"{policy} argument {key!r} must be {wanted}, got {value!r} ({type(value).__name__})"
            )


def argument_defaults(policy_class: type) -> dict[str, Any]:
    """The keyword arguments of a graphopt policy class with their defaults (its constructor's,
    and :class:`~policies.go_network.GOSettings`'s for the GO policies)."""
    import inspect

    defaults = {
        name: p.default
        for name, p in inspect.signature(policy_class).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    if issubclass(policy_class, GOPolicy):
        defaults.update(GOSettings().to_kwargs())
    return defaults


def own_parameters(data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """SB3's saved constructor parameters ``data`` without the MLP arguments graphopt's policies
    ignore, plus their own ``extra`` ones (for ``_get_constructor_parameters``)."""
    for key in _IGNORED_SB3_KWARGS + ("use_sde",):
        data.pop(key, None)
    data.update(extra)
    return data


class _NoFeatures(BaseFeaturesExtractor):
    """SB3's features extractor slot: the network reads the observation dict itself."""

    def __init__(self, observation_space: gym.Space) -> None:
        super().__init__(observation_space, features_dim=1)

    def forward(self, observations: Any) -> Any:
        return observations


class NetworkPolicy(ActorCriticPolicy):
    """What graphopt's SB3 policies share: a network of their own, made by
    :meth:`_build_network`, that reads the observation itself (SB3's features extractor passes it
    through, SB3 builds no MLP and no orthogonal initialisation), and one optimizer over all the
    parameters.

    A subclass checks its own arguments (:func:`check_kwargs`), calls this constructor and
    defines :meth:`_build_network` and SB3's ``forward``, ``evaluate_actions``,
    ``predict_values`` and ``_predict``.

    Args:
        observation_space, action_space, lr_schedule: as for SB3's ``ActorCriticPolicy``.
        features_extractor_class: SB3's features extractor (default: the pass-through
            :class:`_NoFeatures`).
        **kwargs: ``optimizer_class``, ``optimizer_kwargs``.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        features_extractor_class: type[BaseFeaturesExtractor] = _NoFeatures,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            observation_space,
            action_space,
            lr_schedule,
            features_extractor_class=features_extractor_class,
            ortho_init=False,
            **kwargs,
        )

    def _build_network(self) -> None:
        """Make the network (and ``action_dist`` where SB3 reads one); SB3's constructor calls it
        through ``_build``, after the spaces and optimizer settings are set."""
        raise NotImplementedError

    def _build(self, lr_schedule: Schedule) -> None:
        self._build_network()
        self.optimizer = self.optimizer_class(  # type: ignore[call-arg]
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )


class CategoricalPolicy(NetworkPolicy):
    """A :class:`NetworkPolicy` whose action is one of ``n`` choices (a candidate row of an edit
    environment, a device): subclasses define :meth:`_run`, SB3's methods follow from it."""

    def _run(self, obs: PyTorchObs) -> tuple[CategoricalDistribution, Tensor]:
        """The action distribution and the values ``(B, 1)`` of a batch of observations."""
        raise NotImplementedError

    def forward(
        self, obs: PyTorchObs, deterministic: bool = False
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Actions ``(B,)``, values ``(B, 1)`` and log-probabilities ``(B,)``."""
        dist, value = self._run(obs)
        actions = dist.get_actions(deterministic=deterministic)
        return actions, value, dist.log_prob(actions)

    def evaluate_actions(self, obs: PyTorchObs, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Values ``(B, 1)``, log-probabilities and entropies ``(B,)`` of ``actions``."""
        dist, value = self._run(obs)
        return value, dist.log_prob(actions), dist.entropy()

    def get_distribution(self, obs: PyTorchObs) -> CategoricalDistribution:
        return self._run(obs)[0]

    def predict_values(self, obs: PyTorchObs) -> Tensor:
        return self._run(obs)[1]

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> Tensor:
        return self.get_distribution(observation).get_actions(deterministic=deterministic)


def check_blocks(action_space: spaces.Space, max_ops: int, task: str) -> dict[str, int]:
    """``{block: K}`` of a ``MultiDiscrete`` action space laid out for ``task`` (see the module
    docstring); ``ValueError`` naming the mismatch otherwise."""
    if not isinstance(action_space, spaces.MultiDiscrete) or action_space.nvec.ndim != 1:
        raise ValueError(f"GOPolicy needs a 1-D MultiDiscrete action space, got {action_space}")
    nvec = action_space.nvec
    if max_ops < 1 or nvec.size % max_ops:
        raise ValueError(
            f"action space has {nvec.size} entries, not a multiple of max_ops={max_ops}"
        )
    rows = nvec.reshape(-1, max_ops)
    if not np.all(rows == rows[:, :1]):
        raise ValueError("action space: every op slot of a block must have the same size")
    sizes = [int(k) for k in rows[:, 0]]
    names = blocks_of(task)
    if len(names) != len(sizes) or (names[-1] == "fusion" and sizes[-1] != 2):
        raise ValueError(
            f"task {task!r} expects blocks {names} (fusion: 2 classes), but the action space has "
            f"{len(sizes)} block(s) of sizes {sizes}; pass the task of the environment "
            "(env.unwrapped.task)"
        )
    return dict(zip(names, sizes, strict=True))


class GOPolicy(NetworkPolicy):
    """Actor-critic policy around :class:`~policies.go_network.GONetwork`.

    Args:
        observation_space: the environment's ``Dict`` space (``obs_mode`` "full" or "id").
        action_space: the environment's ``MultiDiscrete`` space.
        lr_schedule: learning-rate schedule (given by the algorithm).
        task: "placement", "scheduling", "fusion" or "joint": the environment's task
            (``env.unwrapped.task``).
        graphs: for ``obs_mode="id"``: ``env.encoded_graphs()``, the observation of each graph id.
        dedup: embed each distinct observation of a batch once (default True).
        **kwargs: the network's hyper-parameters, the fields of
            :class:`~policies.go_network.GOSettings` (``hidden``, ``sage_layers``, ...);
            ``optimizer_class``, ``optimizer_kwargs`` of SB3's ``ActorCriticPolicy``; its MLP
            arguments (``net_arch``, ``ortho_init``, ...) are accepted and ignored.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        task: str | None = None,
        graphs: Sequence[Mapping[str, np.ndarray]] | None = None,
        dedup: bool = True,
        **kwargs: Any,
    ) -> None:
        if kwargs.pop("use_sde", False):
            raise ValueError("GOPolicy has discrete actions: use_sde must be False")
        network = GOSettings.pop_from(kwargs)
        check_kwargs("GOPolicy", kwargs, f"task, graphs, dedup, {', '.join(GOSettings.names())}")
        if not isinstance(observation_space, spaces.Dict):
            raise ValueError(
                f"GOPolicy needs the Dict observation of envs, got {observation_space}"
            )
        if task is None:
            raise ValueError(
                "GOPolicy needs its task: pass policy_kwargs={'task': env.unwrapped.task} "
                "(placement, scheduling, fusion or joint)"
            )
        self.id_mode = "graph_id" in observation_space.spaces
        if self.id_mode:
            if not graphs:
                raise ValueError(
                    "obs_mode='id' observations hold only a graph id: pass "
                    "policy_kwargs={'graphs': env.encoded_graphs()}"
                )
            max_ops = int(np.asarray(graphs[0]["op_features"]).shape[0])
        else:
            op_space = observation_space.spaces["op_features"]
            assert op_space.shape is not None
            max_ops = int(op_space.shape[0])
        self.task = task
        self.num_classes = self._blocks(observation_space, action_space, max_ops, task)
        self.max_ops = max_ops
        self.graphs = list(graphs) if graphs is not None else None
        self.dedup = dedup
        self.network_settings = network
        """The network's hyper-parameters."""
        self._graph_cache: dict[str, GraphBatch] = {}
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _blocks(
        self, observation_space: spaces.Dict, action_space: spaces.Space, max_ops: int, task: str
    ) -> dict[str, int]:
        """``{block: K}`` of the network's heads (:func:`check_blocks`)."""
        return check_blocks(action_space, max_ops, task)

    def _build_network(self) -> None:
        self.network = GONetwork(self.num_classes, self.network_settings)
        self.action_dist = GOActionDistribution(list(self.num_classes.values()))

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return own_parameters(
            super()._get_constructor_parameters(),
            task=self.task,
            graphs=self.graphs,
            dedup=self.dedup,
            **self.network_settings.to_kwargs(),
        )

    # ------------------------------------------------------------------ network on a batch
    def _graph_tensors(self) -> GraphBatch:
        """All of ``graphs`` as one GraphBatch on the policy's device (built once per device)."""
        key = str(self.device)
        cached = self._graph_cache.get(key)
        if cached is None:
            assert self.graphs is not None
            obs = {
                k: torch.as_tensor(np.stack([np.asarray(g[k]) for g in self.graphs]))
                for k in self.graphs[0]
            }
            cached = graph_batch({k: v.to(self.device) for k, v in obs.items()})
            self._graph_cache[key] = cached
        return cached

    def _run(
        self, obs: PyTorchObs, with_logits: bool = True
    ) -> tuple[dict[str, Tensor], Tensor, Tensor, Tensor | None]:
        """Network outputs for the distinct graphs of ``obs``: ``(logits, value, mask, index)``;
        sample ``b`` reads graph ``index[b]`` (``index`` None: one graph per sample)."""
        if not isinstance(obs, Mapping):
            raise ValueError(f"GOPolicy expects a dict observation, got {type(obs).__name__}")
        index: Tensor | None = None
        if self.id_mode:
            ids = obs["graph_id"].reshape(-1).long()
            num_graphs = len(self.graphs or ())
            if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_graphs):
                raise ValueError(f"graph_id outside [0, {num_graphs}): {ids.tolist()[:8]}")
            uniq, index = torch.unique(ids, return_inverse=True)
            batch = self._graph_tensors().select(uniq)
        else:
            batch = graph_batch(obs)
            if self.dedup and batch.size > 1:
                first, inverse = unique_rows(observation_keys(obs))
                if first.numel() < batch.size:
                    batch, index = batch.select(first), inverse
        logits, value, mask = self.network(batch, with_logits=with_logits)
        return logits, value, mask, index

    def _distribution(
        self, logits: dict[str, Tensor], mask: Tensor, index: Tensor | None
    ) -> GOActionDistribution:
        dist = GOActionDistribution(list(self.num_classes.values()))
        return dist.proba_distribution([logits[name] for name in self.num_classes], mask, index)

    @staticmethod
    def _per_sample(value: Tensor, index: Tensor | None) -> Tensor:
        return (value if index is None else value[index]).unsqueeze(-1)

    # ------------------------------------------------------------------ SB3 API
    def forward(
        self, obs: PyTorchObs, deterministic: bool = False
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Actions ``(B, nb * max_ops)``, values ``(B, 1)`` and log-probabilities ``(B,)``."""
        logits, value, mask, index = self._run(obs)
        dist = self._distribution(logits, mask, index)
        actions = dist.get_actions(deterministic=deterministic)
        return actions, self._per_sample(value, index), dist.log_prob(actions)

    def evaluate_actions(self, obs: PyTorchObs, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Values ``(B, 1)``, log-probabilities and entropies ``(B,)`` of ``actions``."""
        logits, value, mask, index = self._run(obs)
        dist = self._distribution(logits, mask, index)
        return self._per_sample(value, index), dist.log_prob(actions), dist.entropy()

    def get_distribution(self, obs: PyTorchObs) -> GOActionDistribution:
        logits, _, mask, index = self._run(obs)
        return self._distribution(logits, mask, index)

    def predict_values(self, obs: PyTorchObs) -> Tensor:
        """Values ``(B, 1)`` (the heads are skipped)."""
        _, value, _, index = self._run(obs, with_logits=False)
        return self._per_sample(value, index)

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> Tensor:
        return self.get_distribution(observation).get_actions(deterministic=deterministic)
