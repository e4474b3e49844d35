"""Simulator datasets: generation, storage, loading, splitting, bad files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphopt.costmodel import data
from graphopt.hardware import get_cluster
from graphopt.sim import PreparedGraph
from graphopt.workloads.registry import resolve_graphs


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cm")
    graphs = resolve_graphs(["rnnlm-tiny", "random-sp-100-s0"])
    data.generate(graphs, get_cluster("v100-nvlink-4"), out, samples=24, seed=3, progress=False)
    return out


def test_generate_is_seeded_and_measured_by_the_simulator(dataset: Path, tmp_path: Path) -> None:
    samples = data.load_dataset(dataset)
    assert [s.name for s in samples] == ["rnnlm-tiny", "random-sp-100-s0"]
    s = samples[0]
    assert s.num_configs > 0 and s.graph is not None and s.cluster is not None
    # The stored runtimes are the simulator's step times of the stored decisions.
    c = s.configs
    assert isinstance(c, data.DecisionConfigs)
    again = PreparedGraph(s.graph, s.cluster).evaluate_batch(c.placement, c.priority, c.fusion)
    np.testing.assert_array_equal(again.step_time, s.runtime)
    # Same seed, same files.
    data.generate([s.graph], s.cluster, tmp_path, samples=24, seed=3, progress=False)
    twin = data.load_dataset(tmp_path)[0]
    np.testing.assert_array_equal(twin.configs.placement, c.placement)  # type: ignore[attr-defined]


def test_decisions_span_heuristic_and_random(dataset: Path) -> None:
    s = data.load_dataset(dataset)[1]
    place = s.configs.placement  # type: ignore[attr-defined]
    assert len({tuple(row) for row in place}) > s.num_configs // 2  # mostly distinct
    assert s.runtime.max() / s.runtime.min() > 1.2  # good and bad ones


def test_joint_task_sets_priorities_and_fusion() -> None:
    graph = resolve_graphs(["random-sp-100-s0"])[0]
    rng = np.random.default_rng(0)
    _, prio, fuse = data.sample_decisions(graph, get_cluster("v100-nvlink-2"), 8, rng, "joint")
    assert prio.any() and fuse.any()
    with pytest.raises(ValueError, match="unknown task"):
        data.sample_decisions(graph, get_cluster("v100-nvlink-2"), 8, rng, "tiling")


def test_split_keeps_every_configuration_once(dataset: Path) -> None:
    samples = data.load_dataset(dataset)
    train, test = data.split_samples(samples, 0.25, seed=0)
    for s, a, b in zip(samples, train, test, strict=True):
        assert a.num_configs + b.num_configs == s.num_configs
        both = np.sort(np.concatenate([a.runtime, b.runtime]))
        np.testing.assert_array_equal(both, np.sort(s.runtime))
    with pytest.raises(ValueError, match="test_fraction"):
        data.split_samples(samples, 1.5)


def test_bad_files_name_the_problem(dataset: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such file"):
        data.load_dataset(tmp_path / "missing.npz")
    with pytest.raises(ValueError, match="no .npz files"):
        data.load_dataset(tmp_path)
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(ValueError, match="not a readable"):
        data.load_dataset(tmp_path / "junk.npz")
    src = next(dataset.glob("*.npz"))
    with np.load(src) as f:
        arrays = {k: f[k] for k in f.files}
    np.savez(tmp_path / "nokey.npz", **{k: v for k, v in arrays.items() if k != "status"})
    with pytest.raises(ValueError, match=r"missing key\(s\) \['status'\]"):
        data.load_dataset(tmp_path / "nokey.npz")
    arrays["placement"] = arrays["placement"][:, :-1]
    np.savez(tmp_path / "shape.npz", **arrays)
    with pytest.raises(ValueError, match="placement has shape"):
        data.load_dataset(tmp_path / "shape.npz")


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_a_dataset_stopped_half_way_leaves_nothing(tmp_path: Path, monkeypatch, error) -> None:
    """Ctrl-C or SIGTERM (a KeyboardInterrupt inside graphopt's commands) or an error after the
    first graph: no file of the dataset, not even its directory."""
    graphs = resolve_graphs(["rnnlm-tiny", "random-sp-100-s0"])
    measure = data.measure_graph

    def second_fails(graph, *args):
        if graph.name == "random-sp-100-s0":
            raise error
        return measure(graph, *args)

    monkeypatch.setattr(data, "measure_graph", second_fails)
    with pytest.raises(error):
        data.generate(graphs, get_cluster("v100-nvlink-2"), tmp_path / "d", samples=6)
    assert list(tmp_path.iterdir()) == []
