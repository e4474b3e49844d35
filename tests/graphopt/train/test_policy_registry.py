"""The policy registry: one entry per ``policy:`` name, read by training and evaluation."""

from __future__ import annotations

import subprocess
import sys

import pytest

from graphopt.tasks import ONE_SHOT_TASKS, TASKS
from graphopt.train.config import TrainConfig
from graphopt.train.policy_registry import (
    LEARNED_BASELINES,
    POLICIES,
    REGISTRY,
    get_policy,
    plans,
    policy_class,
    runs_on_any_device_count,
)


def test_names_and_learned_baselines() -> None:
    assert POLICIES == ("go", "mlp", "graph", "gdp", "hdp", "placeto")
    assert LEARNED_BASELINES == {
        "gdp": "placement",
        "hdp": "placement",
        "placeto": "placement-edit",
    }
    assert [name for name in POLICIES if not plans(name)] == ["hdp", "placeto"]


def test_classes_by_task_and_decoder() -> None:
    assert policy_class("go", "placement").__name__ == "GOPolicy"
    assert policy_class("go", "placement", "heft").__name__ == "GODecoderPolicy"
    assert policy_class("go", "placement-edit").__name__ == "MovePolicy"
    assert policy_class("graph", "scheduling-edit").__name__ == "GOMovePolicy"
    assert policy_class("mlp", "joint") == "MultiInputPolicy"
    assert policy_class("mlp", "fusion-edit") == "MlpPolicy"
    assert policy_class("gdp", "placement").__name__ == "GDPPolicy"
    assert policy_class("hdp", "placement").__name__ == "HDPPolicy"
    assert policy_class("placeto", "placement-edit").__name__ == "PlacetoPolicy"


def test_every_valid_config_gets_its_class_from_the_registry() -> None:
    for name, spec in REGISTRY.items():
        for task in TASKS:
            config = TrainConfig(task=task, policy=name)
            try:
                config.validate()
            except ValueError:
                continue
            wanted = spec.one_shot if task in ONE_SHOT_TASKS else spec.edit
            found = config.policy_class()
            assert (found if isinstance(found, str) else found.__name__) == wanted


def test_unknown_policy_is_one_line_listing_the_names() -> None:
    with pytest.raises(ValueError, match=r"policy 'gpt' is unknown; choose one of: go, mlp, ") as e:
        get_policy("gpt")
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="policy 'gpt' is unknown"):
        TrainConfig(policy="gpt").validate()


def test_reading_the_registry_imports_neither_torch_nor_the_policies() -> None:
    code = (
        "import sys; from graphopt.train.policy_registry import POLICIES, plans; plans('go'); "
        "print(sorted(m for m in ('torch', 'policies') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_only_the_go_policy_has_a_device_count_switch() -> None:
    assert {n: s.any_device_count for n, s in REGISTRY.items() if s.any_device_count} == {
        "go": "device_agnostic"
    }
    assert runs_on_any_device_count("go", {"device_agnostic": True})
    assert not runs_on_any_device_count("go", {"device_agnostic": False, "hidden": 16})
    assert not runs_on_any_device_count("go", {})
    assert not runs_on_any_device_count("gdp", {"device_agnostic": True})  # no such switch
    with pytest.raises(ValueError, match="policy 'gpt' is unknown"):
        runs_on_any_device_count("gpt", {})
