"""check_compatible: a policy is refused, with the reason, by an environment it was not trained for."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from gymnasium import spaces

from envs.placement_edit import FEATURES, PlacementEditEnv
from policies.rollout import check_compatible


def test_an_edit_policy_with_an_older_observation_is_refused():
    env = PlacementEditEnv("suite:tiny", "v100-nvlink-4", candidates=4)
    same = SimpleNamespace(action_space=env.action_space, observation_space=env.observation_space)
    check_compatible(same, env)  # accepted
    older = spaces.Box(-100, 100, (5, len(FEATURES) - 2), np.float32)
    old = SimpleNamespace(action_space=env.action_space, observation_space=older)
    with pytest.raises(ValueError, match="must be retrained"):
        check_compatible(old, env)
    other = SimpleNamespace(
        action_space=spaces.Discrete(7), observation_space=env.observation_space
    )
    with pytest.raises(ValueError, match="number of candidates"):
        check_compatible(other, env)
