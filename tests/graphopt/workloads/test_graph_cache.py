"""The graph cache: round trips against the JSON twin, damaged files, unwritable folders."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graphopt import disk_cache
from graphopt.graph import CompGraph, Op
from graphopt.workloads import graph_cache
from graphopt.workloads.graph_cache import cache_path, decode_graph, encode_graph, load_graphs
from graphopt.workloads.registry import get_graph

NAMES = ["gen:rnnlm?layers=1&steps=2", "gen:sp?ops=40&seed=2", "gen:txl"]


def _same(a: CompGraph, b: CompGraph) -> None:
    """Equal in every field a graph file holds (the JSON twin compares them all)."""
    assert json.dumps(a.to_json_dict()) == json.dumps(b.to_json_dict())
    assert a.fingerprint == b.fingerprint and a.tensor_fingerprint == b.tensor_fingerprint
    for column in ("output_shapes", "output_dtypes", "input_shapes", "allowed", "layer"):
        assert getattr(a, column) == getattr(b, column), column
    for column in ("flops", "edge_src", "edge_bytes"):
        assert not getattr(b, column).flags.writeable


def test_round_trip_matches_the_built_graph_and_the_json_twin(tmp_path: Path) -> None:
    built = [get_graph(n) for n in NAMES]
    first = load_graphs(NAMES, cache_dir=tmp_path)
    files = sorted(tmp_path.glob("*.npz"))
    assert len(files) == 3 and all(p.stem.split("-")[0] in ("rnnlm", "sp", "txl") for p in files)
    second = load_graphs(",".join(NAMES), cache_dir=tmp_path)
    for b, f, s in zip(built, first, second, strict=True):
        _same(b, f)
        _same(b, s)
        _same(CompGraph.from_json_dict(s.to_json_dict()), s)  # the slow, validating twin
    assert second[0].name == "gen:rnnlm?batch=16&hidden=256&layers=1&steps=2&vocab=1000"


def test_a_graph_with_every_optional_column_round_trips() -> None:
    ops = [
        Op(
            "a", "Placeholder", output_bytes=32, output_shapes=((2, 4),), output_dtypes=("float32",)
        ),
        Op("b", "MatMul", 64, 96, 32, 16, measured={"V100": 1e-6}, allowed=("GPU",), layer="l1"),
        Op("c", "Relu", 8, 64, 32, colocation="g", input_shapes=((2, 4),)),
    ]
    graph = CompGraph.build("odd \0 name ✓", ops, [("a", "b", 32), ("b", "c", 32)], {"k": [1]})
    _same(graph, decode_graph(encode_graph(graph, "key"), "key"))


def test_names_resolve_like_the_registry_and_suites_expand(tmp_path: Path) -> None:
    graphs = load_graphs("rnnlm-tiny,suite:tiny", cache_dir=tmp_path)
    assert [g.name for g in graphs][:3] == ["rnnlm-tiny", "rnnlm-tiny", "gnmt-tiny"]
    assert not list(tmp_path.glob("*.npz"))  # built-in names are not cached
    with pytest.raises(ValueError, match="unknown suite 'nope'; known suites: suite:tiny"):
        load_graphs("suite:nope", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="empty graph spec"):
        load_graphs(" , ", cache_dir=tmp_path)


def test_keys_separate_spellings_no_more_than_canonical_names() -> None:
    assert cache_path("gen:rnnlm?steps=2&layers=1") == cache_path("gen:rnnlm?layers=1&steps=2")
    assert cache_path("gen:rnnlm?layers=1") != cache_path("gen:rnnlm?layers=2")
    assert cache_path("torch:resnet?depth=18&width=8") == cache_path(
        "torch:resnet?width=8&depth=18"
    )
    assert cache_path("torch:resnet?depth=50") == cache_path("torch:resnet")
    assert cache_path("rnnlm-tiny") is None and cache_path("torch:lstm?mode=forward") is None


def test_cache_folder_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path))
    assert graph_cache.cache_dir_default() == tmp_path / "graphs"
    load_graphs(NAMES[:1])
    assert len(list((tmp_path / "graphs").glob("*.npz"))) == 1
    monkeypatch.delenv(disk_cache.CACHE_ENV)
    assert graph_cache.cache_dir_default() == Path.home() / ".cache" / "graphopt" / "graphs"


def _damage_by(how: str, path: Path) -> None:
    data = path.read_bytes()
    if how == "garbage":
        path.write_bytes(b"not a zip archive at all")
    elif how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "flipped":  # one byte inside the compressed members: a CRC or zlib error
        middle = len(data) // 3
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "other key":
        graph = get_graph("gen:sp?ops=40&seed=3")
        disk_cache.write_npz(path, encode_graph(graph, "some other key"))
    elif how == "tampered":  # a consistent file whose costs no longer match the fingerprint
        arrays = disk_cache.read_npz(path)
        arrays["floats"] = arrays["floats"] * 2
        disk_cache.write_npz(path, arrays)
    elif how == "pickled":  # an object array: np.load refuses it without allow_pickle
        np.savez(path.with_suffix(""), header=np.array([{"a": 1}], dtype=object))


@pytest.mark.parametrize(
    "how", ["garbage", "truncated", "flipped", "empty", "other key", "tampered", "pickled"]
)
def test_a_damaged_file_is_rebuilt_without_a_traceback(
    tmp_path: Path, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = NAMES[1]
    (original,) = load_graphs([name], cache_dir=tmp_path)
    path = cache_path(name, tmp_path)
    assert path is not None
    _damage_by(how, path)
    (rebuilt,) = load_graphs([name], cache_dir=tmp_path)
    _same(original, rebuilt)
    _same(original, decode_graph(disk_cache.read_npz(path), graph_cache.cache_key(name) or ""))
    assert "Traceback" not in capsys.readouterr().err


def test_an_unwritable_folder_gives_one_warning_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")  # unwritable even for root
    with caplog.at_level(logging.WARNING, logger="graphopt.cache"):
        graphs = load_graphs(NAMES, cache_dir=blocker / "graphs")
        again = load_graphs(NAMES, cache_dir=blocker / "graphs")
    assert [g.fingerprint for g in graphs] == [get_graph(n).fingerprint for n in NAMES]
    assert [g.fingerprint for g in again] == [g.fingerprint for g in graphs]
    (record,) = caplog.records
    message = record.getMessage()
    assert "\n" not in message and record.exc_info is None
    assert str(blocker / "graphs") in message and "GRAPHOPT_CACHE_DIR" in message


def test_a_failed_write_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full_disk(file: object, **arrays: object) -> None:
        file.write(b"PK half an archive")  # type: ignore[attr-defined]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez_compressed", full_disk)
    (graph,) = load_graphs(NAMES[:1], cache_dir=tmp_path)
    assert graph.fingerprint == get_graph(NAMES[0]).fingerprint
    assert list(tmp_path.iterdir()) == []


def test_command_line_reports_counts_and_time(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "graphopt.workloads.graph_cache",
            "suite:train-gen-small",
            "--cache-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("24 graphs in ") and str(tmp_path) in run.stdout
    assert len(list(tmp_path.glob("*.npz"))) == 24
    bad = subprocess.run(
        [sys.executable, "-m", "graphopt.workloads.graph_cache", "gen:rnnlm?layers=0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "layers='0' must be an integer >= 1" in bad.stderr
