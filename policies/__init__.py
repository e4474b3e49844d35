"""Policy networks (GO-style) and their Stable-Baselines3 adapters.

- :class:`GONetwork`: GraphSAGE + segment attention + FiLM + per-task heads + value head.
- :class:`GOPolicy`: the network as an SB3 ``ActorCriticPolicy`` (``PPO(GOPolicy, env)``).
- :class:`MovePolicy`: scores candidate moves of the edit environments from their rows (any graph
  size); :class:`GOMovePolicy`: the same with the GO graph network reading the graph and its
  current schedule (``obs_mode="graph"``).
- :class:`GODecoderPolicy`: the network's per-op outputs steer a decoder (``decoder`` envs).
- The learned methods peers compare against (docs/learned_baselines.md): :class:`GDPPolicy`
  (GDP), :class:`HDPPolicy` (HDP's grouper and placer), :class:`PlacetoPolicy` (Placeto).
- :class:`BatchedCategorical` / :class:`GOActionDistribution`: one categorical over all op slots;
  :class:`BatchedGaussian`: one Gaussian over all (channel, op slot) outputs.
"""

from policies.decoder_policy import GODecoderPolicy
from policies.distributions import BatchedCategorical, GOActionDistribution
from policies.gaussian import BatchedGaussian
from policies.gdp import GDPPolicy
from policies.go_move_policy import GOMovePolicy
from policies.go_network import GONetwork
from policies.hdp import HDPPolicy
from policies.move_policy import MovePolicy
from policies.placeto import PlacetoPolicy
from policies.sb3_policy import GOPolicy

__all__ = [
    "BatchedCategorical",
    "BatchedGaussian",
    "GDPPolicy",
    "GODecoderPolicy",
    "GOActionDistribution",
    "GOMovePolicy",
    "GONetwork",
    "GOPolicy",
    "HDPPolicy",
    "MovePolicy",
    "PlacetoPolicy",
]
