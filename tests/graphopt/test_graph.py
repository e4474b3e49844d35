"""Tests for :mod:`graphopt.graph`: construction and topological sorting, the JSON file format,
the networkx bridge, and the errors raised for bad input."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import pickle
import re
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest

from graphopt.graph import FORMAT_NAME, FORMAT_VERSION, CompGraph, Op

OP_COLUMNS = ("flops", "bytes_accessed", "output_bytes", "param_bytes")
TRICKY_FLOATS = (0.1, 1e-300, 123456789.123, 5e-324, 1.7976931348623157e308, 2.0**53 + 2, 1 / 3)


# ---------------------------------------------------------------------- helpers
def diamond(order: tuple[str, ...] = ("a", "b", "c", "d")) -> CompGraph:
    """``a -> b -> d`` and ``a -> c -> d``, ops given in ``order``; costs identify each op."""
    costs = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    ops = [
        Op(
            name=n,
            type=f"T{n}",
            flops=costs[n] * 10,
            bytes_accessed=costs[n] * 100,
            output_bytes=costs[n] * 1000,
            param_bytes=costs[n] * 10000,
            colocation=f"co_{n}",
            layer=f"layer/{n}",
        )
        for n in order
    ]
    edges = [("c", "d", 34.0), ("a", "b", 12.0), ("b", "d", 24.0), ("a", "c", 13.0)]
    return CompGraph.build("diamond", ops, edges, metadata={"origin": "test"})


def rich_graph() -> CompGraph:
    """A small graph exercising every field: tricky floats, measured NaN, metadata, layer,
    colocation and an all-NaN measured kind."""
    names = ["in", "mm1", "relu", "mm2", "loss", "grad"]
    n = len(names)
    floats = list(TRICKY_FLOATS)

    def column(shift: int) -> list[float]:
        return [floats[(i + shift) % len(floats)] for i in range(n)]

    return CompGraph.from_arrays(
        name="rich",
        op_names=names,
        op_types=["Input", "MatMul", "Relu", "MatMul", "Loss", "MatMulGrad"],
        flops=column(0),
        bytes_accessed=column(1),
        output_bytes=column(2),
        param_bytes=[0.0, 4096.0, 0.0, 8192.0, 0.0, 0.0],
        edge_src=["in", "mm1", "relu", "mm2", "mm1", "loss"],
        edge_dst=["mm1", "relu", "mm2", "loss", "grad", "grad"],
        edge_bytes=[0.1, 1e-300, 123456789.123, 3.0, 5e-324, 7.5],
        measured={
            "V100": [1e-6, math.nan, 0.1, math.nan, 123456789.123, 1e-300],
            "A100": [math.nan] * n,
            "K80": [0.5, 0.25, 0.125, 1.0, 2.0, 4.0],
        },
        colocation=["", "g1", "g1", "", "g2", ""],
        layer=["", "enc/0", "enc/0", "enc/1", "head", "enc/0"],
        metadata={"model": "mlp", "batch": 32, "nested": {"lr": 0.1, "tags": ["a", "b"]}},
    )


def assert_same_graph(g: CompGraph, h: CompGraph, *, check_metadata: bool = True) -> None:
    """Bitwise equality of every field (NaN equal to NaN, 0.0 distinct from -0.0)."""
    assert h.name == g.name
    assert h.op_names == g.op_names
    assert h.op_types == g.op_types
    for key in (*OP_COLUMNS, "edge_src", "edge_dst", "edge_bytes"):
        a, b = getattr(g, key), getattr(h, key)
        assert a.dtype == b.dtype, key
        assert a.shape == b.shape, key
        assert a.tobytes() == b.tobytes(), key
    assert list(h.measured) == list(g.measured)
    for kind in g.measured:
        assert h.measured[kind].tobytes() == g.measured[kind].tobytes(), kind
    assert h.colocation == g.colocation
    assert h.layer == g.layer
    if check_metadata:
        assert dict(h.metadata) == dict(g.metadata)
    assert h.fingerprint == g.fingerprint


def is_topological(g: CompGraph) -> bool:
    return bool(np.all(g.edge_src < g.edge_dst))


def edges_sorted(g: CompGraph) -> bool:
    pairs = list(zip(g.edge_src.tolist(), g.edge_dst.tolist(), strict=True))
    return pairs == sorted(pairs)


def named_edges(g: CompGraph) -> Counter[tuple[str, str, float]]:
    return Counter(
        (g.op_names[s], g.op_names[d], b)
        for s, d, b in zip(
            g.edge_src.tolist(), g.edge_dst.tolist(), g.edge_bytes.tolist(), strict=True
        )
    )


def reference_order(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Slow twin of the sort: repeatedly take the smallest-index op whose producers are all placed."""
    preds: list[set[int]] = [set() for _ in range(n)]
    for s, d in edges:
        preds[d].add(s)
    placed: list[int] = []
    done: set[int] = set()
    while len(placed) < n:
        u = min(i for i in range(n) if i not in done and preds[i] <= done)
        placed.append(u)
        done.add(u)
    return placed


def random_dag(rng: np.random.Generator, n: int, p: float) -> list[tuple[int, int]]:
    """Edges ``i -> j`` with ``i < j``, each present with probability ``p``."""
    return [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < p]


