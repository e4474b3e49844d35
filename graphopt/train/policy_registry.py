"""The policy registry: every ``policy:`` name a run may give, and what it stands for.

One :class:`PolicySpec` per name holds the policy classes the name trains (by the task and the
decoder), the one task a learned baseline trains on, the environment variant it needs,
whether it offers what the budgeted modes ``plan:K`` and ``search:K`` read, and which
``policy_kwargs`` switch lets its weights run on any device count. Training
(:class:`~graphopt.train.config.TrainConfig`), evaluation (:mod:`graphopt.eval.evaluate`) and
the ``graphopt train --policy`` choices read it; adding a policy is one entry here.

The classes are named, not imported: reading the registry loads neither torch nor
:mod:`policies` (``graphopt train --help`` stays light); :func:`policy_class` imports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graphopt.tasks import get_task


@dataclass(frozen=True)
class PolicySpec:
    """What one ``policy:`` name trains.

    Args:
        one_shot: the class for the one-shot tasks (None: the policy takes no one-shot task).
        edit: the class for the edit tasks (None: no edit task).
        decoder: the class of a one-shot run with a decoder (None: the policy takes no decoder).
        task: the one task the policy trains on (a learned baseline's), or None.
        variant: the environment variant the policy reads (:func:`envs.make_env`), or None.
        plans: whether the policy gives per-op device probabilities or candidate moves, which
            ``plan:K`` and ``search:K`` read.
        any_device_count: the ``policy_kwargs`` key that, set true, makes the one-shot
            policy's weights independent of the device count, so that a run is evaluated on a
            cluster of any size (None: no such switch; its weights fit the trained count only).

    A class name found in :mod:`policies` is imported from there; any other is SB3's stock
    policy of that name, passed to PPO as a string.
    """

    one_shot: str | None
    edit: str | None
    decoder: str | None = None
    task: str | None = None
    variant: str | None = None
    plans: bool = True
    any_device_count: str | None = None


REGISTRY: dict[str, PolicySpec] = {
    "go": PolicySpec(
        one_shot="GOPolicy",
        edit="MovePolicy",
        decoder="GODecoderPolicy",
        any_device_count="device_agnostic",  # policies.go_network.GOSettings.device_agnostic
    ),
    "mlp": PolicySpec(one_shot="MultiInputPolicy", edit="MlpPolicy"),
    "graph": PolicySpec(one_shot=None, edit="GOMovePolicy"),
    "gdp": PolicySpec(one_shot="GDPPolicy", edit=None, task="placement"),
    "hdp": PolicySpec(
        one_shot="HDPPolicy", edit=None, task="placement", variant="hierarchical", plans=False
    ),
    "placeto": PolicySpec(
        one_shot=None, edit="PlacetoPolicy", task="placement-edit", variant="placeto", plans=False
    ),
}
"""Every policy name and its :class:`PolicySpec`."""

POLICIES: tuple[str, ...] = tuple(REGISTRY)
"""The policy names, in the order ``--policy`` lists them."""

LEARNED_BASELINES: dict[str, str] = {
    name: spec.task for name, spec in REGISTRY.items() if spec.task is not None
}
"""The learned methods peers compare against (docs/learned_baselines.md), each with its task."""

SB3_POLICIES = ("MultiInputPolicy", "MlpPolicy")
"""The class names that are SB3's stock policies (passed to PPO by name)."""


def get_policy(name: str) -> PolicySpec:
    """The :class:`PolicySpec` of policy ``name``.

    Raises:
        ValueError: an unknown name; the message lists the known ones.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"policy {name!r} is unknown; choose one of: {', '.join(POLICIES)}"
        ) from None


def plans(name: str) -> bool:
    """Whether policy ``name`` gives what ``plan:K`` and ``search:K`` read (per-op device
    probabilities or candidate moves); an unknown name counts as ``go``'s."""
    return REGISTRY.get(name, REGISTRY["go"]).plans


def runs_on_any_device_count(name: str, policy_kwargs: Mapping[str, Any]) -> bool:
    """Whether a one-shot run of policy ``name`` trained with ``policy_kwargs`` has weights that
    fit a cluster of any device count (its :attr:`PolicySpec.any_device_count` switch set true).

    Raises:
        ValueError: an unknown policy name.
    """
    switch = get_policy(name).any_device_count
    return switch is not None and bool(policy_kwargs.get(switch, False))


def policy_class(name: str, task: str, decoder: str = "none") -> Any:
    """The class policy ``name`` trains on ``task`` (with ``decoder``): a class of
    :mod:`policies`, or the name of SB3's stock policy (``MultiInputPolicy``, ``MlpPolicy``).

    Raises:
        ValueError: an unknown policy, or one that takes no such task (an internal mismatch:
            :meth:`~graphopt.train.config.TrainConfig.validate` refuses those configs first).
    """
    spec = get_policy(name)
    if not get_task(task).one_shot:
        found = spec.edit
    elif decoder != "none":
        found = spec.decoder
    else:
        found = spec.one_shot
    if found is None:
        raise ValueError(f"policy {name} takes no task {task} (decoder {decoder})")
    if found in SB3_POLICIES:
        return found
    import policies  # heavy (torch): only once a class is wanted

    return getattr(policies, found)
