from __future__ import annotations

import pytest

from graphopt.graph import CompGraph
from graphopt.hardware import get_cluster
from graphopt.importers.pipedream import list_profiles
from graphopt.importers.sources import is_source, load_source
from graphopt.sim import simulate
from graphopt.workloads import SUITES, resolve_graphs


def test_pipedream_source_modes():
    train = load_source("pipedream:vgg16")
    forward = load_source("pipedream:vgg16?mode=forward")
    assert train.num_ops == 2 * forward.num_ops == 82
    assert train.name == "pipedream:vgg16 (training)"
    assert resolve_graphs("pipedream:vgg16,txl-tiny")[0].num_ops == 82


WAVENET = "torch:wavenet?layers=2&stacks=1&residual=8&skip=8&classes=8&seq=16&batch=1"
"""A small WaveNet (two dilated causal convolutions, gated): the only one the default run imports
(tests/graphopt/importers/test_zoo.py leaves the full-size model to CI); its export takes a
fraction of the default size's 20 layers."""


def test_torch_source_forward_is_cached_graph(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHOPT_CACHE_DIR", str(tmp_path))
    g = load_source(f"{WAVENET}&mode=forward")
    assert isinstance(g, CompGraph) and g.num_ops > 0
    assert list(tmp_path.rglob("*.json*"))  # written to the cache


def test_bad_sources():
    assert is_source("torch:gpt2") and is_source("pipedream:x") and not is_source("gnmt-2")
    with pytest.raises(ValueError, match="mode must be one of train, forward"):
        load_source("pipedream:vgg16?mode=both")
    with pytest.raises(ValueError, match="unknown PipeDream profile 'vgg17'"):
        load_source("pipedream:vgg17")


def test_a_profile_path_that_does_not_exist_is_a_value_error(tmp_path):
    # a ValueError, which the CLI prints as one line (exit 2), not a FileNotFoundError traceback
    with pytest.raises(ValueError, match=r"no PipeDream profile at '/nope/graph\.txt'.*vgg16"):
        load_source("pipedream:/nope/graph.txt")
    with pytest.raises(ValueError, match="no PipeDream profile at"):
        resolve_graphs(f"pipedream:{tmp_path / 'missing.txt'}?mode=forward")
    folder = tmp_path / "graph.txt"
    folder.mkdir()  # a directory of that name: no file there either
    with pytest.raises(ValueError, match="no PipeDream profile at"):
        load_source(f"pipedream:{folder}")


def test_real_suite_lists_profiles_and_zoo_models():
    real = SUITES["real"]
    assert any(m.startswith("pipedream:") for m in real) and any(
        m.startswith("torch:") for m in real
    )


@pytest.mark.expensive
def test_real_suite_resolves_and_simulates():
    cluster = get_cluster("v100-nvlink-4")
    graphs = resolve_graphs("suite:real")
    assert len(graphs) == len(SUITES["real"])
    for g in graphs:
        m = simulate(g, cluster)
        assert m.step_time > 0 and (m.valid or "out of memory" in m.reason)


def test_a_profile_path_with_a_comma_is_taken_whole(tmp_path):
    import shutil

    from graphopt.importers.sources import source_file

    profile = shutil.copy(list_profiles()["vgg16"], tmp_path / "vgg,16.txt")
    assert source_file(f"pipedream:{profile}?mode=forward") == profile
    assert source_file("pipedream:vgg16") is None and source_file(str(profile)) is None
    graphs = resolve_graphs(f"pipedream:{profile}?mode=forward,txl-tiny")
    assert [g.num_ops for g in graphs[:1]] == [41] and graphs[1].name == "txl-tiny"