def quoted_names(message: str) -> list[str]:
    return re.findall(r"'([^']*)'", message)


def cycle_path(message: str) -> list[str]:
    """The op names of the ``'x' -> 'y' -> ... -> 'x'`` path in a cycle error message."""
    match = re.search(r"('[^']*'(?: -> '[^']*')+)", message)
    assert match, f"no cycle path in {message!r}"
    return quoted_names(match.group(1))


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def minimal_file() -> dict[str, Any]:
    """A hand-written graph file with only the required keys."""
    return {
        "format": "graphopt-graph",
        "version": 1,
        "name": "hand",
        "ops": {
            "name": ["x", "y", "z"],
            "type": ["Input", "MatMul", "Relu"],
            "flops": [0, 2e9, 1e6],
            "bytes": [4096, 8192, 8192],
            "output_bytes": [4096, 4096, 4096],
            "param_bytes": [0, 1024, 0],
        },
        "edges": {"src": ["x", "y"], "dst": ["y", "z"], "bytes": [4096, 4096]},
    }


# ---------------------------------------------------------------------- construction
def test_build_keeps_topological_input_order() -> None:
    # ("a", "c", "b", "d") is one of two valid orders; the sort must not reorder it.
    for order in [("a", "b", "c", "d"), ("a", "c", "b", "d")]:
        g = diamond(order)
        assert g.op_names == order
        assert g.op_types == tuple(f"T{n}" for n in order)


def test_build_sorts_shuffled_input_stably() -> None:
    # Among ready ops the one listed first in the input wins.
    assert diamond(("d", "b", "a", "c")).op_names == ("a", "b", "c", "d")
    assert diamond(("d", "c", "b", "a")).op_names == ("a", "c", "b", "d")
    assert diamond(("b", "d", "c", "a")).op_names == ("a", "b", "c", "d")


def test_build_permutes_every_op_column_with_its_op() -> None:
    g = diamond(("d", "c", "b", "a"))
    costs = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    expected = np.array([costs[n] for n in g.op_names])
    np.testing.assert_array_equal(g.flops, expected * 10)
    np.testing.assert_array_equal(g.bytes_accessed, expected * 100)
    np.testing.assert_array_equal(g.output_bytes, expected * 1000)
    np.testing.assert_array_equal(g.param_bytes, expected * 10000)
    assert g.op_types == tuple(f"T{n}" for n in g.op_names)
    assert g.colocation == tuple(f"co_{n}" for n in g.op_names)
    assert g.layer == tuple(f"layer/{n}" for n in g.op_names)
    assert g.metadata == {"origin": "test"}


def test_edges_sorted_by_source_then_destination_with_their_bytes() -> None:
    for order in [("a", "b", "c", "d"), ("d", "c", "b", "a")]:
        g = diamond(order)
        assert is_topological(g)
        assert edges_sorted(g)
        for s, d, b in zip(
            g.edge_src.tolist(), g.edge_dst.tolist(), g.edge_bytes.tolist(), strict=True
        ):
            # Edge bytes were chosen as 10 * index(src) + index(dst), 1-based in "abcd".
            assert b == 10 * ("abcd".index(g.op_names[s]) + 1) + "abcd".index(g.op_names[d]) + 1
    g = diamond()
    assert g.edge_src.tolist() == [0, 0, 1, 2]
    assert g.edge_dst.tolist() == [1, 2, 3, 3]
    assert g.edge_bytes.tolist() == [12.0, 13.0, 24.0, 34.0]


def test_array_dtypes_and_shapes() -> None:
    g = rich_graph()
    for key in OP_COLUMNS:
        assert getattr(g, key).dtype == np.float64
        assert getattr(g, key).shape == (g.num_ops,)
    for kind in g.measured:
        assert g.measured[kind].dtype == np.float64
        assert g.measured[kind].shape == (g.num_ops,)
    assert g.edge_src.dtype == np.int64
    assert g.edge_dst.dtype == np.int64
    assert g.edge_bytes.dtype == np.float64
    assert list(g.measured) == sorted(g.measured)


def test_arrays_are_read_only_and_graph_is_frozen() -> None:
    g = rich_graph()
    arrays = [getattr(g, key) for key in (*OP_COLUMNS, "edge_src", "edge_dst", "edge_bytes")]
    arrays += list(g.measured.values())
    arrays += list(g.successors_csr) + list(g.predecessors_csr)
    for array in arrays:
        assert not array.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.name = "other"  # type: ignore[misc]


def test_graph_does_not_alias_the_callers_arrays() -> None:
    flops = np.array([1.0, 2.0])
    edge_bytes = np.array([5.0])
    measured = np.array([0.5, math.nan])
    g = CompGraph.from_arrays(
        "g",
        ["a", "b"],
        ["T", "T"],
        flops,
        [0, 0],
        [0, 0],
        [0, 0],
        [0],
        [1],
        edge_bytes,
        measured={"V100": measured},
    )
    flops[0] = 99.0
    edge_bytes[0] = 99.0
    measured[0] = 99.0
    assert g.flops.tolist() == [1.0, 2.0]
    assert g.edge_bytes.tolist() == [5.0]
    assert g.measured["V100"][0] == 0.5


