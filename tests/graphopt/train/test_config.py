from __future__ import annotations

import re

import pytest
from default_sources import default_sources

from graphopt.configs import CONFIG_DIR
from graphopt.hardware import get_cluster
from graphopt.train.config import CONFIG_VERSION, TrainConfig, load_config


def test_the_defaults_are_the_dataclass_fields():
    config = load_config()
    assert config.version == CONFIG_VERSION and config.task == "placement"
    assert config == TrainConfig(**config.to_dict()) == TrainConfig()
    assert not (CONFIG_DIR / "ppo_default.yaml").exists()  # no second copy of the defaults


SHARED_WITH_THE_ENVIRONMENTS = ("cluster", "reward_mode", "max_ops", "candidates", "horizon")
"""The TrainConfig keys whose defaults are EnvSettings' (graphs and cost_model differ in kind)."""


def test_the_environment_defaults_are_envsettings():
    import dataclasses

    import graphopt.train.config as config_module
    from envs.settings import EnvSettings

    train = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    env = {f.name: f.default for f in dataclasses.fields(EnvSettings)}
    assert set(train) & set(env) == {*SHARED_WITH_THE_ENVIRONMENTS, "graphs", "cost_model"}
    for key in SHARED_WITH_THE_ENVIRONMENTS:
        assert train[key] == env[key], key
    # one home: each of these defaults is read from EnvSettings (or DEFAULT_CLUSTER), no literal
    defaults = default_sources(config_module, "TrainConfig")
    assert {k: defaults[k] for k in SHARED_WITH_THE_ENVIRONMENTS} == {
        "cluster": "DEFAULT_CLUSTER",
        **{k: f"EnvSettings.{k}" for k in SHARED_WITH_THE_ENVIRONMENTS if k != "cluster"},
    }
    assert env["cluster"] == config_module.DEFAULT_CLUSTER


def test_validated_once_with_the_cluster_resolved_once(tmp_path, monkeypatch):
    import graphopt.train.config as config_module

    cluster = tmp_path / "c.yaml"
    get_cluster("v100-nvlink-2").save(cluster)
    resolved = []
    monkeypatch.setattr(
        config_module, "get_cluster", lambda spec: resolved.append(spec) or get_cluster(spec)
    )
    config = load_config(cluster=str(cluster))
    assert config.validate() is config and config.resolved_cluster is config.resolved_cluster
    assert resolved == [str(cluster)] and config.resolved_cluster.num_devices == 2
    config.n_envs = 0  # a changed config is checked again
    with pytest.raises(ValueError, match="n_envs must be >= 1"):
        config.validate()
    with pytest.raises(ValueError, match="unknown cluster preset 'v100x3'"):
        TrainConfig(cluster="v100x3").validate()


def test_every_environment_shares_the_resolved_cluster():
    from tiny_runs import tiny_config

    from graphopt.train.vec_env import make_envs

    config = tiny_config(n_envs=2)
    envs, val_env = make_envs(config)
    assert all(env.cluster is config.resolved_cluster for env in [*envs, val_env])


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
        ("task: sorting\n", "unknown task 'sorting'"),
        ("version: 2\n", "config version 2 is not supported"),
        ("n_envs: 0\n", "n_envs must be >= 1"),
        ("gamma: -3\n", r"gamma must be in \[0.0, 1.0\], got -3"),
        ("clip_range: -1\n", r"clip_range must be in \(0.0, inf\], got -1"),
        ("learning_rate: 0\n", r"learning_rate must be in \(0.0, inf\]"),
        ("gae_lambda: 1.5\n", r"gae_lambda must be in \[0.0, 1.0\]"),
        ("ent_coef: .nan\n", r"ent_coef must be in \[0.0, inf\]"),
        ("- a\n- b\n", "expected a mapping"),
        ("a: [\n", "not valid YAML"),
        ("learning_rate: fast\n", "config key 'learning_rate' must be a number, got 'fast'"),
        ("n_envs: 2.5\n", "config key 'n_envs' must be an integer, got 2.5"),
        ("seed: true\n", "config key 'seed' must be an integer, got True"),
        ("max_ops: many\n", "config key 'max_ops' must be an integer or null, got 'many'"),
        ("max_ops: 0\n", "max_ops must be >= 1"),
        ("task: 3\n", "config key 'task' must be a string, got 3"),
        ("policy_kwargs: [1]\n", "config key 'policy_kwargs' must be a mapping"),
        ("policy: graph\n", "task placement takes policy go or mlp"),
    ],
)
def test_bad_configs_name_the_problem(tmp_path, text, match):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as info:
        load_config(path)
    if match.startswith("config key"):  # a type error names the file the value came from
        assert str(info.value).startswith(f"{path}: ")


def test_numbers_are_converted_to_their_key_type(tmp_path):
    path = tmp_path / "c.yaml"
    # YAML 1.1 reads 3e-4 (no dot) as a string
    path.write_text("learning_rate: 3e-4\nclip_range: 1\nmax_ops: null\n")
    config = load_config(path)
    assert config.learning_rate == 3e-4 and isinstance(config.clip_range, float)
    assert config.max_ops is None
    with pytest.raises(ValueError, match="config key 'seed' must be an integer, got 'x'"):
        load_config(None, seed="x")
    with pytest.raises(ValueError, match="config key 'gamma' must be a number"):
        TrainConfig(gamma="high").validate()  # type: ignore[arg-type]


def test_missing_file_and_bad_override(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ValueError, match="unknown config key 'epochs'"):
        load_config(None, epochs=3)


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        (
            {"policy_kwargs": {"device_agnostic": "yes"}},
            "GOPolicy argument 'device_agnostic' must be true or false",
        ),
        ({"policy_kwargs": {"device_agnostic": "no"}}, "must be true or false, got 'no' (str)"),
        ({"policy_kwargs": {"hidden": 64.0}}, "GOPolicy argument 'hidden' must be an integer"),
        ({"policy_kwargs": {"film": 1}}, "argument 'film' must be true or false"),
        ({"policy_kwargs": {"head_layers": "1"}}, "'head_layers' must be an integer or null"),
        ({"policy_kwargs": {"hint_weight": True}}, "'hint_weight' must be a number"),
        (
            {"decoder": "heft", "policy_kwargs": {"log_std_init": "low"}},
            "GODecoderPolicy argument 'log_std_init' must be a number",
        ),
        (
            {"task": "placement-edit", "policy_kwargs": {"hidden": "64"}},
            "MovePolicy argument 'hidden'",
        ),
        ({"decoder_anchor": "yes"}, "config key 'decoder_anchor' must be true or false"),
    ],
)
def test_config_and_policy_arguments_are_type_checked(settings, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        TrainConfig(**settings).validate()


def test_well_typed_policy_arguments_pass():
    TrainConfig(policy_kwargs={"hidden": 32, "head_layers": None, "hint_weight": 2}).validate()
    TrainConfig(decoder="heft-lc", policy_kwargs={"log_std_init": -1}).validate()


def test_a_config_from_before_the_decoder_loads_without_one(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("version: 1\ntask: placement\ngraphs: txl-tiny\n")  # no decoder keys
    config = load_config(path)
    assert config.decoder == "none" and config.decoder_anchor is True
    assert config.policy_class().__name__ == "GOPolicy"
