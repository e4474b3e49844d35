"""Inductor's kernels measured: the file round trip and refusals; one tiny compiled model
(expensive: Inductor compiles C++)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphopt.importers.zoo import load_zoo
from graphopt.measure.kernels import KERNELS_VERSION, KernelProfile, profile_kernels


def sample() -> KernelProfile:
    return KernelProfile(
        name="m",
        kind="cpu-x-t1",
        groups=[["a"], ["b", "c"]],
        seconds=[1e-4, 2e-5],
        extern=[True, False],
        kernel_names=["aten::mm", "graph_0_cpp_fused_add_relu_0"],
        step_seconds=1.3e-4,
        eager_seconds=2e-4,
        unmatched_ops=[],
        settings={"iterations": 3},
    )


def test_file_round_trip(tmp_path: Path) -> None:
    path = sample().save(tmp_path / "k.json")
    assert KernelProfile.load(path) == sample()


def test_bad_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    path.write_text(json.dumps({**json.loads(sample().save(path).read_text()), "version": 99}))
    with pytest.raises(
        ValueError, match=f"version 99, this graphopt reads version {KERNELS_VERSION}"
    ):
        KernelProfile.load(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not a kernel profile"):
        KernelProfile.load(path)


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        (
            "seconds",
            ["fast", 1e-5],
            "'seconds' must be a list of seconds .* got \\[\"fast\", 1e-05\\]",
        ),
        ("seconds", [1e-4, -1.0], "'seconds' must be a list of seconds"),
        ("step_seconds", "fast", "'step_seconds' must be seconds"),
        ("groups", [["a"], "bc"], "'groups' must be a list of lists of op names"),
        ("extern", [1, 0], "'extern' must be a list of true/false"),
        ("settings", [], "'settings' must be an object"),
        ("kernel_names", ["k"], "'kernel_names' has 1 entries for 2 groups"),
    ],
)
def test_a_field_of_the_wrong_type_names_file_and_key(tmp_path: Path, key, value, match) -> None:
    """#40: ``"seconds": "fast"`` was accepted."""
    path = sample().save(tmp_path / "k.json")
    path.write_text(json.dumps({**json.loads(path.read_text()), key: value}))
    with pytest.raises(ValueError, match=match) as info:
        KernelProfile.load(path)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


def test_a_binary_or_pickled_profile_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "k.pkl"
    path.write_bytes(b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94.")  # a pickle
    with pytest.raises(ValueError, match="is a pickle file \\(protocol 4\\), which graphopt never"):
        KernelProfile.load(path)
    path.write_bytes(b"\xff\xfe binary")
    with pytest.raises(ValueError, match="not UTF-8 text \\(a binary or pickled file\\?\\)"):
        KernelProfile.load(path)


@pytest.mark.parametrize(("text", "holds"), [("[]", "list"), ('"k"', "string"), ("3", "number")])
def test_a_profile_that_is_not_a_json_object_names_the_keys(tmp_path: Path, text, holds) -> None:
    """#40: a JSON list was refused as "version None"."""
    path = tmp_path / "k.json"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        KernelProfile.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: a kernel profile must be a JSON object with keys version")
    assert "seconds" in message and message.endswith(f"this file holds a JSON {holds}")


@pytest.mark.parametrize(
    ("argument", "value", "says"),
    [
        ("iterations", 0, "iterations must be an integer in 1..1000, got 0"),
        ("iterations", 10**12, "iterations must be an integer in 1..1000, got 1000000000000"),
        ("iterations", 2.5, "iterations must be an integer in 1..1000, got 2.5"),
        ("warmup", -1, "warmup must be an integer in 0..1000, got -1"),
        ("warmup", 1001, "warmup must be an integer in 0..1000, got 1001"),
        ("threads", 0, "threads must be an integer in 1..1024, got 0"),
        ("threads", 4096, "threads must be an integer in 1..1024, got 4096"),
        ("threads", True, "threads must be an integer in 1..1024, got True"),
    ],
)
def test_counts_out_of_range_are_refused_before_any_work(
    monkeypatch: pytest.MonkeyPatch, argument: str, value: object, says: str
) -> None:
    from graphopt.errors import InvalidArgument
    from graphopt.measure import profile

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was built before the arguments were checked")

    monkeypatch.setattr(profile, "_zoo_workload", no_work)
    with pytest.raises(InvalidArgument) as info:
        profile_kernels("torch:resnet", **{argument: value})  # type: ignore[arg-type]
    assert str(info.value) == says and info.value.arguments == (argument,)


@pytest.mark.expensive
def test_a_compiled_resnet_kernels_map_to_its_ops() -> None:
    spec = "torch:resnet?depth=18&width=8&image=32&batch=1&classes=10"
    profile = profile_kernels(spec, iterations=2, warmup=1)
    graph = load_zoo(spec)
    names = set(graph.op_names)
    flat = [n for g in profile.groups for n in g]
    assert len(flat) == len(set(flat))  # each op in one kernel
    assert set(flat) <= names and len(flat) + len(profile.unmatched_ops) == len(names)
    assert all(s > 0 for s in profile.seconds)
    convs = [k for k, g in enumerate(profile.groups) if g[0].startswith("convolution")]
    assert convs and all(profile.extern[k] for k in convs)
    assert all(profile.kernel_names[k].startswith("aten::") for k in convs)
    # Batch norm and ReLU run fused, in a C++ kernel of Inductor's own.
    fused = [k for k, g in enumerate(profile.groups) if len(g) > 1]
    assert fused and not any(profile.extern[k] for k in fused)
    assert all("cpp_fused" in profile.kernel_names[k] for k in fused)
    assert profile.eager_seconds > 0