def test_csr_on_diamond() -> None:
    g = diamond(("d", "c", "b", "a"))  # sorted to a, c, b, d
    assert g.op_names == ("a", "c", "b", "d")
    indptr, succ = g.successors_csr
    assert indptr.tolist() == [0, 2, 3, 4, 4]
    assert [succ[indptr[i] : indptr[i + 1]].tolist() for i in range(4)] == [[1, 2], [3], [3], []]
    pindptr, pred, eids = g.predecessors_csr
    assert pindptr.tolist() == [0, 0, 1, 2, 4]
    assert [pred[pindptr[i] : pindptr[i + 1]].tolist() for i in range(4)] == [[], [0], [0], [1, 2]]
    for i in range(g.num_ops):
        for k in range(pindptr[i], pindptr[i + 1]):
            assert g.edge_dst[eids[k]] == i
            assert g.edge_src[eids[k]] == pred[k]
    # Successor positions are edge ids: edge k runs from its CSR row to succ[k].
    for i in range(g.num_ops):
        for k in range(indptr[i], indptr[i + 1]):
            assert g.edge_src[k] == i and g.edge_dst[k] == succ[k]
    assert sorted(eids.tolist()) == list(range(g.num_edges))
    assert g.successors_csr is g.successors_csr  # cached


def test_basic_views() -> None:
    g = diamond()
    assert g.num_ops == len(g) == 4
    assert g.num_edges == 4
    assert g.index == {"a": 0, "b": 1, "c": 2, "d": 3}
    assert repr(g) == "CompGraph(name='diamond', ops=4, edges=4, gflops=1e-07)"
    s = rich_graph().summary()
    assert s["name"] == "rich"
    assert (s["ops"], s["edges"]) == (6, 6)
    assert s["total_flops"] == pytest.approx(float(rich_graph().flops.sum()))
    assert s["total_param_bytes"] == 12288.0
    assert s["measured_kinds"] == ["A100", "K80", "V100"]
    assert s["op_types"]["MatMul"] == 2
    assert next(iter(s["op_types"])) == "MatMul"  # most frequent first
    json.dumps(s)  # display-ready: plain Python types only


def test_from_arrays_accepts_indices_into_the_given_order() -> None:
    # Op order b, a; edge a -> b given by indices into that order (1 -> 0).
    g = CompGraph.from_arrays(
        "g",
        ["b", "a"],
        ["Tb", "Ta"],
        [2, 1],
        [0, 0],
        [0, 0],
        [0, 0],
        np.array([1], dtype=np.int32),
        np.array([0], dtype=np.int64),
        [7.0],
    )
    assert g.op_names == ("a", "b")
    assert g.op_types == ("Ta", "Tb")
    assert g.flops.tolist() == [1.0, 2.0]
    assert (g.edge_src.tolist(), g.edge_dst.tolist(), g.edge_bytes.tolist()) == ([0], [1], [7.0])


def test_empty_and_edgeless_graphs() -> None:
    empty = CompGraph.from_arrays("empty", [], [], [], [], [], [], [], [], [])
    assert empty.num_ops == empty.num_edges == 0
    assert empty.successors_csr[0].tolist() == [0]
    assert empty.predecessors_csr[0].tolist() == [0]
    lone = CompGraph.build("lone", [Op("z", "T"), Op("y", "T"), Op("x", "T")], [])
    assert lone.op_names == ("z", "y", "x")  # no edges: input order kept
    assert lone.measured == {}
    assert lone.colocation == ("", "", "") and lone.layer == ("", "", "")


def test_build_fills_unmeasured_ops_with_nan() -> None:
    ops = [Op("a", "T", measured={"V100": 1.0}), Op("b", "T", measured={"A100": 2.0})]
    g = CompGraph.build("g", ops, [("a", "b", 1.0)])
    assert list(g.measured) == ["A100", "V100"]
    np.testing.assert_array_equal(g.measured["V100"], [1.0, math.nan])
    np.testing.assert_array_equal(g.measured["A100"], [math.nan, 2.0])


def test_fingerprint() -> None:
    assert diamond().fingerprint == diamond().fingerprint
    assert diamond(("d", "c", "b", "a")).fingerprint == diamond(("a", "c", "b", "d")).fingerprint
    assert diamond().fingerprint != diamond(("a", "c", "b", "d")).fingerprint
    base = CompGraph.build("g", [Op("a", "T", flops=1.0)], [])
    assert CompGraph.build("g", [Op("a", "T", flops=1.0)], []).fingerprint == base.fingerprint
    assert CompGraph.build("g", [Op("a", "T", flops=2.0)], []).fingerprint != base.fingerprint
    assert CompGraph.build("g", [Op("a", "U", flops=1.0)], []).fingerprint != base.fingerprint
    assert CompGraph.build("h", [Op("a", "T", flops=1.0)], []).fingerprint != base.fingerprint


