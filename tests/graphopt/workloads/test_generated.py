"""gen: names: canonical forms, resolution through the registry, and the errors of bad names."""

from __future__ import annotations

import pytest

from graphopt.importers.sources import is_source
from graphopt.workloads.generated import (
    FAMILIES,
    MAX_OPS,
    build_generated,
    canonical_name,
    parse_name,
)
from graphopt.workloads.registry import family_of, get_graph, resolve_graphs


def test_canonical_name_sorts_and_fills_defaults() -> None:
    a = "gen:rnnlm?steps=8&layers=2&vocab=1000"
    b = "gen:rnnlm?layers=2&hidden=256&batch=16&steps=8&vocab=1000"
    assert (
        canonical_name(a)
        == canonical_name(b)
        == ("gen:rnnlm?batch=16&hidden=256&layers=2&steps=8&vocab=1000")
    )
    assert canonical_name("gen:layered?ops=100") == (
        "gen:layered?inputs=3&ops=100&seed=0&skip=10&width=10"  # layered_dag's sqrt default
    )
    for family in FAMILIES:
        name = canonical_name(f"gen:{family}")
        assert canonical_name(name) == name


def test_two_spellings_are_one_graph_named_canonically() -> None:
    a = get_graph("gen:gnmt?tgt_len=3&layers=3")
    b = get_graph("gen:gnmt?layers=3&src_len=2&tgt_len=3&hidden=256")
    assert a.fingerprint == b.fingerprint
    assert a.name == canonical_name("gen:gnmt?layers=3&tgt_len=3")
    assert [g.name for g in resolve_graphs("gen:sp?ops=30,gen:txl")] == [
        canonical_name("gen:sp?ops=30"),
        canonical_name("gen:txl"),
    ]


def test_defaults_are_the_registrys_reduced_variants() -> None:
    for builtin, gen in (
        ("rnnlm-tiny", "gen:rnnlm"),
        ("gnmt-tiny", "gen:gnmt"),
        ("txl-tiny", "gen:txl"),
        ("wavenet-tiny", "gen:wavenet"),
        ("amoebanet-small", "gen:amoebanet"),
    ):
        a, b = get_graph(builtin), get_graph(gen)
        assert (a.op_types, a.flops.tolist()) == (b.op_types, b.flops.tolist()), builtin


def test_the_random_families_have_exactly_ops_ops() -> None:
    assert get_graph("gen:layered?ops=321&seed=4&width=9").num_ops == 321
    assert get_graph("gen:sp?ops=123&seed=5&series=30").num_ops == 123


def test_the_op_count_depends_only_on_the_size_arguments() -> None:
    # The split's cheap size check leans on this: data sizes change costs, not the op count.
    pairs = (
        ("gen:rnnlm?layers=2&steps=3", "gen:rnnlm?layers=2&steps=3&hidden=512&batch=8&vocab=99"),
        (
            "gen:gnmt?layers=3&src_len=2&tgt_len=3",
            "gen:gnmt?layers=3&src_len=2&tgt_len=3&hidden=64",
        ),
        (
            "gen:txl?layers=2&segments=2",
            "gen:txl?layers=2&segments=2&d_model=256&heads=8&d_inner=99",
        ),
        ("gen:inception?aux=0", "gen:inception?aux=0&batch=2&image=80&classes=7"),
    )
    for a, b in pairs:
        assert get_graph(a).num_ops == get_graph(b).num_ops, a


def test_family_of_generated_and_imported_names() -> None:
    assert family_of("gen:sp?ops=300") == "random-sp"
    assert family_of("gen:layered?ops=300") == "random-layered"
    assert family_of("gen:txl?layers=2") == "txl"
    assert family_of("torch:resnet?depth=18") == "torch:resnet"
    assert family_of("pipedream:gnmt") == "pipedream:gnmt"
    assert is_source("gen:rnnlm")


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("gen:rnnlm?layers=0", ["layers='0'", "integer >= 1", "e.g. layers="]),
        ("gen:rnnlm?layers=-2", ["layers='-2'", "integer >= 1"]),
        ("gen:rnnlm?layers=2.5", ["layers='2.5'", "integer"]),
        ("gen:rnnlm?layers", ["layers=''", "integer"]),
        ("gen:rnnlm?layer=2", ["unknown argument 'layer'", "allowed: layers, hidden", "e.g."]),
        ("gen:rnnlm?layers=2&layers=3", ["'layers' given twice"]),
        ("gen:gnmt?layers=1", ["layers='1'", ">= 2"]),
        ("gen:sp?series=101", ["series='101'", "[0, 100]"]),
        ("gen:inception?aux=2", ["aux='2'", "[0, 1]"]),
        ("gen:txl?d_model=100&heads=3", ["d_model=100 must be a multiple of heads=3", "e.g."]),
        ("gen:layered?ops=10&width=20", ["width=20 is more than ops=10", "e.g. width=10"]),
        ("gen:layered?ops=30000", ["ops=30,000", "limit of 20,000", "e.g. ops="]),
        ("gen:rnnlm?layers=100&steps=100", ["over the limit of 20,000", "lower steps or layers"]),
        ("gen:nope?x=1", ["unknown generated family 'nope'", "rnnlm, gnmt, txl", "e.g."]),
    ],
)
def test_bad_names_raise_one_line_that_says_how_to_fix(name: str, words: list[str]) -> None:
    with pytest.raises(ValueError) as info:
        get_graph(name)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_a_graph_over_the_limit_is_refused_after_an_exact_count() -> None:
    # estimated under twice the limit, so it is built; its exact count decides
    name = "gen:rnnlm?layers=16&steps=40&hidden=8&vocab=10&batch=1"
    family, args = parse_name(name)
    assert MAX_OPS < family.estimate(args) < 2 * MAX_OPS
    with pytest.raises(ValueError, match=r"22,774 ops, over the limit .* \(e\.g\. steps=17\)"):
        build_generated(name)
