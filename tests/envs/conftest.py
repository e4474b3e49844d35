"""What the environment tests share."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env


def _check_env(env: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # infinite Box bounds are intended (documented features)
        gym_check_env(env, skip_render_check=True)
        sb3_check_env(env)


@pytest.fixture
def check_env() -> Callable[[Any], None]:
    """Runs Gymnasium's and SB3's environment checkers on an environment (the unwrapped one),
    their warnings silenced."""
    return _check_env