def test_equal_values_have_equal_bits(tmp_path: Path) -> None:
    """-0.0 and every NaN bit pattern are stored canonically, so the fingerprint of a graph does
    not depend on how a zero or a missing measurement was computed."""
    with np.errstate(invalid="ignore"):
        negative_nan = np.array([0.0]) / np.array([0.0])  # sign bit set on x86
    odd_nan = np.frombuffer(bytes.fromhex("0100000000f8ff7f"), dtype=np.float64)  # payload 1

    def graph(zero: float, nan: float) -> CompGraph:
        return CompGraph.build("g", [Op("a", "T", flops=zero, measured={"V100": nan})], [])

    plain = graph(0.0, math.nan)
    for zero, nan in [(-0.0, math.nan), (0.0, float(negative_nan[0])), (0.0, float(odd_nan[0]))]:
        other = graph(zero, nan)
        assert other.flops.tobytes() == plain.flops.tobytes()
        assert other.measured["V100"].tobytes() == plain.measured["V100"].tobytes()
        assert other.fingerprint == plain.fingerprint
        assert CompGraph.load(other.save(tmp_path / "g.json")).fingerprint == other.fingerprint


# ---------------------------------------------------------------------- random DAGs
@pytest.mark.parametrize("seed", range(50))
def test_random_dag_sorted_topologically_with_edges_preserved(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    edges = random_dag(rng, n, p=float(rng.uniform(0.0, 0.4)))
    perm = rng.permutation(n)  # input position of the op with true rank r is perm[r]
    names = [""] * n
    flops = np.zeros(n)
    for r in range(n):
        names[perm[r]] = f"op{r}"
        flops[perm[r]] = float(r) + 0.5
    edge_list = [(f"op{s}", f"op{d}", float(rng.integers(1, 4))) for s, d in edges]
    shuffled = [edge_list[k] for k in rng.permutation(len(edge_list))]
    ops = [Op(name=nm, type="T", flops=f) for nm, f in zip(names, flops, strict=True)]
    g = CompGraph.build(f"random{seed}", ops, shuffled)

    assert sorted(g.op_names) == sorted(names)
    assert is_topological(g)
    assert edges_sorted(g)
    assert named_edges(g) == Counter(edge_list)
    # Op columns travel with their op.
    assert g.flops.tolist() == [float(nm[2:]) + 0.5 for nm in g.op_names]
    # The order is exactly the stable one computed by the slow reference.
    position = {nm: i for i, nm in enumerate(names)}
    input_edges = [(position[s], position[d]) for s, d, _ in shuffled]
    assert list(g.op_names) == [names[i] for i in reference_order(n, input_edges)]
    # Sorting a sorted graph changes nothing.
    again = CompGraph.from_arrays(
        g.name,
        g.op_names,
        g.op_types,
        g.flops,
        g.bytes_accessed,
        g.output_bytes,
        g.param_bytes,
        g.edge_src,
        g.edge_dst,
        g.edge_bytes,
    )
    assert_same_graph(g, again)


@pytest.mark.parametrize("seed", range(20))
def test_random_graph_with_a_cycle_reports_a_real_cycle(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(2, 30))
    edges = random_dag(rng, n, p=0.2)
    # Close a cycle with a back edge along a forward chain u -> ... -> v.
    u, v = sorted(rng.choice(n, size=2, replace=False).tolist())
    edges += [(i, i + 1) for i in range(u, v)] + [(v, u)]
    edges = sorted(set(edges))
    perm = rng.permutation(n)
    names = [f"n{int(perm[i])}" for i in range(n)]
    ops = [Op(name=nm, type="T") for nm in names]
    edge_set = {(names[s], names[d]) for s, d in edges}
    with pytest.raises(ValueError, match="cycle") as info:
        CompGraph.build("cyclic", ops, [(names[s], names[d], 1.0) for s, d in edges])
    path = cycle_path(str(info.value))
    assert path[0] == path[-1]
    assert len(set(path[:-1])) == len(path) - 1  # a simple cycle
    assert all((a, b) in edge_set for a, b in pairwise(path))
    assert re.search(rf"through op '{re.escape(path[0])}'", str(info.value))


# ---------------------------------------------------------------------- JSON file format
@pytest.mark.parametrize("filename", ["g.json", "g.json.gz"])
def test_file_round_trip_is_lossless(tmp_path: Path, filename: str) -> None:
    g = rich_graph()
    path = g.save(tmp_path / "sub" / "dir" / filename)
    assert path == tmp_path / "sub" / "dir" / filename
    assert [p.name for p in path.parent.iterdir()] == [filename]  # no temporary file left behind
    raw = path.read_bytes()
    assert raw[:2] == b"\x1f\x8b" if filename.endswith(".gz") else raw[:1] == b"{"
    h = CompGraph.load(path)
    assert_same_graph(g, h)
    for value in TRICKY_FLOATS:
        assert value in h.flops.tolist() or value in h.bytes_accessed.tolist()
    assert h.edge_bytes.tolist() == [0.1, 1e-300, 5e-324, 123456789.123, 3.0, 7.5]
    assert np.isnan(h.measured["V100"]).tolist() == [False, True, False, True, False, False]
    assert np.isnan(h.measured["A100"]).all()
    assert h.metadata == {"model": "mlp", "batch": 32, "nested": {"lr": 0.1, "tags": ["a", "b"]}}
    assert h.layer == g.layer and "enc/0" in h.layer
    assert h.colocation == g.colocation and "g1" in h.colocation
    # Saving the loaded graph again gives the same content.
    again = CompGraph.load(h.save(tmp_path / ("again-" + filename)))
    assert_same_graph(g, again)


def test_file_round_trip_string_path_and_str_types(tmp_path: Path) -> None:
    g = diamond(("d", "c", "b", "a"))
    path = g.save(str(tmp_path / "g.json"))
    assert isinstance(path, Path)
    assert_same_graph(g, CompGraph.load(str(path)))


def test_to_json_dict_is_strict_json_in_topological_order() -> None:
    g = rich_graph()
    data = g.to_json_dict()
    text = json.dumps(data, allow_nan=False)  # NaN is written as null, never as a bare NaN
    assert data["format"] == FORMAT_NAME == "graphopt-graph"
    assert data["version"] == FORMAT_VERSION == 3
    assert data["ops"]["name"] == list(g.op_names)
    assert data["measured"]["V100"][1] is None
    assert data["edges"]["src"][0] == "in"  # edges name their ops
    assert_same_graph(g, CompGraph.from_json_dict(json.loads(text)))


def test_file_with_ops_out_of_order_loads_sorted(tmp_path: Path) -> None:
    data = minimal_file()
    data["ops"] = {  # z, x, y: reversed dependencies
        "name": ["z", "x", "y"],
        "type": ["Relu", "Input", "MatMul"],
        "flops": [1e6, 0, 2e9],
        "bytes": [8192, 4096, 8192],
        "output_bytes": [4096, 4096, 4096],
        "param_bytes": [0, 0, 1024],
        "layer": ["l/z", "l/x", "l/y"],
        "colocation": ["cz", "cx", "cy"],
    }
    data["measured"] = {"V100": [3e-3, None, 2e-3]}
    data["edges"] = {"src": ["y", "x"], "dst": ["z", "y"], "bytes": [20.0, 10.0]}
    g = CompGraph.load(write_json(tmp_path / "g.json", data))
    assert g.op_names == ("x", "y", "z")
    assert g.op_types == ("Input", "MatMul", "Relu")
    assert g.flops.tolist() == [0.0, 2e9, 1e6]
    assert g.param_bytes.tolist() == [0.0, 1024.0, 0.0]
    assert g.layer == ("l/x", "l/y", "l/z")
    assert g.colocation == ("cx", "cy", "cz")
    np.testing.assert_array_equal(g.measured["V100"], [math.nan, 2e-3, 3e-3])
    assert g.edge_src.tolist() == [0, 1]
    assert g.edge_dst.tolist() == [1, 2]
    assert g.edge_bytes.tolist() == [10.0, 20.0]
    # the file's order is kept for per-op lists given in it, and is no part of the content
    assert g.file_order is not None and g.file_order.tolist() == [2, 0, 1]  # z, x, y
    assert g.from_file_order(["on z", "on x", "on y"]).tolist() == ["on x", "on y", "on z"]
    assert g.fingerprint == CompGraph.load(g.save(tmp_path / "sorted.json")).fingerprint
    with pytest.raises(ValueError, match=r"has 3 ops, but \(2,\) values .* file's op order"):
        g.from_file_order([0, 1])


def test_file_order_is_none_where_it_is_the_graphs_own(tmp_path: Path) -> None:
    g = CompGraph.load(write_json(tmp_path / "g.json", minimal_file()))  # x, y, z: sorted
    assert g.file_order is None and g.from_file_order([5, 6, 7]).tolist() == [5, 6, 7]
    assert diamond(("d", "c", "b", "a")).file_order is None  # built, not read from a file


@pytest.mark.parametrize("filename", ["hand.json", "hand.json.gz"])
def test_hand_written_file_with_only_required_keys_loads(tmp_path: Path, filename: str) -> None:
    path = tmp_path / filename
    text = json.dumps(minimal_file(), indent=2)
    if filename.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    g = CompGraph.load(path)
    assert g.name == "hand"
    assert g.op_names == ("x", "y", "z")
    assert g.flops.tolist() == [0.0, 2e9, 1e6]
    assert g.flops.dtype == np.float64
    assert g.edge_bytes.tolist() == [4096.0, 4096.0]
    assert g.measured == {}
    assert g.metadata == {}
    assert g.colocation == ("", "", "")
    assert g.layer == ("", "", "")


# ---------------------------------------------------------------------- networkx
def test_networkx_round_trip() -> None:
    g = rich_graph()
    nxg = g.to_networkx()
    assert isinstance(nxg, nx.DiGraph)
    assert list(nxg.nodes) == list(g.op_names)
    assert nxg.number_of_edges() == g.num_edges
    assert nxg.nodes["mm1"]["type"] == "MatMul"
    assert nxg.nodes["mm1"]["measured"] == {"K80": 0.25}  # NaN entries left out
    assert nxg.edges["relu", "mm2"]["bytes"] == 123456789.123
    assert nxg.graph["name"] == "rich"
    h = CompGraph.from_networkx(nxg)
    assert_same_graph(g, h)
    assert named_edges(h) == named_edges(g)
    assert CompGraph.from_networkx(nxg, name="renamed").name == "renamed"


def test_networkx_round_trip_after_shuffled_build() -> None:
    g = diamond(("d", "c", "b", "a"))
    assert_same_graph(g, CompGraph.from_networkx(g.to_networkx()))


def test_from_networkx_defaults_and_sorting() -> None:
    nxg = nx.DiGraph()
    nxg.add_node("sink", output_bytes=1.0)
    nxg.add_node("mid", type="Relu", flops=5.0, output_bytes=64.0)
    nxg.add_node("src", output_bytes=32.0)
    nxg.add_edge("mid", "sink")  # no bytes: the producer's output_bytes
    nxg.add_edge("src", "mid", bytes=8.0)
    g = CompGraph.from_networkx(nxg)
    assert g.name == "graph"
    assert g.op_names == ("src", "mid", "sink")
    assert g.op_types == ("Op", "Relu", "Op")
    assert g.flops.tolist() == [0.0, 5.0, 0.0]
    assert g.bytes_accessed.tolist() == [0.0, 0.0, 0.0]
    assert g.edge_bytes.tolist() == [8.0, 64.0]
    assert g.measured == {} and g.metadata == {}


def test_from_networkx_rejects_a_cycle() -> None:
    with pytest.raises(ValueError, match="cycle through op"):
        CompGraph.from_networkx(nx.DiGraph([("a", "b"), ("b", "a")]))


# ---------------------------------------------------------------------- bad input
def ops_named(*names: str) -> list[Op]:
    return [Op(name=n, type="T") for n in names]


def test_three_cycle_with_tail_names_an_op_on_the_cycle() -> None:
    # head -> cyc_a -> cyc_b -> cyc_c -> cyc_a, and cyc_c -> tail_1 -> tail_2 downstream of it.
    # The tail is listed first, so it is what an unwary search would report.
    edges = [
        ("head", "cyc_a", 1.0),
        ("cyc_a", "cyc_b", 1.0),
        ("cyc_b", "cyc_c", 1.0),
        ("cyc_c", "cyc_a", 1.0),
        ("cyc_c", "tail_1", 1.0),
        ("tail_1", "tail_2", 1.0),
    ]
    cycle = {"cyc_a", "cyc_b", "cyc_c"}
    orders = [
        ("tail_2", "tail_1", "head", "cyc_c", "cyc_b", "cyc_a"),
        ("tail_1", "tail_2", "cyc_b", "head", "cyc_a", "cyc_c"),
        ("head", "cyc_a", "cyc_b", "cyc_c", "tail_1", "tail_2"),
    ]
    for order in orders:
        for edge_order in (edges, edges[::-1]):
            with pytest.raises(ValueError, match="cycle") as info:
                CompGraph.build("g", ops_named(*order), edge_order)
            message = str(info.value)
            match = re.search(r"cycle through op '([^']*)'", message)
            assert match and match.group(1) in cycle, message
            assert set(quoted_names(message)) <= cycle | {"g"}, message
            assert "tail" not in message and "head" not in message
            path = cycle_path(message)
            assert set(path) == cycle and path[0] == path[-1] and len(path) == 4
            assert all((a, b, 1.0) in edges for a, b in pairwise(path))


def test_self_loop_is_a_cycle() -> None:
    edges = [("a", "b", 1.0), ("b", "b", 1.0), ("b", "c", 1.0)]
    with pytest.raises(ValueError, match=r"cycle through op 'b': 'b' -> 'b'") as info:
        CompGraph.build("g", ops_named("c", "a", "b"), edges)
    assert "'a'" not in str(info.value) and "'c'" not in str(info.value)


def test_two_cycle_in_index_form() -> None:
    with pytest.raises(ValueError, match=r"cycle through op '(p|q)'"):
        CompGraph.from_arrays(
            "g", ["p", "q", "r"], ["T"] * 3, *[[0, 0, 0]] * 4, [0, 1, 1], [1, 0, 2], [1, 1, 1]
        )


@pytest.mark.parametrize(
    ("src", "dst", "pattern"),
    [
        ("a", "ghost", r"edge #1 has unknown consumer op 'ghost'"),
        ("ghost", "b", r"edge #1 has unknown producer op 'ghost'"),
        (0, 2, r"edge #1 has consumer index 2, outside \[0, 2\)"),
        (-1, 1, r"edge #1 has producer index -1, outside \[0, 2\)"),
        (1.0, 0, r"edge #1 producer 1.0 is neither a name nor an index"),
        (True, 0, r"edge #1 producer True is neither a name nor an index"),
    ],
)
def test_edge_to_unknown_op(src: Any, dst: Any, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        CompGraph.from_arrays(
            "g",
            ["a", "b"],
            ["T", "T"],
            [0, 0],
            [0, 0],
            [0, 0],
            [0, 0],
            ["a", src],
            ["b", dst],
            [1.0, 1.0],
        )


def test_build_edge_to_unknown_op_names_it() -> None:
    with pytest.raises(ValueError, match="unknown consumer op 'nowhere'"):
        CompGraph.build("g", ops_named("a"), [("a", "nowhere", 1.0)])


@pytest.mark.parametrize("column", OP_COLUMNS)
@pytest.mark.parametrize("value", [-1.0, -1e-300, math.nan, math.inf, -math.inf])
def test_bad_op_cost_names_the_op(column: str, value: float) -> None:
    ops = [Op("good", "T"), Op("culprit", "T", **{column: value}), Op("later", "T")]
    with pytest.raises(ValueError, match=rf"op 'culprit' has {column} = ") as info:
        CompGraph.build("g", ops, [("good", "culprit", 1.0)])
    assert "'good'" not in str(info.value) and "'later'" not in str(info.value)
    assert "finite and >= 0" in str(info.value)


@pytest.mark.parametrize("value", [-1.0, math.nan, math.inf])
def test_bad_edge_bytes(value: float) -> None:
    with pytest.raises(ValueError, match=r"edge #1 has edge bytes = .*finite and >= 0"):
        CompGraph.build("g", ops_named("a", "b", "c"), [("a", "b", 1.0), ("b", "c", value)])


def test_measured_allows_nan_but_not_negative_or_inf() -> None:
    g = CompGraph.build("g", [Op("a", "T", measured={"V100": math.nan})], [])
    assert math.isnan(g.measured["V100"][0])
    for value in (-1e-9, math.inf):
        with pytest.raises(ValueError, match=r"op 'slow' has measured\[V100\] = .*not measured"):
            CompGraph.build(
                "g",
                [Op("a", "T", measured={"V100": 1.0}), Op("slow", "T", measured={"V100": value})],
                [],
            )


def test_duplicate_op_names() -> None:
    with pytest.raises(ValueError, match=r"duplicate op name 'twin' \(ops 1 and 3\)"):
        CompGraph.build("g", ops_named("a", "twin", "b", "twin"), [])


def test_duplicate_edges() -> None:
    edges = [("a", "b", 1.0), ("b", "c", 1.0), ("a", "b", 2.0)]
    with pytest.raises(ValueError, match=r"duplicate edge 'a' -> 'b'; merge"):
        CompGraph.build("g", ops_named("c", "b", "a"), edges)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"flops": [0.0]}, r"column 'flops' has 1 entries, expected 2"),
        ({"bytes_accessed": [0.0, 0.0, 0.0]}, r"column 'bytes_accessed' has 3 entries, expected 2"),
        ({"output_bytes": []}, r"column 'output_bytes' has 0 entries, expected 2"),
        ({"param_bytes": [0.0]}, r"column 'param_bytes' has 1 entries, expected 2"),
        ({"op_types": ["T"]}, r"1 op types for 2 ops"),
        ({"measured": {"V100": [1.0]}}, r"column 'measured\[V100\]' has 1 entries, expected 2"),
        ({"colocation": ["", "", ""]}, r"colocation/layer columns must have 2 entries"),
        ({"layer": [""]}, r"colocation/layer columns must have 2 entries"),
        ({"edge_dst": []}, r"1 edge producers but 0 consumers"),
        ({"edge_bytes": [1.0, 2.0]}, r"column 'edge bytes' has 2 entries, expected 1"),
        ({"flops": ["lots", 1.0]}, r"column 'flops' is not numeric"),
    ],
)
def test_column_length_mismatch(kwargs: dict[str, Any], pattern: str) -> None:
    columns: dict[str, Any] = dict(
        name="g",
        op_names=["a", "b"],
        op_types=["T", "T"],
        flops=[0.0, 0.0],
        bytes_accessed=[0.0, 0.0],
        output_bytes=[0.0, 0.0],
        param_bytes=[0.0, 0.0],
        edge_src=["a"],
        edge_dst=["b"],
        edge_bytes=[1.0],
    )
    columns.update(kwargs)
    with pytest.raises(ValueError, match=rf"graph 'g': {pattern}"):
        CompGraph.from_arrays(**columns)


