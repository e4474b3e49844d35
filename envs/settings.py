"""The settings every graphopt environment shares, defined once: :class:`EnvSettings`.

An environment takes its settings either as keywords (``PlacementEnv(graphs="suite:tiny",
reward_mode="log_speedup")``, as :func:`envs.make_env`, ``gym.make`` and the training configs
pass them; graphs, cluster and cost model also by position) or as one :class:`EnvSettings`
(``PlacementEnv(EnvSettings(graphs="suite:tiny"), hint=False)``). Each environment class names
the fields it reads in ``takes`` and refuses the others; what only one environment reads
(``num_priorities``, ``groups``, ``start``, ...) stays a keyword of its own constructor.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, fields, replace
from pathlib import Path
from typing import Any

from envs.reference import check_reference
from envs.rewards import check_reward_mode
from graphopt.graph import CompGraph
from graphopt.hardware import DEFAULT_CLUSTER, Cluster
from graphopt.typing import CostModel

GraphSpec = str | Path | CompGraph | Sequence[str | Path | CompGraph]
"""A graph name, ``suite:NAME``, a graph file, a ``CompGraph``, or a list of those."""


@dataclass(frozen=True)
class EnvSettings:
    """The settings the environments share (module docstring); only ``graphs``, ``cluster`` and
    ``cost_model`` may be given by position."""

    graphs: GraphSpec = "suite:tiny"
    """A graph name, ``suite:NAME``, a graph file, a ``CompGraph``, or a list of those."""
    cluster: str | Path | Cluster = DEFAULT_CLUSTER
    """A preset name, a cluster file or a ``Cluster``."""
    cost_model: CostModel | None = None
    """Any :class:`~graphopt.typing.CostModel` (None: the simulator)."""
    _: KW_ONLY
    reward_mode: str = "speedup"
    """``"speedup"``, ``"neg_sqrt_time"`` or ``"log_speedup"`` (:mod:`envs.rewards`)."""
    reference: str = "best"
    """``"best"`` (the best heuristic) or a placer name (:mod:`envs.reference`)."""
    max_ops: int | None = None
    """Op slots of an encoded observation (None: the most ops of the graphs;
    :func:`envs.base.padding_sizes`)."""
    max_edges: int | None = None
    """Edge slots of an encoded observation (None: ``4 * max_ops``, or the most edges of the
    graphs where that is more)."""
    candidates: int = 16
    """Edit environments: moves offered per step."""
    horizon: int = 64
    """Edit environments: steps per episode."""
    reward_scale: float = 100.0
    """Edit environments: multiplies the reward (100: percent)."""

    def validate(self) -> EnvSettings:
        """Check the values that need no graph or cluster; returns the settings with
        ``candidates`` and ``horizon`` as ``int`` and ``reward_scale`` as ``float``.

        Raises:
            ValueError: an unknown reward mode or reference, a cost model without
                ``evaluate(graph, cluster, decision)``, or ``candidates`` or ``horizon``
                below 1.
        """
        check_reward_mode(self.reward_mode)
        check_reference(self.reference)
        if self.cost_model is not None and not isinstance(self.cost_model, CostModel):
            raise ValueError(
                f"cost_model {self.cost_model!r} does not implement "
                "evaluate(graph, cluster, decision)"
            )
        if self.candidates < 1 or self.horizon < 1:
            raise ValueError(
                f"candidates and horizon must be >= 1, got {self.candidates} and {self.horizon}"
            )
        return replace(
            self,
            candidates=int(self.candidates),
            horizon=int(self.horizon),
            reward_scale=float(self.reward_scale),
        )

    @classmethod
    def of(
        cls,
        env: str,
        takes: Collection[str],
        args: Sequence[Any],
        keywords: Mapping[str, Any],
    ) -> EnvSettings:
        """The validated settings of environment class ``env`` from its constructor's
        positional ``args`` (an :class:`EnvSettings`, or graphs, cluster and cost model) and
        shared ``keywords`` (which replace the given settings' fields).

        Raises:
            TypeError: a keyword that is no field of ``takes`` (nor graphs, cluster, cost model),
                or given settings that set such a field away from its default (``env`` reads
                only ``takes``).
            ValueError: as :meth:`validate`.
        """
        allowed = {"graphs", "cluster", "cost_model", *takes}
        unknown = sorted(set(keywords) - allowed)
        if unknown:
            raise TypeError(
                f"{env} takes no setting {', '.join(unknown)}; it takes: "
                f"{', '.join(sorted(allowed))} and its own keywords"
            )
        if args and isinstance(args[0], EnvSettings):
            if len(args) > 1:
                raise TypeError(f"{env}: give settings, or graphs, cluster and cost model")
            given = args[0]
            ignored = sorted(
                f.name
                for f in fields(given)
                if f.name not in allowed and getattr(given, f.name) != f.default
            )
            if ignored:
                raise TypeError(
                    f"{env} reads no {', '.join(ignored)}; leave it at its default in the "
                    f"settings (it reads: {', '.join(sorted(allowed))})"
                )
            return replace(given, **keywords).validate()
        return cls(*args, **keywords).validate()
