"""Tests of graphopt.workloads.registry: names, suites, specs and errors."""

from __future__ import annotations

import pytest

from graphopt.importers.sources import is_source
from graphopt.workloads import (
    SUITES,
    family_of,
    get_graph,
    list_graphs,
    list_suites,
    resolve_graphs,
)
from graphopt.workloads.registry import MAX_RANDOM_OPS

from ._helpers import assert_valid_training_graph

GO_GRAPHS = [
    "rnnlm-2",
    "rnnlm-4",
    "rnnlm-8",
    "gnmt-2",
    "gnmt-4",
    "gnmt-8",
    "txl-2",
    "txl-4",
    "txl-8",
    "inception-v3",
    "amoebanet",
    "wavenet-2",
    "wavenet-4",
]
# intended sizes (ops, forward + backward); GO's graphs span about 1k to 80k ops
SIZES = {
    "rnnlm-2": (2_000, 5_000),
    "rnnlm-4": (4_000, 8_000),
    "rnnlm-8": (8_000, 15_000),
    "txl-2": (500, 1_500),
    "txl-4": (1_000, 3_000),
    "txl-8": (2_000, 5_000),
    "inception-v3": (1_000, 2_000),
    "amoebanet": (3_000, 6_000),
    "wavenet-2": (900, 1_500),
    "wavenet-4": (1_800, 3_000),
}


def test_go_graphs_are_listed_with_descriptions() -> None:
    graphs = list_graphs()
    assert set(GO_GRAPHS) <= set(graphs)
    assert all(isinstance(d, str) and d for d in graphs.values())
    assert list(SUITES["go"]) == GO_GRAPHS
    assert list_suites() == SUITES


@pytest.mark.parametrize("name", sorted(SIZES))
def test_named_graph_sizes_and_validity(name: str) -> None:
    g = get_graph(name)
    low, high = SIZES[name]
    assert low <= g.num_ops <= high, g.num_ops
    assert g.name == name
    assert_valid_training_graph(g)


def test_get_graph_is_cached() -> None:
    assert get_graph("txl-tiny") is get_graph("txl-tiny")


def test_get_graph_takes_a_graph_file_as_its_error_says(tmp_path) -> None:  # type: ignore[no-untyped-def]
    built = get_graph("rnnlm-tiny")
    path = built.save(tmp_path / "lm.json")
    for spec in (path, str(path), str(built.save(tmp_path / "lm.json.gz"))):
        assert get_graph(spec).fingerprint == built.fingerprint
    path.write_text("{}")  # a file is read on every call, not cached
    with pytest.raises(ValueError, match="not a graphopt graph file"):
        get_graph(str(path))
    with pytest.raises(ValueError, match="graph file .*missing.json' does not exist"):
        get_graph(str(tmp_path / "missing.json"))


def test_tiny_suite_is_tiny() -> None:
    graphs = resolve_graphs("suite:tiny")
    assert [g.name for g in graphs] == list(SUITES["tiny"])
    for g in graphs:
        assert g.num_ops < 500
    for g in graphs:
        if not g.name.startswith("random"):
            assert_valid_training_graph(g)


def test_default_suite_sizes() -> None:
    for g in resolve_graphs("suite:default"):
        assert 100 <= g.num_ops <= 1_000, (g.name, g.num_ops)


def test_heldout_families_are_not_trained_on() -> None:
    train = {family_of(n) for n in SUITES["train"]}
    for suite in ("heldout", "heldout-small"):
        heldout = {family_of(n) for n in SUITES[suite]}
        assert heldout and not heldout & train, heldout & train
    assert {family_of(n) for n in SUITES["heldout"]} == {"amoebanet", "wavenet"}


def test_family_of() -> None:
    assert family_of("gnmt-8") == "gnmt"
    assert family_of("inception-v3") == "inception"
    assert family_of("random-sp-100-s3") == "random-sp"
    assert family_of("wavenet-tiny") == "wavenet"


def test_every_suite_member_resolves_by_name() -> None:
    known = set(list_graphs())
    for members in SUITES.values():
        assert {m for m in members if not is_source(m)} <= known


def test_comma_lists_paths_and_random_names(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = get_graph("rnnlm-tiny").save(tmp_path / "lm.json.gz")
    graphs = resolve_graphs(f" random-layered-40-s3 , {path},random-sp-30-s1")
    assert [g.name for g in graphs] == ["random-layered-40-s3", "rnnlm-tiny", "random-sp-30-s1"]
    assert graphs[1].fingerprint == get_graph("rnnlm-tiny").fingerprint
    assert [g.num_ops for g in resolve_graphs(["random-sp-30-s1"])] == [30]


def test_unknown_graph_lists_the_choices() -> None:
    with pytest.raises(ValueError) as info:
        get_graph("gnmt-3")
    message = str(info.value)
    assert "unknown graph 'gnmt-3'" in message
    for expected in ("gnmt-8", "random-layered-<n>-s<seed>", "suite:tiny", "path to a graph file"):
        assert expected in message
    with pytest.raises(ValueError, match="unknown graph 'gnmt-3'"):
        resolve_graphs("rnnlm-tiny,gnmt-3")


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("suite:nope", "unknown suite 'nope'; known suites: suite:tiny"),
        (" , ", "empty graph spec"),
        ("missing/graph.json", "does not exist"),
        (f"random-sp-{MAX_RANDOM_OPS + 1}-s0", "the size must lie in"),
        ("random-sp-1-s0", "the size must lie in"),
        ("random-sp-010-s0", "unknown graph"),
    ],
)
def test_bad_specs(spec: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        resolve_graphs(spec)


def test_a_graph_path_with_commas_is_one_item(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from graphopt.workloads.registry import split_spec

    folder = tmp_path / "a,b"
    path = get_graph("txl-tiny").save(folder / "g,1.json")
    assert split_spec(str(path)) == [str(path)]  # the whole spec is a file
    assert split_spec(f"rnnlm-tiny,{path},suite:tiny") == ["rnnlm-tiny", str(path), "suite:tiny"]
    assert split_spec(f"{path}, {path}") == [str(path), f" {path}"]  # spaces are stripped later
    graphs = resolve_graphs(f"gnmt-tiny,{path}")
    assert [g.name for g in graphs] == ["gnmt-tiny", "txl-tiny"]
    monkeypatch.chdir(folder)  # a relative name, with no separator: found as a file
    assert [g.name for g in resolve_graphs("g,1.json,gnmt-tiny")] == ["txl-tiny", "gnmt-tiny"]
    # a path with commas that does not exist is split, and its pieces are reported
    assert split_spec("nope,1.json,txl-tiny") == ["nope", "1.json", "txl-tiny"]
    with pytest.raises(ValueError, match="unknown graph 'nope'"):
        resolve_graphs("nope,1.json")
    with pytest.raises(ValueError) as e:
        resolve_graphs(str(folder / "nope,1.json"))
    message = str(e.value)
    assert f"graph file {str(tmp_path / 'a')!r} does not exist" in message
    assert "split at commas; a path that holds a comma is taken whole where that file exists" in (
        message
    )
