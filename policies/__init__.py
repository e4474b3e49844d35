"""Policy networks (GO-style) and their Stable-Baselines3 adapters.

- :class:`GONetwork`: GraphSAGE + segment attention + FiLM + per-task heads + value head.
- :class:`GOPolicy`: the network as an SB3 ``ActorCriticPolicy`` (``PPO(GOPolicy, env)``).
- :class:`MovePolicy`: scores candidate moves of ``graphopt/PlacementEdit-v0`` (any graph size).
- :class:`BatchedCategorical` / :class:`GOActionDistribution`: one categorical over all op slots.
"""

from policies.distributions import BatchedCategorical, GOActionDistribution
from policies.go_network import GONetwork
from policies.move_policy import MovePolicy
from policies.sb3_policy import GOPolicy

__all__ = [
    "BatchedCategorical",
    "GOActionDistribution",
    "GONetwork",
    "GOPolicy",
    "MovePolicy",
]
