"""A zoo of real architectures, imported through :func:`~graphopt.importers.torch.from_torch`.

No network is used: the pure ``torch.nn`` models live in :mod:`graphopt.importers.zoo_models`, and
the Hugging Face ones are built from their config classes (``GPT2Config(...)``, never a download)
on the meta device, so no weight memory is allocated either.

Models are addressed by spec strings ``torch:NAME?ARG=INT&ARG=INT`` (the ``torch:`` prefix is
optional); arguments left out take their defaults (:func:`list_zoo` shows them)::

    load_zoo("torch:gpt2?n_layer=12&seq=128")
    load_zoo("torch:resnet?depth=50&batch=8", training=True)

===============  ===================================================  ============
name             architecture                                         needs
===============  ===================================================  ============
``lstm``         LSTM encoder-decoder with attention (GNMT-style)     torch
``transformer``  Transformer encoder-decoder (``nn.Transformer``)     torch
``resnet``       ResNet-18/34/50/101/152                              torch
``inception``    Inception-v3-style CNN                               torch
``wavenet``      WaveNet                                              torch
``mobilenet``    MobileNetV2 (inverted residuals, depthwise convs)    torch
``vit``          Vision Transformer (ViT)                             torch
``gru``          GRU language model                                   torch
``unet``         U-Net (transposed convs, skip concatenations)        torch
``gpt2``         GPT-2 language model (``GPT2LMHeadModel``)           transformers
``bert``         BERT masked language model (``BertForMaskedLM``)     transformers
``t5``           T5 encoder-decoder (``T5ForConditionalGeneration``)  transformers
===============  ===================================================  ============

Hugging Face models need the optional extra ``pip install "graphopt[transformers]"`` (without it
they raise :class:`DependencyNotInstalled`, an ``ImportError``, with that hint); their
arguments are the config fields of the same name plus ``seq`` and ``batch``. Training graphs use
each model's own loss (cross-entropy over the logits; Hugging Face models get ``labels``).

Cache: :func:`load_zoo` keeps every graph it builds in ``cache_dir`` (default
``~/.cache/graphopt/zoo``, or ``$GRAPHOPT_CACHE_DIR``), one gzip graph file per key: model, all
arguments (defaults filled in, sorted), training flag, torch version, transformers version (for
its models), :data:`CACHE_VERSION` and the op-class table's digest
(:data:`graphopt.op_classes.TABLE_DIGEST`). Files are written atomically (:meth:`CompGraph.save`) and
only after a successful import; an unreadable file is rebuilt.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphopt.errors import DependencyNotInstalled
from graphopt.graph import CompGraph
from graphopt.op_classes import TABLE_DIGEST

CACHE_VERSION = 2
"""Bump when :func:`~graphopt.importers.torch.from_torch` or a zoo model changes its graphs."""

PREFIX = "torch:"
CACHE_ENV = "GRAPHOPT_CACHE_DIR"
INSTALL_HINT = 'pip install "graphopt[transformers]"'


@dataclass(frozen=True)
class Workload:
    """What :func:`~graphopt.importers.torch.from_torch` needs to import one zoo model."""

    model: Any
    inputs: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    loss_fn: Callable[..., Any] | None = None
    loss_inputs: tuple[Any, ...] = ()

    def import_arguments(self, training: bool) -> dict[str, Any]:
        """The keyword arguments an importer of the model takes beside the model and its inputs
        (:func:`~graphopt.importers.torch.from_torch` and its kin): ``example_kwargs``, and the
        loss only for a training graph."""
        return {
            "example_kwargs": self.kwargs,
            "loss_fn": self.loss_fn if training else None,
            "loss_inputs": self.loss_inputs if training else (),
        }


@dataclass(frozen=True)
class ZooEntry:
    """One model of the zoo: defaults of its integer arguments and its builder.

    ``build(args, training)`` runs under ``torch.device("meta")`` and returns the model and its
    example inputs; ``check(args)`` returns an error message for an invalid combination, or ``""``.
    """

    name: str
    description: str
    defaults: Mapping[str, int]
    build: Callable[[Mapping[str, int], bool], Workload]
    check: Callable[[Mapping[str, int]], str] = lambda args: ""
    needs_transformers: bool = False


# ---------------------------------------------------------------------------- builders
def _tokens(batch: int, seq: int) -> Any:
    import torch

    return torch.zeros(batch, seq, dtype=torch.long)  # values are never read: only shapes matter


def _classifier(model: Any, inputs: tuple[Any, ...], target_shape: tuple[int, ...]) -> Workload:
    import torch

    from graphopt.importers.zoo_models import cross_entropy

    targets = torch.zeros(target_shape, dtype=torch.long)
    return Workload(model, inputs, loss_fn=cross_entropy, loss_inputs=(targets,))


def _build_lstm(a: Mapping[str, int], training: bool) -> Workload:
    from graphopt.importers.zoo_models import Seq2SeqLSTM

    model = Seq2SeqLSTM(a["vocab"], a["hidden"], a["layers"])
    src = _tokens(a["batch"], a["seq"])
    return _classifier(model, (src, src.clone()), (a["batch"], a["seq"]))


def _build_transformer(a: Mapping[str, int], training: bool) -> Workload:
    from graphopt.importers.zoo_models import Seq2SeqTransformer

    model = Seq2SeqTransformer(
        a["vocab"], a["d_model"], a["heads"], a["ff"], a["layers"], max_len=a["seq"]
    )
    src = _tokens(a["batch"], a["seq"])
    return _classifier(model, (src, src.clone()), (a["batch"], a["seq"]))


def _build_resnet(a: Mapping[str, int], training: bool) -> Workload:
    import torch

    from graphopt.importers.zoo_models import ResNet

    images = torch.zeros(a["batch"], 3, a["image"], a["image"])
    return _classifier(ResNet(a["depth"], a["width"], a["classes"]), (images,), (a["batch"],))


def _build_inception(a: Mapping[str, int], training: bool) -> Workload:
    import torch

    from graphopt.importers.zoo_models import InceptionNet

    images = torch.zeros(a["batch"], 3, a["image"], a["image"])
    model = InceptionNet(a["blocks"], a["width"], a["classes"])
    return _classifier(model, (images,), (a["batch"],))


def _build_wavenet(a: Mapping[str, int], training: bool) -> Workload:
    from graphopt.importers.zoo_models import WaveNet

    model = WaveNet(a["layers"], a["stacks"], a["residual"], a["skip"], a["classes"])
    samples = _tokens(a["batch"], a["seq"])
    return _classifier(model, (samples,), (a["batch"], a["seq"]))


def _build_mobilenet(a: Mapping[str, int], training: bool) -> Workload:
    import torch

    from graphopt.importers.zoo_models import MobileNetV2

    images = torch.zeros(a["batch"], 3, a["image"], a["image"])
    model = MobileNetV2(a["width"], a["blocks"], a["classes"])
    return _classifier(model, (images,), (a["batch"],))


def _build_vit(a: Mapping[str, int], training: bool) -> Workload:
    import torch

    from graphopt.importers.zoo_models import VisionTransformer

    images = torch.zeros(a["batch"], 3, a["image"], a["image"])
    model = VisionTransformer(
        a["image"], a["patch"], a["d_model"], a["heads"], a["mlp"], a["layers"], a["classes"]
    )
    return _classifier(model, (images,), (a["batch"],))


def _build_gru(a: Mapping[str, int], training: bool) -> Workload:
    from graphopt.importers.zoo_models import GRULanguageModel

    model = GRULanguageModel(a["vocab"], a["hidden"], a["layers"])
    return _classifier(model, (_tokens(a["batch"], a["seq"]),), (a["batch"], a["seq"]))


def _build_unet(a: Mapping[str, int], training: bool) -> Workload:
    import torch

    from graphopt.importers.zoo_models import UNet

    images = torch.zeros(a["batch"], 3, a["image"], a["image"])
    model = UNet(a["depth"], a["width"], a["classes"])
    return _classifier(model, (images,), (a["batch"], a["image"], a["image"]))


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as e:
        raise DependencyNotInstalled(
            f"Hugging Face zoo models need the transformers package: {INSTALL_HINT}"
        ) from e
    return transformers


def _hf_workload(model: Any, kwargs: dict[str, Any], training: bool) -> Workload:
    if training:
        kwargs["labels"] = kwargs["input_ids"]  # the model's own LM loss (output.loss)
    return Workload(model, (), kwargs)


def _build_gpt2(a: Mapping[str, int], training: bool) -> Workload:
    tf = _transformers()
    config = tf.GPT2Config(
        n_layer=a["n_layer"],
        n_head=a["n_head"],
        n_embd=a["n_embd"],
        vocab_size=a["vocab_size"],
        n_positions=max(1024, a["seq"]),
        bos_token_id=a["vocab_size"] - 1,  # GPT-2's own choice (50256), valid for any vocabulary
        eos_token_id=a["vocab_size"] - 1,
        use_cache=False,
    )
    ids = _tokens(a["batch"], a["seq"])
    return _hf_workload(tf.GPT2LMHeadModel(config), {"input_ids": ids}, training)


def _build_bert(a: Mapping[str, int], training: bool) -> Workload:
    tf = _transformers()
    config = tf.BertConfig(
        num_hidden_layers=a["num_hidden_layers"],
        hidden_size=a["hidden_size"],
        num_attention_heads=a["num_attention_heads"],
        intermediate_size=a["intermediate_size"],
        vocab_size=a["vocab_size"],
        max_position_embeddings=max(512, a["seq"]),
    )
    ids = _tokens(a["batch"], a["seq"])
    return _hf_workload(tf.BertForMaskedLM(config), {"input_ids": ids}, training)


def _build_t5(a: Mapping[str, int], training: bool) -> Workload:
    tf = _transformers()
    config = tf.T5Config(
        num_layers=a["num_layers"],
        num_decoder_layers=a["num_layers"],
        d_model=a["d_model"],
        num_heads=a["num_heads"],
        d_kv=a["d_model"] // a["num_heads"],
        d_ff=a["d_ff"],
        vocab_size=a["vocab_size"],
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
        use_cache=False,
    )
    ids = _tokens(a["batch"], a["seq"])
    kwargs = {"input_ids": ids}
    if not training:  # with labels, T5 derives decoder_input_ids from them
        kwargs["decoder_input_ids"] = ids.clone()
    return _hf_workload(tf.T5ForConditionalGeneration(config), kwargs, training)


def _divides(a: Mapping[str, int], heads: str, width: str) -> str:
    if a[width] % a[heads]:
        return f"{width}={a[width]} must be a multiple of {heads}={a[heads]}"
    return ""


def _check_mobilenet(a: Mapping[str, int]) -> str:
    from graphopt.importers.zoo_models import MOBILENET_BLOCKS

    if a["blocks"] > MOBILENET_BLOCKS:
        return f"blocks={a['blocks']} is more than MobileNetV2's {MOBILENET_BLOCKS}; use 1 to 17"
    if a["width"] % 4:
        return f"width={a['width']} must be a multiple of 4 (e.g. 32, the paper's)"
    return ""


def _check_unet(a: Mapping[str, int]) -> str:
    side = 2 ** a["depth"]
    if a["image"] % side:
        return (
            f"image={a['image']} must be a multiple of 2**depth={side} (each of the "
            f"{a['depth']} levels halves it), e.g. image={max(1, a['image'] // side) * side}"
        )
    return ""


ZOO: dict[str, ZooEntry] = {
    entry.name: entry
    for entry in (
        ZooEntry(
            "lstm",
            "LSTM encoder-decoder with Luong attention (GNMT-style)",
            {"layers": 2, "hidden": 512, "vocab": 16000, "seq": 32, "batch": 64},
            _build_lstm,
        ),
        ZooEntry(
            "transformer",
            "Transformer encoder-decoder (nn.Transformer), learned positions",
            {
                "layers": 6,
                "d_model": 512,
                "heads": 8,
                "ff": 2048,
                "vocab": 32000,
                "seq": 128,
                "batch": 8,
            },
            _build_transformer,
            check=lambda a: _divides(a, "heads", "d_model"),
        ),
        ZooEntry(
            "resnet",
            "ResNet image classifier (depth 18/34/50/101/152)",
            {"depth": 50, "width": 64, "image": 224, "batch": 32, "classes": 1000},
            _build_resnet,
            check=lambda a: (
                ""
                if a["depth"] in (18, 34, 50, 101, 152)
                else f"depth={a['depth']} is not a ResNet; choose one of 18, 34, 50, 101, 152"
            ),
        ),
        ZooEntry(
            "inception",
            "Inception-v3-style CNN: 4-branch and factorised-7x7 modules",
            {"blocks": 3, "width": 32, "image": 299, "batch": 32, "classes": 1000},
            _build_inception,
            check=lambda a: "" if a["width"] % 2 == 0 else f"width={a['width']} must be even",
        ),
        ZooEntry(
            "wavenet",
            "WaveNet: dilated causal convolutions, gated units, skip connections",
            {
                "layers": 10,
                "stacks": 2,
                "residual": 64,
                "skip": 128,
                "classes": 256,
                "seq": 4096,
                "batch": 4,
            },
            _build_wavenet,
        ),
        ZooEntry(
            "mobilenet",
            "MobileNetV2: inverted residual blocks, depthwise convolutions, ReLU6",
            {"width": 32, "blocks": 17, "image": 224, "batch": 32, "classes": 1000},
            _build_mobilenet,
            check=_check_mobilenet,
        ),
        ZooEntry(
            "vit",
            "Vision Transformer: patch embedding, class token, pre-norm encoder blocks",
            {
                "layers": 12,
                "d_model": 768,
                "heads": 12,
                "mlp": 3072,
                "patch": 16,
                "image": 224,
                "batch": 8,
                "classes": 1000,
            },
            _build_vit,
            check=lambda a: _divides(a, "heads", "d_model") or _divides(a, "patch", "image"),
        ),
        ZooEntry(
            "gru",
            "GRU language model: embedding, stacked GRU, projection to the vocabulary",
            {"layers": 2, "hidden": 512, "vocab": 16000, "seq": 32, "batch": 64},
            _build_gru,
        ),
        ZooEntry(
            "unet",
            "U-Net: max-pool down, transposed convolutions up, skip concatenations",
            {"depth": 4, "width": 64, "image": 256, "batch": 4, "classes": 2},
            _build_unet,
            check=_check_unet,
        ),
        ZooEntry(
            "gpt2",
            "GPT-2 language model (Hugging Face GPT2LMHeadModel)",
            {
                "n_layer": 12,
                "n_head": 12,
                "n_embd": 768,
                "vocab_size": 50257,
                "seq": 128,
                "batch": 1,
            },
            _build_gpt2,
            check=lambda a: _divides(a, "n_head", "n_embd"),
            needs_transformers=True,
        ),
        ZooEntry(
            "bert",
            "BERT masked language model (Hugging Face BertForMaskedLM)",
            {
                "num_hidden_layers": 12,
                "hidden_size": 768,
                "num_attention_heads": 12,
                "intermediate_size": 3072,
                "vocab_size": 30522,
                "seq": 128,
                "batch": 1,
            },
            _build_bert,
            check=lambda a: _divides(a, "num_attention_heads", "hidden_size"),
            needs_transformers=True,
        ),
        ZooEntry(
            "t5",
            "T5 encoder-decoder (Hugging Face T5ForConditionalGeneration)",
            {
                "num_layers": 6,
                "d_model": 512,
                "num_heads": 8,
                "d_ff": 2048,
                "vocab_size": 32128,
                "seq": 128,
                "batch": 1,
            },
            _build_t5,
            check=lambda a: _divides(a, "num_heads", "d_model"),
            needs_transformers=True,
        ),
    )
}


# ---------------------------------------------------------------------------- specs
def list_zoo() -> dict[str, str]:
    """Zoo name -> description with its default arguments (and the extra it needs)."""
    out = {}
    for name, entry in ZOO.items():
        defaults = "&".join(f"{k}={v}" for k, v in entry.defaults.items())
        extra = f"; needs {INSTALL_HINT}" if entry.needs_transformers else ""
        out[name] = f"{entry.description} (defaults: {PREFIX}{name}?{defaults}{extra})"
    return out


def parse_spec(spec: str) -> tuple[ZooEntry, dict[str, int]]:
    """Split ``torch:NAME?ARG=INT&...`` into its zoo entry and all arguments (defaults filled in).

    Raises:
        ValueError: an unknown model or argument, a value that is not a positive integer, an
            argument given twice, or an invalid combination (e.g. heads not dividing the width).
    """
    if not isinstance(spec, str):
        raise ValueError(f"a zoo spec is a string like 'torch:gpt2?n_layer=12', got {spec!r}")
    body = spec.strip()
    if body.startswith(PREFIX):
        body = body[len(PREFIX) :]
    elif ":" in body.split("?", 1)[0]:
        raise ValueError(
            f"zoo spec {spec!r} has the prefix {body.split(':', 1)[0]!r}; the zoo's prefix is "
            f"'torch:' (e.g. 'torch:gpt2?n_layer=12')"
        )
    name, _, query = body.partition("?")
    entry = ZOO.get(name)
    if entry is None:
        raise ValueError(f"unknown zoo model {name!r} in {spec!r}; choose one of: {', '.join(ZOO)}")
    args = dict(entry.defaults)
    given: set[str] = set()
    for part in filter(None, query.split("&")):
        key, eq, value = part.partition("=")
        if key not in entry.defaults:
            raise ValueError(
                f"unknown argument {key!r} for zoo model {name!r}; valid arguments: "
                + ", ".join(f"{k} (default {v})" for k, v in entry.defaults.items())
            )
        if key in given:
            raise ValueError(f"argument {key!r} given twice in zoo spec {spec!r}")
        given.add(key)
        value = value.strip()
        if not eq or not value.isdecimal() or int(value) < 1:
            raise ValueError(
                f"argument {key}={value!r} of zoo model {name!r} must be a positive integer "
                f"(e.g. {key}={entry.defaults[key]})"
            )
        args[key] = int(value)
    problem = entry.check(args)
    if problem:
        raise ValueError(f"zoo spec {spec!r}: {problem}")
    return entry, args


def canonical_spec(name: str, args: Mapping[str, int]) -> str:
    """``torch:NAME?...`` with only the arguments that differ from the defaults, sorted."""
    defaults = ZOO[name].defaults
    changed = sorted((k, v) for k, v in args.items() if defaults[k] != v)
    query = "&".join(f"{k}={v}" for k, v in changed)
    return f"{PREFIX}{name}" + (f"?{query}" if query else "")


# ---------------------------------------------------------------------------- building and cache
def build_zoo(spec: str, *, training: bool = False) -> CompGraph:
    """Import a zoo model now, bypassing the cache (see :func:`load_zoo`)."""
    entry, args = parse_spec(spec)
    return _build(entry, args, training)


def zoo_workload(
    spec: str, *, training: bool, device: str = "meta"
) -> tuple[Workload, str, dict[str, Any]]:
    """The zoo model ``spec`` with its inputs, built under ``torch.device(device)`` (``"meta"``:
    no weights, as the importer and Inductor take it; ``"cpu"``: real random weights, to run it),
    the name of its graph and its graph's zoo metadata.

    Raises:
        ValueError: a bad spec.
        DependencyNotInstalled: a Hugging Face model without ``transformers``.
    """
    entry, args = parse_spec(spec)
    return _workload(entry, args, training, device)


def _workload(
    entry: ZooEntry, args: Mapping[str, int], training: bool, device: str
) -> tuple[Workload, str, dict[str, Any]]:
    import torch

    if entry.needs_transformers:
        _transformers()
    with torch.device(device):
        work = entry.build(args, training)
    name = canonical_spec(entry.name, args) + (" (training)" if training else "")
    return work, name, {"zoo": entry.name, "zoo_args": dict(args)}


def _build(entry: ZooEntry, args: Mapping[str, int], training: bool) -> CompGraph:
    from graphopt.importers.torch import from_torch

    work, name, metadata = _workload(entry, args, training, "meta")
    return from_torch(
        work.model,
        work.inputs,
        name=name,
        training=training,
        metadata=metadata,
        **work.import_arguments(training),
    )


def cache_dir_default() -> Path:
    """``$GRAPHOPT_CACHE_DIR`` if set, else ``~/.cache/graphopt/zoo``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "graphopt" / "zoo"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def cache_path(spec: str, *, training: bool = False, cache_dir: Path | str | None = None) -> Path:
    """Where :func:`load_zoo` keeps the graph of ``spec`` (whether or not it exists yet)."""
    entry, args = parse_spec(spec)
    return _cache_path(entry, args, training, cache_dir)


