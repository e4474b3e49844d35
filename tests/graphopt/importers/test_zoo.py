"""Tests of graphopt.importers.zoo: every model imports (forward and training) with FLOPs equal to
FlopCounterMode's, simulates, and the spec parser, cache and errors behave."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest
import torch

from graphopt.graph import CompGraph
from graphopt.hardware import get_cluster
from graphopt.importers import zoo
from graphopt.importers.torch import reference_flops
from graphopt.sim import simulate

torch.set_num_threads(1)

SMALL = {
    "lstm": "layers=1&hidden=16&vocab=50&seq=5&batch=2",
    "transformer": "layers=1&d_model=16&heads=2&ff=32&vocab=50&seq=6&batch=2",
    "resnet": "depth=18&width=4&image=32&batch=2&classes=10",
    "inception": "blocks=1&width=4&image=64&batch=1&classes=10",
    "wavenet": "layers=3&stacks=2&residual=8&skip=8&classes=16&seq=16&batch=1",
    "mobilenet": "width=4&blocks=4&image=16&batch=1&classes=10",
    "vit": "layers=2&d_model=8&heads=2&mlp=16&patch=4&image=8&batch=1&classes=4",
    "gru": "layers=2&hidden=8&vocab=20&seq=3&batch=1",
    "unet": "depth=2&width=2&image=8&batch=1&classes=2",
    "gpt2": "n_layer=2&n_head=2&n_embd=16&vocab_size=64&seq=8",
    "bert": "num_hidden_layers=2&hidden_size=16&num_attention_heads=2&intermediate_size=32"
    "&vocab_size=64&seq=8",
    "t5": "num_layers=2&d_model=16&num_heads=2&d_ff=32&vocab_size=64&seq=8",
}
PURE = [name for name, entry in zoo.ZOO.items() if not entry.needs_transformers]
HF = [name for name, entry in zoo.ZOO.items() if entry.needs_transformers]
BATCH_NORM = ("resnet", "inception", "mobilenet", "unet")
"""Models with batch norm: in eval mode its step counters are state that no op reads."""


def small(name: str) -> str:
    return f"torch:{name}?{SMALL[name]}"


@functools.cache
def built(name: str, training: bool) -> CompGraph:
    """The graph of ``small(name)``, imported once per test run (graphs are immutable)."""
    return zoo.build_zoo(small(name), training=training)


def reference(spec: str, training: bool) -> int:
    work, _, _ = zoo.zoo_workload(spec, training=training)
    return reference_flops(
        work.model,
        work.inputs,
        training=training,
        **work.import_arguments(training),
    )


def check_model(name: str) -> None:
    spec = small(name)
    forward, training = built(name, False), built(name, True)
    cluster = get_cluster("v100-nvlink-4")
    for graph, is_training in ((forward, False), (training, True)):
        assert graph.num_ops > 0 and graph.num_edges > 0
        assert graph.flops.sum() == reference(spec, is_training) > 0
        # every state tensor is attributed once; eval mode leaves BN's step counters unread
        unread = graph.metadata["unattributed_state_bytes"]
        assert graph.param_bytes.sum() == graph.metadata["state_bytes"] - unread > 0
        assert unread == 0 or (not is_training and name in BATCH_NORM)
        assert graph.metadata["zoo"] == name and graph.metadata["training"] is is_training
        assert CompGraph.from_json_dict(graph.to_json_dict()).fingerprint == graph.fingerprint
        m = simulate(graph, cluster)
        assert (m.valid or "out of memory" in m.reason) and m.step_time > 0
    assert training.num_ops > forward.num_ops
    assert training.flops.sum() > forward.flops.sum()
    assert training.name.endswith("(training)")


def test_list_zoo_describes_every_model_with_defaults() -> None:
    listing = zoo.list_zoo()
    assert set(listing) == set(zoo.ZOO) >= {"lstm", "transformer", "resnet", "inception"}
    assert {"wavenet", "gpt2", "bert", "t5", "mobilenet", "vit", "gru", "unet"} <= set(listing)
    assert (
        "torch:gpt2?n_layer=12" in listing["gpt2"] and "graphopt[transformers]" in listing["gpt2"]
    )
    assert "depth=50" in listing["resnet"]


# ---------------------------------------------------------------------------- every model
SLOW = ("resnet", "lstm", "transformer", "inception", "mobilenet", "unet", "gru", "wavenet", "vit")
"""Models whose import (two torch.export runs of 3-10 s each) is left to the expensive runs (CI):
in every run, resnet's training graph (convolutions, batch norm, residual adds) is still
exported by ``test_layers_are_module_paths``; attention and layer norm (vit, transformer), the
recurrences (gru, lstm), concatenated branches (unet, inception), depthwise convolutions
(mobilenet) and dilated causal convolutions (wavenet) run in CI."""


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.expensive) if n in SLOW else n for n in PURE],
)
def test_pure_torch_model_imports(name: str) -> None:
    check_model(name)


@pytest.mark.parametrize("name", HF)
def test_hugging_face_model_imports(name: str) -> None:
    pytest.importorskip("transformers")
    check_model(name)


def test_layers_are_module_paths() -> None:
    graph = built("resnet", True)
    assert {"stem.0", "stages.0.0.conv1.0", "fc"} <= set(graph.layer)
    backward = [i for i, t in enumerate(graph.op_types) if t == "convolution_backward"]
    assert backward and all(graph.layer[i].startswith(("stem", "stages")) for i in backward)


def convolutions(graph: CompGraph) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
    """``(layer, input shapes)`` of every convolution: ``(x [B, C, H, W], weight, ...)``."""
    return [
        (graph.layer[i], graph.input_shapes[i])
        for i, t in enumerate(graph.op_types)
        if t == "convolution"
    ]


@pytest.mark.expensive  # an export of seconds; CI runs it
def test_mobilenet_has_depthwise_convolutions_and_relu6() -> None:
    forward, training = built("mobilenet", False), built("mobilenet", True)
    # groups = channels: the weight is [C, 1, 3, 3] for an input of C channels
    depthwise = [layer for layer, (x, w) in convolutions(forward) if w[1] == 1 and w[0] == x[1] > 1]
    assert len(depthwise) == 4 and all(".block." in layer for layer in depthwise)  # one a block
    assert forward.op_types.count("hardtanh") == 2 * 4 - 1 + 2  # ReLU6: blocks, stem, head
    assert training.op_types.count("convolution_backward") == len(convolutions(forward))
    assert "_native_batch_norm_legit_functional" in training.op_types


@pytest.mark.expensive  # exports a ViT: seconds (CI runs it)
def test_vit_has_patch_convolution_and_attention() -> None:
    forward, training = built("vit", False), built("vit", True)
    [(layer, (x, w, _))] = convolutions(forward)  # the patch embedding alone
    assert layer == "patch_embed" and x == (1, 3, 8, 8) and w == (8, 3, 4, 4)
    assert forward.op_types.count("_softmax") == forward.op_types.count("gelu") == 2  # a layer
    assert forward.op_types.count("native_layer_norm") == 2 * 2 + 1
    assert training.op_types.count("convolution_backward") == 1


@pytest.mark.expensive  # an export of seconds; CI runs it
def test_gru_unrolls_its_recurrence() -> None:
    forward, training = built("gru", False), built("gru", True)
    steps = 2 * 3  # layers x seq
    assert forward.op_types.count("sigmoid") == 2 * steps  # reset and update gates
    assert forward.op_types.count("tanh") == steps  # candidate state
    assert "embedding" in forward.op_types and "gru" not in forward.op_types
    assert training.op_types.count("sigmoid") == 2 * steps and "embedding" in training.op_types


@pytest.mark.expensive  # an export of seconds; CI runs it
def test_unet_has_transposed_convolutions_and_skips() -> None:
    forward, training = built("unet", False), built("unet", True)
    depth = 2
    upsampling = [layer for layer, (x, w, *_) in convolutions(forward) if w[2] == 2]
    assert upsampling == ["up.0", "up.1"]  # 2x2 stride-2 transposed convolutions
    assert forward.op_types.count("max_pool2d_with_indices") == depth
    assert forward.op_types.count("cat") == depth  # one skip concatenation a level
    assert training.op_types.count("convolution_backward") == len(convolutions(forward))
    assert training.op_types.count("max_pool2d_with_indices_backward") == depth


# ---------------------------------------------------------------------------- specs
def test_spec_defaults_prefix_and_order() -> None:
    entry, args = zoo.parse_spec("resnet?batch=2&depth=18")
    assert entry.name == "resnet" and args == {**entry.defaults, "batch": 2, "depth": 18}
    assert zoo.parse_spec("torch:resnet?depth=18&batch=2")[1] == args
    assert zoo.canonical_spec("resnet", args) == "torch:resnet?batch=2&depth=18"
    assert zoo.canonical_spec("resnet", entry.defaults) == "torch:resnet"


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown zoo model 'vgg'.*lstm, transformer, resnet"):
        zoo.parse_spec("torch:vgg?depth=16")


def test_unknown_argument_is_named_with_the_valid_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unknown argument 'layers' .*'gpt2'.*n_layer \(default 12\)"
    ):
        zoo.parse_spec("torch:gpt2?layers=12")


@pytest.mark.parametrize("value", ["abc", "1.5", "-2", "0", ""])
def test_argument_values_must_be_positive_integers(value: str) -> None:
    with pytest.raises(ValueError, match=f"seq='{value}'.*positive integer"):
        zoo.parse_spec(f"torch:gpt2?seq={value}")


def test_bad_specs() -> None:
    with pytest.raises(ValueError, match="given twice"):
        zoo.parse_spec("torch:gpt2?seq=8&seq=16")
    with pytest.raises(ValueError, match="positive integer"):
        zoo.parse_spec("torch:gpt2?seq")
    with pytest.raises(ValueError, match="prefix 'tf'"):
        zoo.parse_spec("tf:gpt2")
    with pytest.raises(ValueError, match="choose one of 18, 34, 50, 101, 152"):
        zoo.parse_spec("torch:resnet?depth=20")
    with pytest.raises(ValueError, match="multiple of n_head"):
        zoo.parse_spec("torch:gpt2?n_embd=100&n_head=12")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("mobilenet?blocks=18", "blocks=18 is more than MobileNetV2's 17; use 1 to 17"),
        ("mobilenet?width=30", "width=30 must be a multiple of 4"),
        ("vit?d_model=100&heads=12", "d_model=100 must be a multiple of heads=12"),
        ("vit?image=100&patch=16", "image=100 must be a multiple of patch=16"),
        ("unet?depth=3&image=100", r"image=100 must be a multiple of 2\*\*depth=8.*image=96"),
    ],
)
def test_bad_combinations_of_the_new_families(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        zoo.parse_spec(spec)


def test_missing_transformers_gives_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails
    with pytest.raises(zoo.DependencyNotInstalled, match=r'pip install "graphopt\[transformers\]"'):
        zoo.load_zoo(small("gpt2"), cache_dir=tmp_path)
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------- cache
def test_cache_round_trip_reads_the_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = small("wavenet")
    first = zoo.load_zoo(spec, cache_dir=tmp_path)
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].name.endswith(".json.gz")
    assert files[0] == zoo.cache_path(spec, cache_dir=tmp_path)

    def no_build(*args, **kwargs):
        raise AssertionError("the cached graph should have been read")

    monkeypatch.setattr(zoo, "_build", no_build)
    second = zoo.load_zoo(spec, cache_dir=tmp_path)
    assert second.fingerprint == first.fingerprint and second.name == first.name
    assert second.metadata["zoo_args"] == first.metadata["zoo_args"]
    # the same model spelled differently is the same cache entry
    reordered = "wavenet?" + "&".join(reversed(SMALL["wavenet"].split("&")))
    assert zoo.load_zoo(reordered, cache_dir=tmp_path).fingerprint == first.fingerprint


def test_cache_key_separates_training_and_arguments(tmp_path: Path) -> None:
    spec = small("wavenet")
    paths = {
        zoo.cache_path(spec, cache_dir=tmp_path),
        zoo.cache_path(spec, training=True, cache_dir=tmp_path),
        zoo.cache_path(spec.replace("seq=16", "seq=32"), cache_dir=tmp_path),
    }
    assert len(paths) == 3
    # a default given explicitly is the same model
    assert zoo.cache_path("torch:resnet?depth=50", cache_dir=tmp_path) == zoo.cache_path(
        "resnet", cache_dir=tmp_path
    )
    assert torch.__version__.split("+")[0] in zoo.cache_path(spec, cache_dir=tmp_path).name


def test_cache_dir_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path / "env"))
    assert zoo.cache_dir_default() == tmp_path / "env"
    assert zoo.cache_path(small("wavenet")).parent == tmp_path / "env"
    assert zoo.cache_path(small("wavenet"), cache_dir=tmp_path).parent == tmp_path
    monkeypatch.delenv(zoo.CACHE_ENV)
    assert zoo.cache_dir_default() == Path.home() / ".cache" / "graphopt" / "zoo"


def test_nothing_is_cached_on_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(*args, **kwargs):
        raise ValueError("torch.export cannot capture ...")

    monkeypatch.setattr(zoo, "_build", broken)
    with pytest.raises(ValueError, match="cannot capture"):
        zoo.load_zoo(small("wavenet"), cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_unreadable_cache_file_is_rebuilt(tmp_path: Path) -> None:
    spec = small("wavenet")
    path = zoo.cache_path(spec, cache_dir=tmp_path)
    path.write_bytes(b"not gzip")
    graph = zoo.load_zoo(spec, cache_dir=tmp_path)
    assert CompGraph.load(path).fingerprint == graph.fingerprint


# ---------------------------------------------------------------------------- speed
@pytest.mark.expensive
def test_gpt2_12_layers_imports_and_loads_from_cache(tmp_path: Path) -> None:
    """Functional only: the import and cache times are measured by bench/bench_import.py."""
    pytest.importorskip("transformers")
    torch.set_num_threads(2)
    try:
        graph = zoo.load_zoo("torch:gpt2?n_layer=12&seq=128", cache_dir=tmp_path)
        cached = zoo.load_zoo("torch:gpt2?n_layer=12&seq=128", cache_dir=tmp_path)
        assert cached.fingerprint == graph.fingerprint
    finally:
        torch.set_num_threads(1)