@pytest.mark.parametrize("version", [4, 0, "1", None, True])
def test_wrong_file_version(tmp_path: Path, version: Any) -> None:
    data = minimal_file()
    data["version"] = version
    path = write_json(tmp_path / "g.json", data)
    with pytest.raises(ValueError, match=rf"version {re.escape(repr(version))} is not supported"):
        CompGraph.load(path)


@pytest.mark.parametrize("fmt", ["graphopt-graph-v2", "onnx", None])
def test_wrong_format_tag(tmp_path: Path, fmt: Any) -> None:
    data = minimal_file()
    data["format"] = fmt
    with pytest.raises(ValueError, match=r"g\.json: not a graphopt graph file"):
        CompGraph.load(write_json(tmp_path / "g.json", data))


def test_file_that_is_not_an_object(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a graphopt graph file"):
        CompGraph.load(write_json(tmp_path / "g.json", [1, 2, 3]))


@pytest.mark.parametrize(
    ("section", "key"),
    [
        (None, "name"),
        (None, "ops"),
        (None, "edges"),
        ("ops", "name"),
        ("ops", "type"),
        ("ops", "flops"),
        ("ops", "bytes"),
        ("ops", "output_bytes"),
        ("ops", "param_bytes"),
        ("edges", "src"),
        ("edges", "dst"),
        ("edges", "bytes"),
    ],
)
def test_missing_key(tmp_path: Path, section: str | None, key: str) -> None:
    data = minimal_file()
    del (data if section is None else data[section])[key]
    path = write_json(tmp_path / "g.json", data)
    with pytest.raises(ValueError, match=rf"g\.json: graph file is missing the key '{key}'"):
        CompGraph.load(path)


@pytest.mark.parametrize(
    ("key", "value"),
    [("measured", None), ("measured", [1.0]), ("measured", {"V100": 3}), ("ops", [1, 2])],
)
def test_malformed_section(key: str, value: Any) -> None:
    data = minimal_file()
    data[key] = value
    with pytest.raises(ValueError, match="malformed graph file"):
        CompGraph.from_json_dict(data, source="src.json")


@pytest.mark.parametrize(
    ("filename", "content"),
    [
        ("g.json", b"{not json"),
        ("g.json", b""),
        ("g.json", b'{"format": "graphopt-graph", '),
        ("g.json", b"\xff\xfe\x00garbage"),
        ("g.json.gz", b"plain text, not gzip"),
        ("g.json.gz", gzip.compress(b"{not json", mtime=0)),
        ("g.json.gz", gzip.compress(b'{"a": 1}', mtime=0)[:-6]),  # truncated
    ],
    ids=[
        "bad-json",
        "empty",
        "truncated-json",
        "not-utf8",
        "not-gzip",
        "gz-bad-json",
        "gz-truncated",
    ],
)
def test_unreadable_file(tmp_path: Path, filename: str, content: bytes) -> None:
    path = tmp_path / filename
    path.write_bytes(content)
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}: cannot read graph file"):
        CompGraph.load(path)


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_a_pickle_file_is_named_a_pickle_and_never_loaded(tmp_path: Path, protocol: int) -> None:
    """#40: a pickle where a graph file was expected said "can't decode byte 0x80"."""
    path = tmp_path / "g.json"
    path.write_bytes(pickle.dumps({"format": FORMAT_NAME}, protocol=protocol))
    with pytest.raises(ValueError) as info:
        CompGraph.load(path)
    assert str(info.value) == (
        f"{path} is a pickle file (protocol {protocol}), which graphopt never loads (unpickling "
        "can run code; nothing in it was run); give a graph file (JSON, or JSON.gz)"
    )