def _cache_path(
    entry: ZooEntry, args: Mapping[str, int], training: bool, cache_dir: Path | str | None
) -> Path:
    root = Path(cache_dir).expanduser() if cache_dir is not None else cache_dir_default()
    torch_version = _version("torch")
    key_parts = [
        entry.name,
        "&".join(f"{k}={args[k]}" for k in sorted(args)),
        "train" if training else "fwd",
        f"torch={torch_version}",
        f"transformers={_version('transformers')}" if entry.needs_transformers else "",
        f"v{CACHE_VERSION}",
        f"classes={TABLE_DIGEST}",
    ]
    digest = hashlib.sha256("|".join(key_parts).encode()).hexdigest()[:16]
    mode = "train" if training else "fwd"
    return root / f"{entry.name}-{mode}-torch{torch_version}-{digest}.json.gz"


def load_zoo(
    spec: str, *, training: bool = False, cache_dir: Path | str | None = None
) -> CompGraph:
    """The graph of a zoo model, from the cache when it is there, else imported and cached.

    Args:
        spec: ``torch:NAME?ARG=INT&...`` (see the module docstring and :func:`list_zoo`).
        training: the forward + backward graph instead of the forward one.
        cache_dir: where graph files are kept (default: :func:`cache_dir_default`).

    Raises:
        ValueError: a bad spec (unknown model or argument, a value that is not a positive
            integer) or a failed import (see :func:`~graphopt.importers.torch.from_torch`).
        DependencyNotInstalled: a Hugging Face model without ``transformers``; the message holds
            the install command.

    Nothing is written to the cache on failure.
    """
    entry, args = parse_spec(spec)
    path = _cache_path(entry, args, training, cache_dir)
    if path.exists():
        try:
            return CompGraph.load(path)
        except ValueError:
            pass  # unreadable (e.g. written by a crashed older version): rebuild it
    graph = _build(entry, args, training)
    graph.save(path)
    return graph
