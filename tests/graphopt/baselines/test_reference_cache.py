"""The reference-placement cache: equal to best_heuristic, damaged files, unwritable folders."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from graphopt import disk_cache
from graphopt.baselines import reference_cache
from graphopt.baselines.reference_cache import cached_best_placement, reference_key
from graphopt.baselines.staged import best_heuristic
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.workloads.registry import get_graph

GRAPH = "gen:sp?ops=60&seed=1"


Reference = tuple[np.ndarray, float, str]


@pytest.fixture(scope="module")
def expected() -> Reference:
    decision, measurement, name = best_heuristic(
        get_graph(GRAPH), get_cluster("v100-nvlink-2"), "placement", Simulator()
    )
    assert decision.placement is not None
    return decision.placement, measurement.step_time, name


def _check(got: Reference, expected: Reference) -> None:
    placement, step_time, name = got
    assert placement.dtype == np.int64
    assert np.array_equal(placement, expected[0])
    assert (step_time, name) == (expected[1], expected[2])


def test_round_trip_equals_best_heuristic(
    tmp_path: Path, expected: Reference, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, cluster = get_graph(GRAPH), get_cluster("v100-nvlink-2")
    _check(cached_best_placement(graph, cluster, cache_dir=tmp_path), expected)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    monkeypatch.setattr(reference_cache, "_compute", lambda *a: pytest.fail("not from cache"))
    _check(cached_best_placement(graph, cluster, cache_dir=tmp_path), expected)


def test_the_key_separates_graphs_clusters_and_colocation() -> None:
    graph, two, four = get_graph(GRAPH), get_cluster("v100-nvlink-2"), get_cluster("v100-nvlink-4")
    keys = {
        reference_key(graph, two),
        reference_key(graph, four),
        reference_key(get_graph("gen:sp?ops=60&seed=2"), two),
    }
    assert len(keys) == 3
    assert reference_key(graph, two) == reference_key(
        get_graph(GRAPH), get_cluster("v100-nvlink-2")
    )


def test_cache_folder_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path))
    assert reference_cache.cache_dir_default() == tmp_path / "references"


@pytest.mark.parametrize("how", ["garbage", "truncated", "other devices", "other key"])
def test_a_damaged_file_is_recomputed(tmp_path: Path, expected: Reference, how: str) -> None:
    graph, cluster = get_graph(GRAPH), get_cluster("v100-nvlink-2")
    cached_best_placement(graph, cluster, cache_dir=tmp_path)
    (path,) = tmp_path.glob("*.npz")
    if how == "garbage":
        path.write_bytes(b"\x00" * 100)
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    else:
        arrays = disk_cache.read_npz(path)
        if how == "other devices":  # a placement on a device the cluster lacks
            arrays["placement"] = arrays["placement"] + 7
        else:
            arrays["key"] = disk_cache.text_array("another key")
        disk_cache.write_npz(path, arrays)
    _check(cached_best_placement(graph, cluster, cache_dir=tmp_path), expected)
    arrays = disk_cache.read_npz(path)  # and rewritten whole
    assert np.array_equal(arrays["placement"], expected[0])


def test_an_unwritable_folder_gives_one_warning_line(
    tmp_path: Path, expected: Reference, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    graph, cluster = get_graph(GRAPH), get_cluster("v100-nvlink-2")
    with caplog.at_level(logging.WARNING, logger="graphopt.cache"):
        for _ in range(2):
            _check(cached_best_placement(graph, cluster, cache_dir=blocker / "refs"), expected)
    (record,) = caplog.records
    assert "\n" not in record.getMessage() and record.exc_info is None
    assert "not writable" in record.getMessage()
