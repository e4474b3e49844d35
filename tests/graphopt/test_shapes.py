"""Shapes and dtypes of ops: parsing, the bytes check, the graph file (version 3) and its
older versions."""

from __future__ import annotations

import json

import pytest

from graphopt.graph import CompGraph, Op
from graphopt.shapes import check_op_tensors, format_tensors, nbytes, parse_dtypes, parse_shapes


def shaped_graph() -> CompGraph:
    ops = [
        Op("x", "Placeholder", output_bytes=4 * 8 * 16),
        Op(
            "mm",
            "mm",
            flops=2 * 8 * 16 * 32,
            bytes_accessed=4 * (8 * 16 + 16 * 32 + 8 * 32),
            output_bytes=4 * 8 * 32,
            output_shapes=((8, 32),),
            output_dtypes=("float32",),
            input_shapes=((8, 16), (16, 32)),
        ),
        Op(
            "pool",
            "max_pool2d_with_indices",
            output_bytes=4 * 8 + 8 * 8,
            output_shapes=((8,), (8,)),
            output_dtypes=("float32", "int64"),
        ),
    ]
    return CompGraph.build("g", ops, [("x", "mm", 512.0), ("mm", "pool", 1024.0)])


def test_parse_and_bytes():
    assert parse_shapes([[8, 32], []], "op") == ((8, 32), ())
    assert parse_shapes(None, "op") is None
    assert parse_dtypes(["bfloat16"], "op") == ("bfloat16",)
    assert nbytes((8, 32), "float16") == 512
    assert format_tensors(((8, 32), (8,)), ("float32", "int64")) == "f32[8,32], i64[8]"
    assert format_tensors(None, None) == "?"
    check_op_tensors(((8, 32),), ("float32",), 1024.0, "op")  # agrees: no error


@pytest.mark.parametrize(
    ("shapes", "dtypes", "output_bytes", "message"),
    [
        ([[8, -1]], ["float32"], 0.0, "negative dim -1"),
        ([[8, 32]], ["float24"], 1024.0, "unknown dtype 'float24'"),
        ([[8, 32]], ["float32"], 1000.0, "hold 1,024 bytes but output_bytes is 1,000"),
        ([[8, 32]], ["float32", "int64"], 1024.0, "1 output shape(s) but 2 dtype(s)"),
        ([[8, 2.5]], ["float32"], 80.0, "dims are ints"),
        ([[8, 32]], [["float32"]], 1024.0, "dtypes must be a list of dtype names, got ['float32']"),
    ],
)
def test_bad_tensors_name_the_op(shapes, dtypes, output_bytes, message):
    with pytest.raises(ValueError, match="op 'mm'") as info:
        CompGraph.from_arrays(
            "g", ["mm"], ["mm"], [0.0], [0.0], [output_bytes], [0.0], [], [], [],
            output_shapes=[shapes], output_dtypes=[dtypes],
        )  # fmt: skip
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_nested_dtype_in_a_graph_file_names_the_file_and_op(tmp_path):
    """#40: a v3 graph file whose dtype is a nested list said "unhashable type: 'list'"."""
    data = shaped_graph().to_json_dict()
    data["ops"]["dtypes"] = [[["float32"]] if d else d for d in data["ops"]["dtypes"]]
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="dtypes must be a list of dtype names") as info:
        CompGraph.load(path)
    assert "\n" not in str(info.value) and "op '" in str(info.value)


def test_file_round_trip_version_3(tmp_path):
    graph = shaped_graph()
    assert graph.has_shapes
    assert graph.output_shapes[graph.index["x"]] is None  # unknown stays unknown
    path = graph.save(tmp_path / "g.json.gz")
    back = CompGraph.load(path)
    assert back.to_json_dict()["version"] == 3
    assert back.output_shapes == graph.output_shapes
    assert back.output_dtypes == graph.output_dtypes
    assert back.input_shapes == graph.input_shapes
    assert back.fingerprint == graph.fingerprint
    assert back.tensor_fingerprint == graph.tensor_fingerprint
    data = graph.to_json_dict()
    assert data["ops"]["shapes"][1] == [[8, 32]] and data["ops"]["shapes"][0] is None


def test_graph_without_shapes_writes_no_columns_and_keeps_its_hash():
    graph = shaped_graph()
    data = graph.to_json_dict()
    for key in ("shapes", "dtypes", "input_shapes"):
        del data["ops"][key]
    bare = CompGraph.from_json_dict(data)
    assert not bare.has_shapes and bare.output_shapes == ()
    assert "shapes" not in bare.to_json_dict()["ops"]
    # the same costs: the same hash (decisions saved before the graph had shapes still replay);
    # a cost model that reads shapes keys on tensor_fingerprint too
    assert bare.fingerprint == graph.fingerprint
    assert bare.tensor_fingerprint == "" and graph.tensor_fingerprint != ""


@pytest.mark.parametrize("version", [1, 2])
def test_older_versions_load(version):
    data = shaped_graph().to_json_dict()
    data["version"] = version
    for key in ("shapes", "dtypes", "input_shapes"):
        del data["ops"][key]
    if version == 1:
        del data["ops"]["class"]
    graph = CompGraph.from_json_dict(data)
    assert graph.num_ops == 3 and not graph.has_shapes


def test_networkx_round_trip_keeps_shapes():
    graph = shaped_graph()
    back = CompGraph.from_networkx(graph.to_networkx())
    assert back.output_shapes == graph.output_shapes
    assert back.output_dtypes == graph.output_dtypes
    assert back.input_shapes == graph.input_shapes
    assert back.fingerprint == graph.fingerprint
