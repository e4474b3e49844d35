"""Parameterised built-in families addressed by name: ``gen:FAMILY?ARG=INT&ARG=INT``.

Every builder of :mod:`graphopt.workloads` takes integer sizes; a ``gen:`` name picks one
configuration, so a training distribution of hundreds of graphs is a list of strings
(:mod:`graphopt.workloads.distribution`) and any of them can be rebuilt from its name::

    get_graph("gen:rnnlm?layers=2&hidden=256&batch=16&steps=8&vocab=1000")
    get_graph("gen:layered?ops=800&seed=3")

=============  =====================================================================  ==============
family         arguments (defaults)                                                   architecture
=============  =====================================================================  ==============
``rnnlm``      layers 2, hidden 256, batch 16, vocab 1000, steps 4 (``rnnlm-tiny``)   layers, hidden
``gnmt``       layers 2 (>= 2), hidden 256, batch 16, vocab 1000, src_len 2,          layers, hidden
               tgt_len 2 (``gnmt-tiny``)
``txl``        layers 1, d_model 128, heads 2, d_inner 512, tgt_len 32, mem_len 32,   layers, d_model,
               vocab 204, batch 4, segments 1 (``txl-tiny``); the head width is       heads, d_inner
               ``d_model / heads``
``inception``  batch 32, image 299 (>= 75), classes 1001, aux 1 (0 or 1: the          classes, aux
               auxiliary head) (``inception-v3``)
``layered``    ops 100 (>= 2), seed 0 (>= 0), width ``round(sqrt(ops))``, inputs 3,   ops, width
               skip 10 (percent, 0-100): :func:`~graphopt.workloads.random_dags.layered_dag`
``sp``         ops 100 (>= 2), seed 0 (>= 0), series 60 (percent, 0-100):             ops, series
               :func:`~graphopt.workloads.random_dags.series_parallel_dag`
``amoebanet``  cells 1, filters 16 (>= 4), batch 8, image 64 (>= 32), classes 1001    cells, filters
               (``amoebanet-small``)
``wavenet``    stacks 1, layers 4, residual 32, dilation 32, skip 64, quantization    stacks, layers,
               256, batch 1, samples 1000 (``wavenet-tiny``)                          residual,
                                                                                      dilation, skip
=============  =====================================================================  ==============

Defaults are the registry's reduced variants (named in brackets), so ``gen:rnnlm`` is
``rnnlm-tiny``'s configuration. Every argument is an integer, at least 1 unless stated. The
*architecture* arguments are those that change the model rather than its data (batch, sequence
length, image size): the train / family-test split of :mod:`~graphopt.workloads.distribution`
keeps every test configuration apart from training in at least one of them. GO's Inception-v3 has a
fixed depth, so its only architecture arguments are the classifier width and the auxiliary head.

Canonical names: :func:`canonical_name` sorts the arguments and fills in every default, so two
spellings of one configuration are one graph, and a built graph's ``name`` is its canonical name.
A generated graph may hold at most :data:`MAX_OPS` ops.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from graphopt.graph import CompGraph

PREFIX = "gen:"
MAX_OPS = 20_000
"""Largest generated graph: bigger configurations raise ``ValueError`` (a graph this size takes
seconds to build and minutes to optimise; import real models of that size with ``torch:``)."""


@dataclass(frozen=True)
class GenFamily:
    """One family of generated graphs.

    Attributes:
        name: the family in ``gen:NAME``.
        description: one line.
        defaults: every argument with its default (``None``: derived by ``derive``).
        architecture: the arguments that change the model (see the module docstring).
        size: the arguments that the op count depends on (the others change costs only), each
            growing it, most effective first (named in the error of a graph over
            :data:`MAX_OPS`).
        build: ``build(args, name)`` returns the graph of the full argument set.
        estimate: a rough op count (within a factor of 2) to refuse a runaway size unbuilt.
        minimum: arguments whose least value is not 1; ``maximum``: those with an upper bound.
        check: an error message for an invalid combination, or ``""``.
        derive: fills in the defaults that depend on other arguments.
    """

    name: str
    description: str
    defaults: Mapping[str, int | None]
    architecture: tuple[str, ...]
    size: tuple[str, ...]
    build: Callable[[Mapping[str, int], str], CompGraph]
    estimate: Callable[[Mapping[str, int]], int]
    minimum: Mapping[str, int] = field(default_factory=dict)
    maximum: Mapping[str, int] = field(default_factory=dict)
    check: Callable[[Mapping[str, int]], str] = lambda args: ""
    derive: Callable[[dict[str, int]], None] = lambda args: None


# ---------------------------------------------------------------------------- builders
def _rnnlm(a: Mapping[str, int], name: str) -> CompGraph:
    from graphopt.workloads.rnnlm import rnnlm

    return rnnlm(
        a["layers"],
        hidden=a["hidden"],
        batch=a["batch"],
        vocab=a["vocab"],
        num_steps=a["steps"],
        name=name,
    )


def _gnmt(a: Mapping[str, int], name: str) -> CompGraph:
    from graphopt.workloads.gnmt import gnmt

    return gnmt(
        a["layers"],
        hidden=a["hidden"],
        batch=a["batch"],
        vocab=a["vocab"],
        src_len=a["src_len"],
        tgt_len=a["tgt_len"],
        name=name,
    )


def _txl(a: Mapping[str, int], name: str) -> CompGraph:
    from graphopt.workloads.transformer_xl import transformer_xl

    return transformer_xl(
        a["layers"],
        d_model=a["d_model"],
        n_head=a["heads"],
        d_head=a["d_model"] // a["heads"],
        d_inner=a["d_inner"],
        tgt_len=a["tgt_len"],
        mem_len=a["mem_len"],
        vocab=a["vocab"],
        batch=a["batch"],
        num_segments=a["segments"],
        name=name,
    )


def _inception(a: Mapping[str, int], name: str) -> CompGraph:
    from graphopt.workloads.inception import inception_v3

    return inception_v3(
        batch=a["batch"],
        image_size=a["image"],
        num_classes=a["classes"],
        aux_logits=bool(a["aux"]),
        name=name,
    )


def _layered(a: Mapping[str, int], name: str) -> CompGraph:
    from graphopt.workloads.random_dags import layered_dag

    return layered_dag(
        a["ops"],
        a["seed"],
        width=a["width"],
        max_inputs=a["inputs"],
        skip_prob=a["skip"] / 100,
        name=name,
    )


def _sp(a: Mapping[str, int], name: str) -> CompGraph:
    from graphopt.workloads.random_dags import series_parallel_dag

    return series_parallel_dag(a["ops"], a["seed"], series_prob=a["series"] / 100, name=name)


def _amoebanet(a: Mapping[str, int], name: str) -> CompGraph:
    from graphopt.workloads.amoebanet import amoebanet

    return amoebanet(
        num_cells=a["cells"],
        filters=a["filters"],
        batch=a["batch"],
        image_size=a["image"],
        num_classes=a["classes"],
        name=name,
    )


def _wavenet(a: Mapping[str, int], name: str) -> CompGraph:
    from graphopt.workloads.wavenet import wavenet

    return wavenet(
        a["stacks"],
        layers_per_stack=a["layers"],
        residual_channels=a["residual"],
        dilation_channels=a["dilation"],
        skip_channels=a["skip"],
        quantization=a["quantization"],
        batch=a["batch"],
        samples=a["samples"],
        name=name,
    )


def _check_txl(a: Mapping[str, int]) -> str:
    if a["d_model"] % a["heads"]:
        fix = max(1, round(a["d_model"] / (2 * a["heads"]))) * 2 * a["heads"]
        return (
            f"d_model={a['d_model']} must be a multiple of heads={a['heads']} (each head is "
            f"d_model/heads wide); e.g. d_model={fix}"
        )
    if (a["d_model"] // a["heads"]) % 2:
        return (
            f"the head width d_model/heads={a['d_model'] // a['heads']} must be even "
            f"(sinusoidal positions); e.g. d_model={a['d_model'] + a['heads']}"
        )
    return ""


def _check_ops(a: Mapping[str, int]) -> str:
    if a["ops"] > MAX_OPS:  # exact for the random families: refused unbuilt
        return (
            f"ops={a['ops']:,} is over the limit of {MAX_OPS:,} for a generated graph; "
            f"e.g. ops={MAX_OPS // 2}"
        )
    return ""


def _check_layered(a: Mapping[str, int]) -> str:
    if _check_ops(a):
        return _check_ops(a)
    if a["width"] > a["ops"]:
        return f"width={a['width']} is more than ops={a['ops']}; e.g. width={a['ops']}"
    return ""


def _derive_layered(a: dict[str, int]) -> None:
    if a.get("width") is None:
        a["width"] = max(1, round(a["ops"] ** 0.5))  # layered_dag's own default


FAMILIES: dict[str, GenFamily] = {
    family.name: family
    for family in (
        GenFamily(
            "rnnlm",
            "RNNLM: stacked LSTM language model (GO)",
            {"layers": 2, "hidden": 256, "batch": 16, "vocab": 1000, "steps": 4},
            architecture=("layers", "hidden"),
            size=("steps", "layers"),
            build=_rnnlm,
            estimate=lambda a: 20 + a["steps"] * (7 + 36 * a["layers"]),
        ),
        GenFamily(
            "gnmt",
            "GNMT: LSTM encoder-decoder with attention (GO)",
            {"layers": 2, "hidden": 256, "batch": 16, "vocab": 1000, "src_len": 2, "tgt_len": 2},
            architecture=("layers", "hidden"),
            size=("src_len", "tgt_len", "layers"),
            build=_gnmt,
            estimate=lambda a: 100 + (a["src_len"] + a["tgt_len"]) * (37 + 38 * a["layers"]),
            minimum={"layers": 2},
        ),
        GenFamily(
            "txl",
            "Transformer-XL language model (GO)",
            {
                "layers": 1,
                "d_model": 128,
                "heads": 2,
                "d_inner": 512,
                "tgt_len": 32,
                "mem_len": 32,
                "vocab": 204,
                "batch": 4,
                "segments": 1,
            },
            architecture=("layers", "d_model", "heads", "d_inner"),
            size=("segments", "layers"),
            build=_txl,
            estimate=lambda a: a["segments"] * (40 + 195 * a["layers"]),
            check=_check_txl,
        ),
        GenFamily(
            "inception",
            "Inception-v3 (GO): fixed depth, auxiliary head optional",
            {"batch": 32, "image": 299, "classes": 1001, "aux": 1},
            architecture=("classes", "aux"),
            size=("aux",),
            build=_inception,
            estimate=lambda a: 1400,
            minimum={"image": 75, "aux": 0},
            maximum={"aux": 1},
        ),
        GenFamily(
            "layered",
            "random layered DAG",
            {"ops": 100, "seed": 0, "width": None, "inputs": 3, "skip": 10},
            architecture=("ops", "width"),
            size=("ops",),
            build=_layered,
            estimate=lambda a: a["ops"],
            minimum={"ops": 2, "seed": 0, "skip": 0},
            maximum={"skip": 100},
            check=_check_layered,
            derive=_derive_layered,
        ),
        GenFamily(
            "sp",
            "random series-parallel DAG",
            {"ops": 100, "seed": 0, "series": 60},
            architecture=("ops", "series"),
            size=("ops",),
            build=_sp,
            estimate=lambda a: a["ops"],
            minimum={"ops": 2, "seed": 0, "series": 0},
            maximum={"series": 100},
            check=_check_ops,
        ),
        GenFamily(
            "amoebanet",
            "AmoebaNet-A (GO's held-out family)",
            {"cells": 1, "filters": 16, "batch": 8, "image": 64, "classes": 1001},
            architecture=("cells", "filters"),
            size=("cells",),
            build=_amoebanet,
            estimate=lambda a: 1000 + 600 * a["cells"],
            minimum={"filters": 4, "image": 32},
        ),
        GenFamily(
            "wavenet",
            "WaveNet (GO's held-out family)",
            {
                "stacks": 1,
                "layers": 4,
                "residual": 32,
                "dilation": 32,
                "skip": 64,
                "quantization": 256,
                "batch": 1,
                "samples": 1000,
            },
            architecture=("stacks", "layers", "residual", "dilation", "skip"),
            size=("layers", "stacks"),
            build=_wavenet,
            estimate=lambda a: 30 + 52 * a["stacks"] * a["layers"],
        ),
    )
}
"""Family name -> its :class:`GenFamily` (the table of the module docstring)."""

RUNAWAY = 2
"""Refuse unbuilt a configuration whose estimate is over ``RUNAWAY * MAX_OPS`` (the estimate is
rough; below that, the graph is built and its exact op count decides)."""


def is_generated(name: str) -> bool:
    """Whether ``name`` is a ``gen:`` name."""
    return isinstance(name, str) and name.startswith(PREFIX)


def parse_name(name: str) -> tuple[GenFamily, dict[str, int]]:
    """The family of a ``gen:`` name and all its arguments (defaults filled in).

    Raises:
        ValueError: not a ``gen:`` name, an unknown family or argument, an argument given twice,
            a value that is not an integer in its range, or an invalid combination (heads not
            dividing ``d_model``). The message is one line naming the argument, what is allowed
            and an example fix.
    """
    if not is_generated(name):
        raise ValueError(
            f"{name!r} is not a generated graph name; write gen:FAMILY?ARG=INT&... "
            f"(e.g. 'gen:rnnlm?layers=2'), families: {', '.join(FAMILIES)}"
        )
    family_name, _, query = name.strip()[len(PREFIX) :].partition("?")
    family = FAMILIES.get(family_name)
    if family is None:
        raise ValueError(
            f"unknown generated family {family_name!r} in {name!r}; choose one of: "
            f"{', '.join(FAMILIES)} (e.g. 'gen:rnnlm?layers=2')"
        )
    args: dict[str, Any] = dict(family.defaults)
    given: set[str] = set()
    for part in filter(None, query.split("&")):
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if key not in family.defaults:
            raise ValueError(
                f"{name!r}: unknown argument {key!r} for gen:{family.name}; allowed: "
                f"{', '.join(family.defaults)} (e.g. gen:{family.name}?{_example(family)})"
            )
        if key in given:
            raise ValueError(f"{name!r}: argument {key!r} given twice; give it once")
        given.add(key)
        low, high = family.minimum.get(key, 1), family.maximum.get(key)
        if (
            not eq
            or not value.isascii()
            or not value.isdecimal()
            or not low <= int(value) <= (high if high is not None else int(value))
        ):
            allowed = (
                f"an integer in [{low}, {high}]" if high is not None else f"an integer >= {low}"
            )
            raise ValueError(
                f"{name!r}: argument {key}={value!r} must be {allowed}; e.g. "
                f"{key}={_default_value(family, key)}"
            )
        args[key] = int(value)
    family.derive(args)
    problem = family.check(args)
    if problem:
        raise ValueError(f"{name!r}: {problem}")
    estimate = family.estimate(args)
    if estimate > RUNAWAY * MAX_OPS:
        raise ValueError(_too_large(name, family, args, estimate, "about "))
    return family, args


def canonical_name(name: str) -> str:
    """``gen:FAMILY?...`` with every argument, defaults filled in, sorted by name.

    Raises:
        ValueError: as :func:`parse_name`.
    """
    family, args = parse_name(name)
    return format_name(family.name, args)


def format_name(family: str, args: Mapping[str, int]) -> str:
    """The canonical name of a family and its full argument set."""
    return f"{PREFIX}{family}?" + "&".join(f"{k}={args[k]}" for k in sorted(args))


def build_generated(name: str) -> CompGraph:
    """The graph of a ``gen:`` name, named by its canonical name (built once per process and
    kept: graphs are immutable, so sharing them is safe).

    Raises:
        ValueError: a bad name (:func:`parse_name`) or a graph over :data:`MAX_OPS` ops.
    """
    return _build(canonical_name(name))


@lru_cache(maxsize=64)
def _build(canonical: str) -> CompGraph:
    family, args = parse_name(canonical)
    graph = family.build(args, canonical)
    if graph.num_ops > MAX_OPS:
        raise ValueError(_too_large(canonical, family, args, graph.num_ops, ""))
    return graph


def _too_large(name: str, family: GenFamily, args: Mapping[str, int], ops: int, about: str) -> str:
    head = f"{name!r}: {about}{ops:,} ops, over the limit of {MAX_OPS:,} for a generated graph"
    if not family.size:
        return f"{head}; this family's size is fixed"
    key = next((k for k in family.size if args[k] > family.minimum.get(k, 1)), family.size[0])
    fix = max(family.minimum.get(key, 1), args[key] * MAX_OPS // (2 * ops))
    return f"{head}; lower {' or '.join(family.size)} (e.g. {key}={fix})"


def _default_value(family: GenFamily, key: str) -> int:
    value = family.defaults[key]
    return value if value is not None else 10


def _example(family: GenFamily) -> str:
    key = family.architecture[0]
    return f"{key}={_default_value(family, key)}"
