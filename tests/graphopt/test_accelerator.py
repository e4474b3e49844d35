"""``--device auto|cpu|cuda[:N]``: names checked, auto resolved, a missing GPU refused."""

from __future__ import annotations

import pytest
import torch

from graphopt.accelerator import check_device_name, resolve_device
from graphopt.errors import InvalidArgument
from graphopt.train.config import TrainConfig

NO_GPU = not torch.cuda.is_available()


@pytest.mark.parametrize("name", ["auto", "cpu", "cuda", "cuda:1"])
def test_known_names(name: str) -> None:
    assert check_device_name(name) == name


@pytest.mark.parametrize("name", ["gpu", "CUDA", "cuda:", "cuda:x", "", 0])
def test_unknown_names_are_refused(name: object) -> None:
    with pytest.raises(ValueError, match="unknown; use auto, cpu, cuda or cuda:N"):
        check_device_name(name)


def test_cpu_and_auto() -> None:
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cpu" if NO_GPU else "cuda")


@pytest.mark.skipif(not NO_GPU, reason="this machine has a CUDA device")
def test_cuda_without_a_gpu_names_the_fix() -> None:
    with pytest.raises(
        InvalidArgument, match=r"^device cuda: .* no CUDA device .*use device cpu"
    ) as e:
        resolve_device("cuda")
    assert e.value.named({"device": "--device"}).endswith("; use --device cpu (or auto)")


def test_a_config_with_an_unknown_device_is_refused() -> None:
    with pytest.raises(ValueError, match="device 'gpu' is unknown") as e:
        TrainConfig(device="gpu").validate()
    assert not isinstance(e.value, InvalidArgument)  # a config key: no flag to name
    assert TrainConfig().validate().device == "auto"
