from __future__ import annotations

import pytest

from graphopt.train.config import CONFIG_VERSION, TrainConfig, load_config


def test_defaults_file_matches_dataclass():
    config = load_config()
    assert config.version == CONFIG_VERSION and config.task == "placement"
    assert config == TrainConfig(**config.to_dict())


def test_file_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("task: joint\nn_envs: 2\npolicy_kwargs: {hidden: 32}\n")
    config = load_config(path, n_envs=3, seed=None)
    assert (config.task, config.n_envs, config.policy_kwargs) == ("joint", 3, {"hidden": 32})
    config.save(tmp_path / "out.yaml")
    assert load_config(tmp_path / "out.yaml") == config


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("learning_rat: 0.1\n", "unknown config key 'learning_rat'"),
        ("task: sorting\n", "task 'sorting' is unknown"),
        ("version: 2\n", "config version 2 is not supported"),
        ("n_envs: 0\n", "n_envs must be >= 1"),
        ("- a\n- b\n", "expected a mapping"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_bad_configs_name_the_problem(tmp_path, text, match):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_config(path)


def test_missing_file_and_bad_override(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ValueError, match="unknown config key 'epochs'"):
        load_config(None, epochs=3)