def test_nonexistent_file(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "g.json"
    with pytest.raises(ValueError, match=rf"graph file '{re.escape(str(path))}' does not exist"):
        CompGraph.load(path)


def test_invalid_graph_in_file_names_the_culprit(tmp_path: Path) -> None:
    data = minimal_file()
    data["edges"]["dst"][1] = "x"  # y -> x closes the cycle x -> y -> x
    with pytest.raises(ValueError, match=r"graph 'hand': the graph has a cycle through op '(x|y)'"):
        CompGraph.load(write_json(tmp_path / "cyclic.json", data))
    data = minimal_file()
    data["ops"]["flops"][2] = -5
    with pytest.raises(ValueError, match=r"op 'z' has flops = -5.0"):
        CompGraph.load(write_json(tmp_path / "negative.json", data))


# ---------------------------------------------------------------------- op classes
def test_version_1_file_derives_op_classes(tmp_path: Path) -> None:
    g = CompGraph.load(write_json(tmp_path / "v1.json", minimal_file()))
    assert g.op_classes == ("source", "contraction", "elementwise")
    again = CompGraph.load(g.save(tmp_path / "v2.json"))
    assert again.to_json_dict()["version"] == 3 and again.op_classes == g.op_classes


def test_file_classes_override_the_op_type(tmp_path: Path) -> None:
    data = minimal_file()
    data["version"] = 2
    data["ops"]["class"] = ["source", "opaque", ""]  # "" derives the class from the type
    g = CompGraph.load(write_json(tmp_path / "g.json", data))
    assert g.op_classes == ("source", "opaque", "elementwise")
    assert g.fingerprint != CompGraph.from_json_dict(minimal_file()).fingerprint


def test_unknown_op_class_is_refused(tmp_path: Path) -> None:
    data = minimal_file()
    data["ops"]["class"] = ["source", "matmul", "elementwise"]
    with pytest.raises(ValueError, match=r"op 'y': unknown op class 'matmul'; choose one of"):
        CompGraph.load(write_json(tmp_path / "g.json", data))
    data["ops"]["class"] = ["source"]
    with pytest.raises(ValueError, match="1 op classes for 3 ops"):
        CompGraph.load(write_json(tmp_path / "g.json", data))


def test_op_class_survives_networkx() -> None:
    g = CompGraph.build(
        "c", [Op("a", "Foo", op_class="elementwise"), Op("b", "Foo")], [("a", "b", 1.0)]
    )
    assert g.op_classes == ("elementwise", "opaque")  # an unknown type is opaque
    assert CompGraph.from_networkx(g.to_networkx()).op_classes == g.op_classes


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        ({"name": "xyz"}, "op names must be a list of strings, got str"),
        ({"flops": [True, False, True]}, "column 'flops' is not numeric: it holds bool"),
        ({"flops": [10**400, 0, 0]}, "column 'flops' is not numeric: int too large"),
    ],
)
def test_columns_of_the_wrong_kind_are_refused(
    tmp_path: Path, change: dict[str, Any], pattern: str
) -> None:
    data = minimal_file()
    data["ops"].update(change)
    with pytest.raises(ValueError, match=pattern):
        CompGraph.load(write_json(tmp_path / "g.json", data))


def test_unreadable_graph_files_name_the_file(tmp_path: Path) -> None:
    corrupt = tmp_path / "g.json.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(ValueError, match="g.json.gz: cannot read graph file"):
        CompGraph.load(corrupt)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        CompGraph.load(deep)
