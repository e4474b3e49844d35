"""The training distribution and its split: sizes, disjointness, determinism, selection."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from graphopt.importers import zoo
from graphopt.workloads import distribution as dist
from graphopt.workloads.generated import FAMILIES, format_name, is_generated, parse_name
from graphopt.workloads.registry import SUITES, family_of, get_graph

GEN_OF = {"random-layered": "layered", "random-sp": "sp"}
RANDOM = ("random-layered", "random-sp")
ZOO_SIZE = {
    "torch:resnet": ("depth",),
    "torch:transformer": ("layers",),
    "torch:mobilenet": ("blocks",),
    "torch:vit": ("layers",),
    "torch:gru": ("layers", "seq"),
    "torch:unet": ("depth",),
}
"""The arguments a zoo family's op count grows with (the expensive test's assumption)."""


PINNED_TRAINING_DIGEST = "b5c9a61c2a989eb6"
"""SHA-256 (first 16 hex digits) of the training names joined by newlines."""


def _args(name: str) -> dict[str, int]:
    if is_generated(name):
        return parse_name(name)[1]
    entry, args = zoo.ZOO[name.split(":", 1)[1].partition("?")[0]], {}
    for part in filter(None, name.partition("?")[2].split("&")):
        key, _, value = part.partition("=")
        args[key] = int(value)
    return {**entry.defaults, **args}


def _architectures(names: tuple[str, ...]) -> set[tuple[tuple[str, int], ...]]:
    return {dist.architecture(n)[1] for n in names}


# ---------------------------------------------------------------------------- training split
def test_training_split_holds_524_distinct_canonical_names() -> None:
    specs = dist.training_specs()
    assert len(specs) == len(set(specs)) == 524
    assert all(dist.canonical(s) == s for s in specs[::7])  # torch: ones would import torch
    assert dist.training_specs() == specs


def test_training_split_is_pinned() -> None:
    # The same tuple on every machine; an intended change of the grids updates this digest.
    digest = hashlib.sha256("\n".join(dist.training_specs()).encode()).hexdigest()[:16]
    assert digest == PINNED_TRAINING_DIGEST


def test_training_families_and_zoo_share() -> None:
    by_family = dist.training_by_family()
    assert set(by_family) == {
        "rnnlm",
        "gnmt",
        "txl",
        "inception",
        "random-layered",
        "random-sp",
        "torch:resnet",
        "torch:transformer",
        "torch:mobilenet",
        "torch:vit",
        "torch:gru",
        "torch:unet",
    }
    for family, names in by_family.items():
        assert {family_of(n) for n in names} == {family}
    zoo_count = sum(len(v) for k, v in by_family.items() if k.startswith("torch:"))
    assert 60 <= zoo_count <= 100
    cross = {family_of(n) for n in dist.cross_family_specs()}
    assert not cross & set(by_family)
    assert {"torch:lstm", "torch:inception", "wavenet", "amoebanet"} <= cross


def test_zoo_training_graphs_are_small_configurations() -> None:
    for name in dist.training_specs():
        if name.startswith("torch:"):
            args = _args(name)
            assert args.get("image", 32) <= 64 and args.get("batch", 1) <= 16, name


# ---------------------------------------------------------------------------- family test
def test_family_test_is_disjoint_and_differs_in_architecture() -> None:
    train, test = dist.training_by_family(), dist.family_test_by_family()
    specs = dist.family_test_specs()
    assert len(specs) == len(set(specs)) >= 40
    assert not set(specs) & set(dist.training_specs())
    assert set(test) <= set(train)
    for family, names in test.items():
        seen = _architectures(train[family])
        values: dict[str, set[int]] = {}
        for arch in seen:
            for key, value in arch:
                values.setdefault(key, set()).add(value)
        for name in names:
            test_arch = dist.architecture(name)[1]
            assert test_arch not in seen, name
            # stronger: some architecture argument takes a value no training graph has
            assert any(v not in values[k] for k, v in test_arch), name


def _training_bound(family: str) -> int:
    """An upper bound of the op count of the family's training graphs: the configuration with
    every size argument at its training maximum (the op count grows with each; exact for the
    random families, whose op count is their ``ops``)."""
    names = dist.training_by_family()[family]
    if family in RANDOM:
        return max(_args(n)["ops"] for n in names)
    gen = FAMILIES[GEN_OF.get(family, family)]
    args = [_args(n) for n in names]
    top = {k: max(a[k] for a in args) for k in gen.size}
    return get_graph(format_name(gen.name, {**args[0], **top})).num_ops


def test_at_least_a_third_of_family_test_is_larger_than_training() -> None:
    # Counted from below, to stay fast: zoo graphs (slow to export) and graphs with no size
    # argument above the training maximum count as not larger, and counting stops at a third.
    # The expensive tests below count every graph against the exact training maxima.
    need = math.ceil(len(dist.family_test_specs()) / 3)
    larger = 0
    for family in sorted(dist.family_test_by_family(), key=lambda f: f not in RANDOM):
        if family.startswith("torch:") or larger >= need:
            continue
        bound, size = _training_bound(family), FAMILIES[GEN_OF.get(family, family)].size
        top = {k: max(_args(n)[k] for n in dist.training_by_family()[family]) for k in size}
        for name in dist.family_test_by_family()[family]:
            args = _args(name)
            if larger < need and any(args[k] > top[k] for k in size):
                larger += (args["ops"] if family in RANDOM else get_graph(name).num_ops) > bound
    assert larger >= need, larger


# ---------------------------------------------------------------------------- suites
def test_suites_hold_the_splits() -> None:
    assert SUITES["train-gen"] == dist.training_specs()
    assert SUITES["family-test"] == dist.family_test_specs()
    assert (
        SUITES["cross-family"]
        == dist.cross_family_specs()
        == (
            "wavenet-tiny",
            "amoebanet-small",
            "wavenet-2",
            "pipedream:resnet50",
            "pipedream:inception_v3",
            "pipedream:gnmt",
            "torch:inception",
            "torch:lstm",
        )
    )


def test_small_suite_spans_the_gen_families_under_1000_ops() -> None:
    small = SUITES["train-gen-small"]
    assert len(small) == len(set(small)) == 24
    assert set(small) <= set(dist.training_specs())
    assert all(is_generated(n) for n in small)
    families = {family_of(n) for n in small}
    assert families == {"rnnlm", "gnmt", "txl", "random-layered", "random-sp"}  # Inception: 1,345+
    ops = [get_graph(n).num_ops for n in small]
    assert max(ops) < 1000 and min(ops) >= 100


# ---------------------------------------------------------------------------- selection
def test_distribution_selects_by_family_count_and_seed() -> None:
    lm = dist.distribution("families=rnnlm,gnmt")
    assert lm == dist.training_by_family()["rnnlm"] + dist.training_by_family()["gnmt"]
    some = dist.distribution("families=rnnlm,gnmt&count=25&seed=3")
    assert len(some) == 25 and set(some) <= set(lm)
    assert list(some) == sorted(some, key=lm.index)  # in the split's order
    assert some == dist.distribution("count=25&seed=3&families=gnmt,rnnlm")
    assert some != dist.distribution("families=rnnlm,gnmt&count=25&seed=4")
    assert dist.distribution("") == dist.training_specs()
    zoo_only = dist.distribution("families=zoo")
    assert len(zoo_only) == 84 and all(n.startswith("torch:") for n in zoo_only)
    gen_only = dist.distribution("families=gen")
    assert len(gen_only) == 440 and all(is_generated(n) for n in gen_only)
    assert dist.distribution("split=family-test") == dist.family_test_specs()
    assert dist.distribution("split=cross-family&families=zoo") == ("torch:inception", "torch:lstm")


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("families=rnnlm,lstm", ["unknown family 'lstm'", "known: rnnlm, gnmt", "gen, zoo"]),
        ("families=", ["empty split", "pick families from: rnnlm"]),
        ("split=cross-family&families=gen", ["empty split", "'cross-family'"]),
        ("split=test", ["unknown split 'test'", "train, family-test, cross-family"]),
        ("size=3", ["'size=3' is not one of", "e.g. 'families=rnnlm,gnmt&count=100&seed=0'"]),
        ("count=0", ["count='0'", "integer >= 1"]),
        ("count=x", ["count='x'"]),
        ("count=9999", ["count=9999 but the selection holds 524 graphs", "count <= 524"]),
        ("seed=-1", ["seed='-1'", "integer >= 0"]),
        ("count=2&count=3", ["'count' given twice"]),
    ],
)
def test_bad_distribution_specs_raise_one_line(spec: str, words: list[str]) -> None:
    with pytest.raises(ValueError) as info:
        dist.distribution(spec)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_spec_of_rejects_an_unknown_family() -> None:
    with pytest.raises(ValueError, match="unknown family 'lstm'; known: rnnlm, gnmt"):
        dist.spec_of("lstm", {"layers": 2})


# ---------------------------------------------------------------------------- exact sizes
def _ops_by_family(split: Mapping[str, tuple[str, ...]], **kwargs: object) -> dict[str, list[int]]:
    from graphopt.workloads.graph_cache import load_graphs

    return {
        family: [g.num_ops for g in load_graphs(list(names), **kwargs)]  # type: ignore[arg-type]
        for family, names in split.items()
    }


@pytest.mark.expensive
def test_exact_sizes_of_the_gen_families(tmp_path: Path) -> None:
    """Every gen: graph of both splits built: training sizes 150-2,500 ops (median 600-1,000),
    family-test up to 6,000, and the exact count of family-test graphs larger than any training
    graph of their family."""
    gen = [f for f in dist.training_families() if not f.startswith("torch:")]
    train = _ops_by_family({f: dist.training_by_family()[f] for f in gen}, cache_dir=tmp_path)
    test = _ops_by_family({f: dist.family_test_by_family()[f] for f in gen}, cache_dir=tmp_path)
    every = np.concatenate([np.array(v) for v in train.values()])
    assert every.min() >= 150 and every.max() <= 2500
    assert 600 <= np.median(every) <= 1000
    assert max(max(v) for v in test.values()) <= 6000
    larger = sum(sum(ops > max(train[f]) for ops in test[f]) for f in gen)
    assert larger >= math.ceil(len(dist.family_test_specs()) / 3)
    for family in gen:  # the fast test's bound is an upper bound
        assert _training_bound(family) >= max(train[family])


@pytest.mark.expensive
def test_exact_sizes_of_the_zoo_families(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The zoo's largest training configuration of each family (by its size arguments) and its
    family-test graphs imported: training graphs within 3,000 ops, and the family-test graphs
    with a larger size argument larger in ops too."""
    monkeypatch.setenv("GRAPHOPT_CACHE_DIR", str(tmp_path))
    for family, keys in ZOO_SIZE.items():
        names = dist.training_by_family()[family]
        top = max(names, key=lambda n: tuple(_args(n)[k] for k in keys))
        (bound,) = _ops_by_family({family: (top,)})[family]
        assert bound <= 3000, (top, bound)
        top_size = tuple(_args(top)[k] for k in keys)
        for name in dist.family_test_by_family()[family]:
            size = tuple(_args(name)[k] for k in keys)
            if all(a >= b for a, b in zip(size, top_size, strict=True)) and size != top_size:
                (ops,) = _ops_by_family({family: (name,)})[family]
                assert ops > bound, (name, ops, bound)
