"""The settings the environments share, defined once (envs.settings.EnvSettings)."""

from __future__ import annotations

import pytest

import envs
from envs import EnvSettings
from envs.hierarchical import HierarchicalPlacementEnv
from envs.placement import PlacementEnv
from envs.placement_edit import PlacementEditEnv
from envs.placeto import PlacetoEnv
from envs.step_placement import StepPlacementEnv

GRAPHS = ["txl-tiny"]

SETTING_NAMES = {
    "placement": {
        "reward_mode",
        "reference",
        "max_ops",
        "max_edges",
        "num_priorities",
        "obs_mode",
        "hint",
        "decoder",
        "decoder_anchor",
    },
    "placement-edit": {"reward_mode", "reference", "candidates", "horizon", "reward_scale"},
    "joint-edit": {
        "reward_mode",
        "reference",
        "candidates",
        "horizon",
        "reward_scale",
        "obs_mode",
        "max_ops",
        "max_edges",
    },
}


@pytest.mark.parametrize("task", sorted(SETTING_NAMES))
def test_each_environment_takes_the_keywords_it_took_before(task):
    assert envs.ENV_CLASSES[task].setting_names() == SETTING_NAMES[task]


def test_the_variants_and_the_step_environment_take_theirs():
    assert HierarchicalPlacementEnv.setting_names() == {
        "reward_mode",
        "reference",
        "max_ops",
        "max_edges",
        "groups",
    }
    assert PlacetoEnv.setting_names() == {
        "reward_mode",
        "reference",
        "max_ops",
        "max_edges",
        "start",
    }
    assert StepPlacementEnv.setting_names() == {"reference", "contention"}


def test_settings_given_whole_make_the_same_environment_as_keywords():
    given = EnvSettings(GRAPHS, "v100-nvlink-2", reward_mode="log_speedup", max_ops=300)
    whole = PlacementEnv(given, hint=False)
    keywords = PlacementEnv(
        graphs=GRAPHS, cluster="v100-nvlink-2", reward_mode="log_speedup", max_ops=300, hint=False
    )
    assert whole.settings() == keywords.settings()
    assert whole.settings()["max_edges"] == 1200  # resolved: 4 * max_ops
    assert whole.config.max_ops == 300 and whole.reward_mode == "log_speedup"
    replaced = PlacementEnv(given, reward_mode="speedup")  # a keyword replaces the field
    assert replaced.reward_mode == "speedup"


def test_edit_budget_is_read_from_the_settings_as_numbers():
    env = PlacementEditEnv(GRAPHS, "v100-nvlink-2", candidates=4, horizon=8, reward_scale=1)
    assert (env.candidates, env.horizon, env.reward_scale) == (4, 8, 1.0)
    assert isinstance(env.settings()["reward_scale"], float)
    assert env.action_space.n == 5


def test_a_setting_the_environment_does_not_read_is_refused():
    with pytest.raises(TypeError, match="PlacementEditEnv takes no setting max_ops; it takes:"):
        PlacementEditEnv(GRAPHS, "v100-nvlink-2", max_ops=300)
    with pytest.raises(TypeError, match="StepPlacementEnv takes no setting reward_mode"):
        StepPlacementEnv(GRAPHS, "v100-nvlink-2", reward_mode="speedup")
    with pytest.raises(TypeError, match="PlacementEditEnv reads no max_ops"):
        PlacementEditEnv(EnvSettings(GRAPHS, "v100-nvlink-2", max_ops=40))
    with pytest.raises(ValueError, match="the placement-edit environment takes no setting max_ops"):
        envs.make_env("placement-edit", GRAPHS, "v100-nvlink-2", max_ops=300)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"reward_mode": "fastest"}, "unknown reward mode 'fastest'; choose one of"),
        ({"reference": "oracle"}, "unknown reference 'oracle'"),
        ({"candidates": 0}, "candidates and horizon must be >= 1, got 0 and 64"),
        ({"horizon": 0}, "candidates and horizon must be >= 1, got 16 and 0"),
        ({"cost_model": object()}, "does not implement evaluate"),
    ],
)
def test_validate_names_the_bad_value(changes, message):
    with pytest.raises(ValueError, match=message):
        EnvSettings(**changes).validate()


def test_defaults_are_those_of_every_environment():
    settings = EnvSettings()
    assert settings.graphs == "suite:tiny" and settings.cluster == "v100-nvlink-4"
    assert (settings.reward_mode, settings.reference) == ("speedup", "best")
    assert (settings.candidates, settings.horizon, settings.reward_scale) == (16, 64, 100.0)
