"""TpuGraphs loader: the real XLA alexnet layout file, malformed files, splits and duplicates."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from graphopt.costmodel.tpugraphs import (
    REQUIRED_KEYS,
    LayoutGraph,
    duplicate_configs,
    load_tpugraphs,
    split_configs,
)
from graphopt.data import TPUGRAPHS_SAMPLE as ALEXNET


def _arrays() -> dict[str, np.ndarray]:
    """A valid 5-node layout graph with 2 configurable nodes and 4 configurations."""
    rng = np.random.default_rng(0)
    return {
        "node_feat": rng.normal(size=(5, 3)).astype(np.float32),
        "node_opcode": np.array([1, 2, 2, 7, 3], dtype=np.uint8),
        # [u, v]: u consumes v. 0 -> 1 -> {2, 3} -> 4 in data-flow order.
        "edge_index": np.array([[1, 0], [2, 1], [3, 1], [4, 2], [4, 3]], dtype=np.int64),
        "node_config_ids": np.array([1, 3], dtype=np.int64),
        "node_config_feat": rng.integers(-1, 3, size=(4, 2, 2)).astype(np.float32),
        "node_splits": np.array([[0, 5]], dtype=np.int64),
        "config_runtime": np.array([40, 10, 30, 20], dtype=np.int64),
    }


def _write(tmp_path: Path, arrays: dict[str, np.ndarray], name: str = "g.npz") -> Path:
    path = tmp_path / name
    np.savez(path, **arrays)
    return path


# ---- the real file ------------------------------------------------------------------------------


def test_alexnet_loads_with_documented_shapes() -> None:
    layout = load_tpugraphs(ALEXNET)
    assert isinstance(layout, LayoutGraph)
    assert layout.name == "layout_xla_alexnet"
    assert layout.num_nodes == 372 and layout.num_configs == 47_712
    assert layout.node_feat.shape == (372, 70) and layout.node_feat.dtype == np.float32
    assert layout.node_opcode.shape == (372,) and layout.node_opcode.dtype == np.int64
    assert layout.edges.shape == (2, 597) and layout.edges.dtype == np.int64
    assert layout.config_node_ids.shape == (26,) and layout.config_node_ids.dtype == np.int64
    assert layout.config_feat.shape == (47_712, 26, 10) and layout.config_feat.dtype == np.float32
    assert layout.runtime.shape == (47_712,) and layout.runtime.dtype == np.float64
    assert (layout.runtime > 0).all()


def test_alexnet_edges_run_producer_to_consumer() -> None:
    layout = load_tpugraphs(ALEXNET)
    with np.load(ALEXNET) as raw:
        edge_index = raw["edge_index"]
        runtime = raw["config_runtime"]
    # Raw row 0 is [2, 0]: node 2 consumes node 0's output, so the edge is 0 -> 2.
    assert edge_index[0].tolist() == [2, 0]
    assert layout.edges[:, 0].tolist() == [0, 2]
    np.testing.assert_array_equal(layout.edges[0], edge_index[:, 1])
    np.testing.assert_array_equal(layout.edges[1], edge_index[:, 0])
    np.testing.assert_array_equal(layout.runtime, runtime.astype(np.float64))


def test_alexnet_duplicates() -> None:
    layout = load_tpugraphs(ALEXNET)
    assert duplicate_configs(layout) == 47_712 - 29_905


# ---- valid synthetic files ---------------------------------------------------------------------


def test_small_file_round_trips(tmp_path: Path) -> None:
    arrays = _arrays()
    layout = load_tpugraphs(_write(tmp_path, arrays), name="small")
    assert layout.name == "small"
    assert layout.edges.tolist() == [[0, 1, 1, 2, 3], [1, 2, 3, 4, 4]]
    np.testing.assert_array_equal(layout.node_opcode, [1, 2, 2, 7, 3])
    np.testing.assert_array_equal(layout.config_feat, arrays["node_config_feat"])
    np.testing.assert_array_equal(layout.runtime, [40.0, 10.0, 30.0, 20.0])


def test_node_splits_is_optional_and_column_counts_are_free(tmp_path: Path) -> None:
    arrays = _arrays()
    del arrays["node_splits"]
    # The original TpuGraphs files have 140 node and 18 configuration features.
    arrays["node_feat"] = np.zeros((5, 140), dtype=np.float32)
    arrays["node_config_feat"] = np.zeros((4, 2, 18), dtype=np.float32)
    layout = load_tpugraphs(_write(tmp_path, arrays, "wide.npz"))
    assert layout.name == "wide"
    assert layout.node_feat.shape == (5, 140) and layout.config_feat.shape == (4, 2, 18)


# ---- malformed files ---------------------------------------------------------------------------


def _drop(key: str):
    def edit(a: dict[str, np.ndarray]) -> None:
        del a[key]

    return edit


def _set(key: str, value):
    def edit(a: dict[str, np.ndarray]) -> None:
        a[key] = np.asarray(value)

    return edit


def _poke(key: str, index: tuple[int, ...], value: float):
    def edit(a: dict[str, np.ndarray]) -> None:
        a[key] = a[key].astype(np.float64)
        a[key][index] = value

    return edit


BAD = {
    "missing key": (
        _drop("edge_index"),
        r"missing key\(s\) edge_index \(the file has: .*\); a TpuGraphs layout file needs "
        + re.escape(", ".join(REQUIRED_KEYS)),
    ),
    "opcode count": (
        _set("node_opcode", [1, 2, 3, 4]),
        r"node_opcode has 4 entries but node_feat has 5 rows; give one opcode per node",
    ),
    "opcode float": (_set("node_opcode", np.ones(5)), r"node_opcode has dtype float64"),
    "node_feat 1-d": (
        _set("node_feat", np.ones(5)),
        r"node_feat has shape \(5,\), expected \(N, F\)",
    ),
    "edge_index (2, E)": (
        _set("edge_index", [[1, 2, 3, 4, 4], [0, 1, 1, 2, 3]]),
        r"edge_index has shape \(2, 5\), expected \(E, 2\).*transpose",
    ),
    "edge past N": (
        _set("edge_index", [[1, 0], [5, 1]]),
        r"edge_index row 1 is \[5, 1\], outside the 5 nodes \[0, 5\)",
    ),
    "negative edge": (_set("edge_index", [[-1, 0]]), r"edge_index row 0 is \[-1, 0\], outside"),
    "config id past N": (
        _set("node_config_ids", [1, 7]),
        r"node_config_ids holds 7, outside the 5 nodes \[0, 5\)",
    ),
    "config id count": (
        _set("node_config_ids", [1]),
        r"node_config_ids has 1 entries but node_config_feat has 2 configurable nodes",
    ),
    "config id twice": (_set("node_config_ids", [3, 3]), r"node_config_ids lists a node twice"),
    "runtime count": (
        _set("config_runtime", [1, 2, 3]),
        r"config_runtime has 3 entries but node_config_feat has 4 configurations",
    ),
    "NaN node feature": (
        _poke("node_feat", (2, 1), np.nan),
        r"node_feat holds a non-finite value \(nan at index \(2, 1\)\); replace NaN/inf",
    ),
    "inf config feature": (
        _poke("node_config_feat", (3, 0, 1), np.inf),
        r"node_config_feat holds a non-finite value \(inf at index \(3, 0, 1\)\)",
    ),
    "zero runtime": (
        _set("config_runtime", [40, 0, 30, 20]),
        r"config_runtime\[1\] is 0; runtimes must be finite and positive \(1 of 4 are not\)",
    ),
    "negative runtime": (
        _set("config_runtime", [40.0, 10.0, -3.0, -1.0]),
        r"config_runtime\[2\] is -3.0; .*\(2 of 4 are not\); drop the configurations",
    ),
    "NaN runtime": (
        _set("config_runtime", [40.0, 10.0, 30.0, np.nan]),
        r"config_runtime\[3\] is nan",
    ),
    "no configurations": (
        _set("node_config_feat", np.zeros((0, 2, 2), dtype=np.float32)),
        r"node_config_feat holds no configurations",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_file_is_refused_with_a_helpful_message(tmp_path: Path, case: str) -> None:
    edit, match = BAD[case]
    arrays = _arrays()
    edit(arrays)
    path = _write(tmp_path, arrays)
    with pytest.raises(ValueError, match=match) as info:
        load_tpugraphs(path)
    assert str(info.value).startswith(f"{path}: ")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.npz not found; pass the path of a layout"):
        load_tpugraphs(tmp_path / "nope.npz")


def test_text_file_is_not_an_archive(tmp_path: Path) -> None:
    path = tmp_path / "notes.npz"
    path.write_text("not a zip archive\n")
    with pytest.raises(
        ValueError, match=r"notes\.npz: not a readable \.npz archive .*numpy\.savez"
    ):
        load_tpugraphs(path)


def test_single_array_file_is_not_an_archive(tmp_path: Path) -> None:
    path = tmp_path / "array.npz"
    with path.open("wb") as f:
        np.save(f, np.zeros(3))
    with pytest.raises(ValueError, match=r"array\.npz: holds a single array, not an \.npz"):
        load_tpugraphs(path)


def test_pickled_array_is_refused(tmp_path: Path) -> None:
    arrays = _arrays()
    arrays["node_feat"] = np.array([object()] * 5, dtype=object)
    with pytest.raises(ValueError, match=r"g\.npz: an array cannot be read \(.*pickle"):
        load_tpugraphs(_write(tmp_path, arrays))


# ---- splits and duplicates ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("num_configs", "fraction", "num_test"),
    [(100, 0.2, 20), (47_712, 0.2, 9_542), (2, 0.2, 1), (3, 0.99, 2)],
)
def test_split_is_sorted_disjoint_and_covering(
    num_configs: int, fraction: float, num_test: int
) -> None:
    train, test = split_configs(num_configs, fraction, seed=3)
    assert train.dtype == np.int64 and test.dtype == np.int64
    assert test.size == num_test and train.size == num_configs - num_test
    assert (np.diff(train) > 0).all() and (np.diff(test) > 0).all()
    np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(num_configs))


def test_split_is_seeded() -> None:
    first, second = split_configs(1000, seed=7), split_configs(1000, seed=7)
    np.testing.assert_array_equal(first[1], second[1])
    assert not np.array_equal(first[1], split_configs(1000, seed=8)[1])
    # Random, not a block: test indices spread over the whole range.
    assert first[1].min() < 100 and first[1].max() > 900


@pytest.mark.parametrize(
    ("num_configs", "fraction", "match"),
    [
        (1, 0.2, r"num_configs must be an integer >= 2 .*got 1"),
        (10.5, 0.2, r"num_configs must be an integer >= 2 .*got 10\.5"),
        (10, 0.0, r"test_fraction must lie in \(0, 1\), got 0\.0"),
        (10, 1.0, r"test_fraction must lie in \(0, 1\), got 1\.0"),
    ],
)
def test_split_rejects_bad_arguments(num_configs, fraction: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        split_configs(num_configs, fraction)


def test_duplicate_configs_counts_repeats_of_earlier_rows(tmp_path: Path) -> None:
    arrays = _arrays()
    feat = arrays["node_config_feat"]
    feat[2] = feat[0]
    feat[3] = feat[0]
    feat[1] = feat[0] + 1
    layout = load_tpugraphs(_write(tmp_path, arrays))
    assert duplicate_configs(layout) == 2


def test_duplicate_configs_compares_values_not_bytes(tmp_path: Path) -> None:
    arrays = _arrays()
    feat = np.ones((4, 2, 2), dtype=np.float32)
    feat[0, 0, 0], feat[1, 0, 0], feat[2, 0, 0], feat[3, 0, 0] = 0.0, -0.0, 0.0, 2.0
    arrays["node_config_feat"] = feat
    assert duplicate_configs(load_tpugraphs(_write(tmp_path, arrays))) == 2
