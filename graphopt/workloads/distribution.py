"""The training distribution and its split: which graphs a transferable policy trains on, and
which it is tested on, as data.

Three splits, each a tuple of graph names (canonical: :func:`canonical`):

==================  =============================================================================
``train``           :func:`training_specs`: 524 graphs of twelve families, drawn from the argument
                    grids of :data:`TRAIN_GRIDS`: GO's RNNLM, GNMT, Transformer-XL and Inception-v3
                    and random layered and series-parallel DAGs (``gen:`` names,
                    :mod:`graphopt.workloads.generated`), and six zoo families imported from
                    PyTorch (``torch:`` names, :mod:`graphopt.importers.zoo`): ResNet,
                    Transformer, MobileNetV2, ViT, GRU, U-Net. 150-2,398 ops, median 808.
``family-test``     :func:`family_test_specs`: 51 configurations of the *training* families never
                    trained on (:data:`FAMILY_TEST`): each differs from every training graph of its
                    family in an architecture argument (a value of depth, width or hidden size
                    that no training graph of the family has), and 25 are larger than any
                    training graph of their family (up to 6,000 ops; docs/workloads.md lists
                    the sizes per family).
``cross-family``    :func:`cross_family_specs`: families absent from training: WaveNet, AmoebaNet,
                    PipeDream's measured profiles, the zoo's Inception and LSTM.
==================  =============================================================================

Training graph ``i`` of a family is fixed by the grid and :data:`GRID_SEED`: each grid's full
product of argument values is sampled without replacement (``count`` configurations) and listed in
product order, so the tuple is the same on every machine. :func:`distribution` picks a subset by a
spec string; :func:`small_training_specs` is a 24-graph subset of ``train`` (no zoo, each under
1,000 ops) for tests and demos. The registry serves the splits as suites: ``suite:train-gen``,
``suite:train-gen-small``, ``suite:family-test``, ``suite:cross-family``;
:func:`graphopt.workloads.graph_cache.load_graphs` builds them once and reads them back from disk.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from graphopt.importers import zoo
from graphopt.workloads import generated

GRID_SEED = 37
"""Seed of the sampling of every grid (grid ``k`` draws with ``GRID_SEED + k``); changing it, a
grid or a count changes the training set."""

ZOO_ARCHITECTURE: dict[str, tuple[str, ...]] = {
    "resnet": ("depth", "width"),
    "transformer": ("layers", "d_model", "heads", "ff"),
    "mobilenet": ("blocks", "width"),
    "vit": ("layers", "d_model", "heads", "mlp", "patch"),
    "gru": ("layers", "hidden"),
    "unet": ("depth", "width"),
}
"""The architecture arguments of the zoo families in the distribution (those of ``gen:`` families
are :attr:`~graphopt.workloads.generated.GenFamily.architecture`)."""


@dataclass(frozen=True)
class Grid:
    """The training configurations of one family.

    Attributes:
        family: the family as :func:`family_of` names it (``"rnnlm"``, ``"random-sp"``,
            ``"torch:resnet"``).
        values: per argument its values; arguments left out take their defaults.
        count: how many configurations of the product to draw.
    """

    family: str
    values: Mapping[str, tuple[int, ...]]
    count: int


_RANDOM_OPS = (150, 200, 300, 400, 500, 600, 800, 1000, 1200, 1500, 2000)

TRAIN_GRIDS: tuple[Grid, ...] = (
    Grid(
        "rnnlm",
        {
            "layers": (1, 2, 3, 4),
            "hidden": (128, 256, 512, 1024),
            "steps": (4, 6, 8, 12, 16),
            "batch": (8, 16, 32, 64),
            "vocab": (1000, 4000, 16000),
        },
        90,
    ),
    Grid(
        "gnmt",
        {
            "layers": (2, 3, 4),
            "hidden": (128, 256, 512, 1024),
            "src_len": (2, 3, 4, 6),
            "tgt_len": (2, 3, 4, 6),
            "batch": (8, 16, 32, 64),
            "vocab": (1000, 4000, 16000),
        },
        80,
    ),
    Grid(
        "txl",
        {
            "layers": (1, 2, 3, 4),
            "d_model": (128, 256, 512),
            "heads": (2, 4, 8),
            "d_inner": (256, 512, 1024, 2048),
            "tgt_len": (32, 64, 128),
            "mem_len": (32, 64, 128),
            "segments": (1, 2, 3),
            "batch": (2, 4, 8),
        },
        80,
    ),
    Grid(
        "inception",
        {
            "batch": (8, 16, 32, 64),
            "image": (75, 96, 128, 160, 224, 299),
            "classes": (10, 100, 1000),
            "aux": (0, 1),
        },
        30,
    ),
    Grid(
        "random-layered",
        {
            "ops": _RANDOM_OPS,
            "seed": tuple(range(40)),
            "width": (8, 16, 32, 48),
            "inputs": (2, 3, 4),
            "skip": (0, 10, 25),
        },
        80,
    ),
    Grid(
        "random-sp",
        {"ops": _RANDOM_OPS, "seed": tuple(range(40)), "series": (30, 45, 60, 75, 90)},
        80,
    ),
    Grid(
        "torch:resnet",
        {
            "depth": (18, 34, 50),
            "width": (8, 16, 32),
            "image": (32, 64),
            "batch": (8, 16),
            "classes": (10, 100),
        },
        14,
    ),
    Grid(
        "torch:transformer",
        {
            "layers": (1, 2, 3),
            "d_model": (64, 128),
            "heads": (2, 4),
            "ff": (128, 256),
            "vocab": (1000, 4000),
            "seq": (16, 32),
            "batch": (4, 8),
        },
        14,
    ),
    Grid(
        "torch:mobilenet",
        {
            "width": (8, 16, 32),
            "blocks": (4, 7, 10, 13, 17),
            "image": (32, 64),
            "batch": (8, 16),
            "classes": (10, 100),
        },
        14,
    ),
    Grid(
        "torch:vit",
        {
            "layers": (2, 4, 6),
            "d_model": (64, 128),
            "heads": (2, 4),
            "mlp": (128, 256),
            "patch": (4, 8),
            "image": (32,),
            "batch": (8, 16),
            "classes": (10, 100),
        },
        14,
    ),
    Grid(
        "torch:gru",
        {
            "layers": (1, 2),
            "hidden": (64, 128, 256),
            "seq": (4, 8, 16),
            "vocab": (1000, 4000),
            "batch": (8, 16),
        },
        14,
    ),
    Grid(
        "torch:unet",
        {
            "depth": (2, 3, 4),
            "width": (8, 16),
            "image": (32, 64),
            "batch": (2, 4),
            "classes": (2, 4),
        },
        14,
    ),
)
"""The training distribution: per family an argument grid and how many of its configurations to
train on (524 in all; the zoo's 84 are small, so that each imports in seconds)."""

FAMILY_TEST: dict[str, tuple[dict[str, int], ...]] = {
    "rnnlm": (
        {"layers": 6, "hidden": 512, "steps": 12, "batch": 32, "vocab": 4000},
        {"layers": 5, "hidden": 256, "steps": 16, "batch": 16, "vocab": 1000},
        {"layers": 8, "hidden": 384, "steps": 16, "batch": 16, "vocab": 16000},
        {"layers": 6, "hidden": 1024, "steps": 16, "batch": 64, "vocab": 4000},
        {"layers": 2, "hidden": 768, "steps": 8, "batch": 32, "vocab": 4000},
        {"layers": 3, "hidden": 384, "steps": 12, "batch": 16, "vocab": 1000},
        {"layers": 6, "hidden": 128, "steps": 4, "batch": 8, "vocab": 16000},
    ),
    "gnmt": (
        {"layers": 6, "hidden": 512, "src_len": 6, "tgt_len": 6, "batch": 32, "vocab": 4000},
        {"layers": 5, "hidden": 256, "src_len": 8, "tgt_len": 8, "batch": 16, "vocab": 1000},
        {"layers": 8, "hidden": 256, "src_len": 4, "tgt_len": 4, "batch": 16, "vocab": 16000},
        {"layers": 6, "hidden": 1024, "src_len": 8, "tgt_len": 8, "batch": 64, "vocab": 4000},
        {"layers": 2, "hidden": 768, "src_len": 3, "tgt_len": 3, "batch": 32, "vocab": 4000},
        {"layers": 3, "hidden": 2048, "src_len": 4, "tgt_len": 2, "batch": 16, "vocab": 1000},
        {"layers": 5, "hidden": 256, "src_len": 2, "tgt_len": 3, "batch": 8, "vocab": 16000},
    ),
    "txl": (
        {"layers": 5, "d_model": 256, "heads": 4, "d_inner": 1024, "segments": 3},
        {"layers": 8, "d_model": 128, "heads": 2, "d_inner": 512, "segments": 2},
        {"layers": 6, "d_model": 512, "heads": 8, "d_inner": 2048, "segments": 3},
        {"layers": 10, "d_model": 256, "heads": 4, "d_inner": 1024, "segments": 2},
        {"layers": 2, "d_model": 384, "heads": 6, "d_inner": 1536, "segments": 2},
        {"layers": 3, "d_model": 192, "heads": 3, "d_inner": 768, "segments": 1},
        {"layers": 2, "d_model": 256, "heads": 4, "d_inner": 3072, "segments": 2},
    ),
    "inception": (
        {"batch": 16, "image": 128, "classes": 37, "aux": 1},
        {"batch": 32, "image": 224, "classes": 200, "aux": 0},
        {"batch": 8, "image": 299, "classes": 2000, "aux": 1},
        {"batch": 64, "image": 96, "classes": 5, "aux": 0},
    ),
    "random-layered": (
        {"ops": 2500, "seed": 1000, "width": 50},
        {"ops": 3000, "seed": 1001, "width": 24},
        {"ops": 4000, "seed": 1002, "width": 64},
        {"ops": 6000, "seed": 1003, "width": 77},
        {"ops": 700, "seed": 1004, "width": 12},
        {"ops": 1100, "seed": 1005, "width": 40},
        {"ops": 350, "seed": 1006, "width": 5},
    ),
    "random-sp": (
        {"ops": 2500, "seed": 1000, "series": 60},
        {"ops": 3500, "seed": 1001, "series": 45},
        {"ops": 5000, "seed": 1002, "series": 75},
        {"ops": 6000, "seed": 1003, "series": 60},
        {"ops": 700, "seed": 1004, "series": 50},
        {"ops": 1100, "seed": 1005, "series": 85},
        {"ops": 450, "seed": 1006, "series": 20},
    ),
    "torch:resnet": (
        {"depth": 101, "width": 8, "image": 32, "batch": 8, "classes": 10},
        {"depth": 18, "width": 24, "image": 64, "batch": 8, "classes": 10},
    ),
    "torch:transformer": (
        {"layers": 5, "d_model": 64, "heads": 2, "ff": 128, "vocab": 1000, "seq": 16, "batch": 4},
        {"layers": 2, "d_model": 96, "heads": 3, "ff": 192, "vocab": 4000, "seq": 32, "batch": 8},
    ),
    "torch:mobilenet": (
        {"width": 24, "blocks": 12, "image": 32, "batch": 8, "classes": 10},
        {"width": 48, "blocks": 17, "image": 64, "batch": 8, "classes": 100},
    ),
    "torch:vit": (
        {
            "layers": 12,
            "d_model": 64,
            "heads": 2,
            "mlp": 128,
            "patch": 8,
            "image": 32,
            "batch": 8,
            "classes": 10,
        },
        {
            "layers": 3,
            "d_model": 96,
            "heads": 3,
            "mlp": 192,
            "patch": 8,
            "image": 32,
            "batch": 8,
            "classes": 100,
        },
    ),
    "torch:gru": (
        {"layers": 3, "hidden": 128, "seq": 16, "vocab": 1000, "batch": 8},
        {"layers": 2, "hidden": 96, "seq": 8, "vocab": 4000, "batch": 16},
    ),
    "torch:unet": (
        {"depth": 5, "width": 8, "image": 64, "batch": 2, "classes": 2},
        {"depth": 3, "width": 12, "image": 32, "batch": 4, "classes": 4},
    ),
}
"""The family test: per training family, configurations whose architecture no training graph of
the family has. Arguments left out take the family's defaults."""

CROSS_FAMILY: tuple[str, ...] = (
    "wavenet-tiny",
    "amoebanet-small",
    "wavenet-2",
    "pipedream:resnet50",
    "pipedream:inception_v3",
    "pipedream:gnmt",
    "torch:inception",
    "torch:lstm",
)
"""Graphs of families absent from training (and GO's held-out WaveNet and AmoebaNet)."""

SPLITS = ("train", "family-test", "cross-family")
_GEN_FAMILY = {"random-layered": "layered", "random-sp": "sp"}
"""The ``gen:`` family of a distribution family whose names differ."""
_GEN_FAMILY_NAME = {v: k for k, v in _GEN_FAMILY.items()}


# ---------------------------------------------------------------------------- names
def spec_of(family: str, args: Mapping[str, int]) -> str:
    """The canonical name of one configuration of a distribution family (``"rnnlm"``,
    ``"random-sp"``, ``"torch:resnet"``); arguments left out take their defaults.

    Raises:
        ValueError: an unknown family or a bad argument (the message of the family's parser).
    """
    if family.startswith(zoo.PREFIX):
        # The zoo's canonical form, without zoo.parse_spec: its checks may import torch, and the
        # registry lists these names at import. The tests parse every one.
        entry = zoo.ZOO.get(family[len(zoo.PREFIX) :])
        if entry is None or set(args) - set(entry.defaults):
            return canonical(f"{family}?" + "&".join(f"{k}={v}" for k, v in args.items()))
        return zoo.canonical_spec(entry.name, {**entry.defaults, **args})
    gen = _GEN_FAMILY.get(family, family)
    if gen not in generated.FAMILIES or gen in _GEN_FAMILY.values() and gen == family:
        known = [_GEN_FAMILY_NAME.get(f, f) for f in generated.FAMILIES]
        raise ValueError(
            f"unknown family {family!r}; known: {', '.join(known)}, or torch:NAME of the zoo "
            "(e.g. 'torch:resnet')"
        )
    query = "&".join(f"{k}={v}" for k, v in args.items())
    return canonical(f"{generated.PREFIX}{gen}?{query}")


def canonical(name: str) -> str:
    """The canonical form of a ``gen:`` name (every argument, sorted:
    :func:`~graphopt.workloads.generated.canonical_name`) or a ``torch:`` name (the zoo's own:
    arguments that differ from the defaults, sorted); any other name unchanged.

    Raises:
        ValueError: a bad ``gen:`` or ``torch:`` name.
    """
    if generated.is_generated(name):
        return generated.canonical_name(name)
    if name.startswith(zoo.PREFIX) and "mode=" not in name:
        entry, args = zoo.parse_spec(name)
        return zoo.canonical_spec(entry.name, args)
    return name


def architecture(name: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    """The family of a ``gen:`` or ``torch:`` name and its architecture arguments with their
    values: two configurations of one family with equal architectures differ only in data sizes
    (batch, sequence, image).

    Raises:
        ValueError: a bad name, or a zoo family without known architecture arguments.
    """
    if generated.is_generated(name):
        gen, args = generated.parse_name(name)
        return _GEN_FAMILY_NAME.get(gen.name, gen.name), tuple(
            (k, args[k]) for k in gen.architecture
        )
    if name.startswith(zoo.PREFIX):
        entry, args = zoo.parse_spec(name)
        keys = ZOO_ARCHITECTURE.get(entry.name)
        if keys is None:
            raise ValueError(
                f"zoo family {entry.name!r} has no architecture arguments listed; known: "
                f"{', '.join(ZOO_ARCHITECTURE)}"
            )
        return f"{zoo.PREFIX}{entry.name}", tuple((k, args[k]) for k in keys)
    raise ValueError(f"{name!r} is not a gen: or torch: name; only those have architectures")


# ---------------------------------------------------------------------------- splits
def training_families() -> tuple[str, ...]:
    """The families of the training split, in :data:`TRAIN_GRIDS` order."""
    return tuple(grid.family for grid in TRAIN_GRIDS)


@lru_cache(maxsize=1)
def training_by_family() -> dict[str, tuple[str, ...]]:
    """Family -> its training graphs' canonical names (see the module docstring)."""
    return {grid.family: _sample(grid, GRID_SEED + k) for k, grid in enumerate(TRAIN_GRIDS)}


def training_specs() -> tuple[str, ...]:
    """The training split: every family's training graphs, families in :data:`TRAIN_GRIDS`
    order (524 distinct canonical names, the same on every machine)."""
    return tuple(name for names in training_by_family().values() for name in names)


@lru_cache(maxsize=1)
def family_test_by_family() -> dict[str, tuple[str, ...]]:
    """Family -> its family-test graphs' canonical names (:data:`FAMILY_TEST`)."""
    return {
        family: tuple(spec_of(family, args) for args in configs)
        for family, configs in FAMILY_TEST.items()
    }


def family_test_specs() -> tuple[str, ...]:
    """The family-test split (:data:`FAMILY_TEST`, in order; 51 canonical names)."""
    return tuple(name for names in family_test_by_family().values() for name in names)


def cross_family_specs() -> tuple[str, ...]:
    """The cross-family split (:data:`CROSS_FAMILY`)."""
    return CROSS_FAMILY


SMALL_COUNT = 24
SMALL_MAX_OPS = 900
""":func:`small_training_specs` keeps graphs of at most this many ops by
:attr:`~graphopt.workloads.generated.GenFamily.estimate` (all have fewer than 1,000)."""


@lru_cache(maxsize=1)
def small_training_specs() -> tuple[str, ...]:
    """:data:`SMALL_COUNT` training graphs for tests and demos: of every ``gen:`` family that has
    graphs this small (all but Inception-v3, whose 1,345-1,387 ops are fixed), an equal share
    spread over its sizes up to :data:`SMALL_MAX_OPS`; no zoo graph, so that they build in about a
    second."""
    sized = {
        family: sorted((_estimate(n), n) for n in names if _estimate(n) <= SMALL_MAX_OPS)
        for family, names in training_by_family().items()
        if not family.startswith(zoo.PREFIX)
    }
    sized = {family: names for family, names in sized.items() if names}
    out: list[str] = []
    for k, names in enumerate(sized.values()):
        share = SMALL_COUNT // len(sized) + (k < SMALL_COUNT % len(sized))
        picks = np.unique(np.linspace(0, len(names) - 1, share).round().astype(int))
        out.extend(names[i][1] for i in picks)
    return tuple(out)


def split_by_family(split: str) -> dict[str, tuple[str, ...]]:
    """Family -> graph names of one of :data:`SPLITS` (cross-family graphs grouped by
    :func:`~graphopt.workloads.registry.family_of`).

    Raises:
        ValueError: an unknown split.
    """
    if split == "train":
        return training_by_family()
    if split == "family-test":
        return family_test_by_family()
    if split == "cross-family":
        out: dict[str, list[str]] = {}
        for name in CROSS_FAMILY:  # the registry's family_of for these names (no import cycle)
            out.setdefault(name.split("?")[0].split("-")[0], []).append(name)
        return {family: tuple(names) for family, names in out.items()}
    raise ValueError(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")


def distribution(spec: str) -> tuple[str, ...]:
    """A subset of a split, chosen by ``spec``: ``key=value`` pairs joined by ``&``.

    ==============  =========================================================================
    ``split``       ``train`` (default), ``family-test`` or ``cross-family``
    ``families``    comma-separated families of that split (default: all); ``gen`` stands for
                    every family of ``gen:`` graphs and ``zoo`` for every family of ``torch:``
                    graphs
    ``count``       how many graphs to draw (default: all of the selection)
    ``seed``        the seed of that draw (default 0)
    ==============  =========================================================================

    Example: ``"families=rnnlm,gnmt,torch:resnet&count=100&seed=0"``. The graphs come back in the
    split's order; a draw is a seeded sample without replacement, the same on every machine.

    Raises:
        ValueError: an unknown key, split or family (the message lists the known ones), a bad
            count or seed, or an empty selection.
    """
    options: dict[str, str | None] = {
        "split": "train",
        "families": None,
        "count": None,
        "seed": "0",
    }
    given: set[str] = set()
    for part in filter(None, (p.strip() for p in spec.split("&"))):
        key, eq, value = part.partition("=")
        key = key.strip()
        if key not in options or not eq:
            raise ValueError(
                f"distribution spec {spec!r}: {part!r} is not one of "
                f"{', '.join(k + '=...' for k in options)} "
                "(e.g. 'families=rnnlm,gnmt&count=100&seed=0')"
            )
        if key in given:
            raise ValueError(f"distribution spec {spec!r}: {key!r} given twice; give it once")
        given.add(key)
        options[key] = value.strip()
    split = str(options["split"])
    if split not in SPLITS:
        raise ValueError(
            f"distribution spec {spec!r}: unknown split {split!r}; choose one of: {', '.join(SPLITS)}"
        )
    by_family = split_by_family(split)
    families = options["families"]
    chosen = by_family.keys() if families is None else _families(families, by_family, spec)
    names = [name for family in by_family if family in chosen for name in by_family[family]]
    if not names:
        raise ValueError(
            f"empty split: distribution spec {spec!r} selects no graph of split {split!r}; pick "
            f"families from: {', '.join(by_family)}"
        )
    seed = _integer(str(options["seed"]), "seed", spec, low=0)
    if options["count"] is None:
        return tuple(names)
    count = _integer(options["count"], "count", spec, low=1)
    if count > len(names):
        raise ValueError(
            f"distribution spec {spec!r}: count={count} but the selection holds {len(names)} "
            f"graphs; give count <= {len(names)} or leave it out"
        )
    keep = np.sort(np.random.default_rng(seed).choice(len(names), size=count, replace=False))
    return tuple(names[i] for i in keep)


# ---------------------------------------------------------------------------- helpers
def _sample(grid: Grid, seed: int) -> tuple[str, ...]:
    keys = list(grid.values)
    product = list(itertools.product(*(grid.values[k] for k in keys)))
    assert grid.count <= len(product), grid.family
    picks = np.sort(np.random.default_rng(seed).choice(len(product), grid.count, replace=False))
    return tuple(spec_of(grid.family, dict(zip(keys, product[i], strict=True))) for i in picks)


def _estimate(name: str) -> int:
    family, args = generated.parse_name(name)
    return family.estimate(args)


def _families(value: str, by_family: Mapping[str, tuple[str, ...]], spec: str) -> set[str]:
    chosen: set[str] = set()
    for item in filter(None, (v.strip() for v in value.split(","))):
        if item in ("gen", "zoo"):
            prefix = generated.PREFIX if item == "gen" else zoo.PREFIX
            chosen |= {f for f, names in by_family.items() if names[0].startswith(prefix)}
        elif item in by_family:
            chosen.add(item)
        else:
            raise ValueError(
                f"distribution spec {spec!r}: unknown family {item!r} in this split; known: "
                f"{', '.join(by_family)} (or gen, zoo)"
            )
    return chosen


def _integer(value: str, key: str, spec: str, *, low: int) -> int:
    if not value.isascii() or not value.isdecimal() or int(value) < low:
        raise ValueError(
            f"distribution spec {spec!r}: {key}={value!r} must be an integer >= {low} "
            f"(e.g. {key}={max(low, 1) * 100 if key == 'count' else low})"
        )
    return int(value)
