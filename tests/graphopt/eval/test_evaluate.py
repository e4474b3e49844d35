"""``graphopt eval`` loads a run's weights into a model rebuilt from its config; model files that
could run code (an SB3 zip, a pickled object) are refused without opening or running them."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import torch
from crafted_files import assert_payload_runs, crafted_run
from rich.console import Console
from stable_baselines3 import PPO
from tiny_runs import tiny_config

from graphopt import rundir
from graphopt.eval.evaluate import evaluate_run, load_run_model, model_sizes
from graphopt.hardware import PRESETS
from graphopt.train.trainer import train

torch.set_num_threads(1)


def quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = tiny_config()
    return train(config, runs_root=tmp_path_factory.mktemp("runs"), show_progress=False)


def test_eval_loads_the_best_weights(trained: Path, tmp_path: Path, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("PPO.load must not be called")

    monkeypatch.setattr(PPO, "load", never)
    model = load_run_model(trained)
    best = torch.load(trained / rundir.BEST, weights_only=True)
    for key, value in model.policy.state_dict().items():
        assert torch.equal(value, best["policy"][key]), key
    assert model_sizes(model, "placement") == (227, 908)  # txl-tiny's padding
    comparisons = evaluate_run(
        trained, "txl-tiny", mode="finetune:16", out_dir=tmp_path / "out", console=quiet()
    )
    assert len(comparisons) == 1
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    row = [r for r in results["graphs"][0]["results"] if r["kind"] == "policy"][0]
    assert row["valid"] and row["evaluations"] >= 16 + 1
    with pytest.raises(ValueError, match="supports at most 227 ops"):
        evaluate_run(trained, "gnmt-tiny", console=quiet())
    final = load_run_model(trained, trained / rundir.FINAL)
    assert final.num_timesteps == 32


def files_under(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` (hidden ones included) and its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def evaluated(trained: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``trained`` evaluated on txl-tiny once, its output in ``out`` and its decisions in
    ``saved`` below the returned directory (the tests below copy them: they change them)."""
    root = tmp_path_factory.mktemp("evaluated")
    evaluate_run(
        trained, "txl-tiny", out_dir=root / "out", save_decisions=root / "saved", console=quiet()
    )
    return root


@pytest.mark.parametrize("stop", ["sigterm", "error"])
def test_eval_writes_results_plots_and_decisions_as_one_set(
    trained: Path, evaluated: Path, tmp_path: Path, monkeypatch, stop: str
):
    """#40: results.json/.csv, comparison.png, training_curve.png and the saved decisions were
    written one after the other; now they are one set, and a SIGTERM or an error before the
    moves leaves the output and the decisions directory as they were, with no staging file."""
    import os
    import signal

    import graphopt.eval.evaluate as evaluate
    from graphopt.signals import interrupts

    out, saved = tmp_path / "out", tmp_path / "saved"
    shutil.copytree(evaluated / "out", out)
    shutil.copytree(evaluated / "saved", saved)
    assert sorted(p.name for p in out.iterdir()) == [
        "comparison.png",
        "results.csv",
        "results.json",
        "training_curve.png",
    ]
    rows = json.loads((out / "results.json").read_text())["graphs"][0]["results"]
    files = {e["file"] for e in json.loads((saved / "index.json").read_text())["decisions"]}
    assert {r["decision_file"] for r in rows} == files
    assert sorted(p.name for p in saved.iterdir()) == sorted([*files, "index.json"])
    (out / "results.json").write_text("an earlier run's")
    before = files_under(tmp_path)
    drawn = evaluate.training_curve_plot

    def stopped(*args, **kwargs):  # the decisions are staged, nothing is moved yet
        drawn(*args, **kwargs)
        if stop == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        raise ValueError("cannot draw the training curve")

    monkeypatch.setattr(evaluate, "training_curve_plot", stopped)
    with (
        pytest.raises(KeyboardInterrupt if stop == "sigterm" else ValueError),
        interrupts(),
    ):
        evaluate_run(
            trained,
            "txl-tiny",
            out_dir=out,
            save_decisions=tmp_path / "new" / "saved",
            console=quiet(),
        )
    assert files_under(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "saved"]


@pytest.mark.parametrize("kind", ["zip", "pt"])
def test_eval_refuses_crafted_models_and_runs_nothing(tmp_path: Path, kind: str):
    assert_payload_runs(tmp_path / "live")  # the payloads do run when unpickled unsafely
    marker = tmp_path / "marker"
    run = crafted_run(tmp_path / "runs", marker, kind, "finished", 32, (rundir.BEST, rundir.FINAL))
    expected = (
        rf"run {run} holds only an SB3 \.zip model \(best_model\.zip, final_model\.zip, "
        r"checkpoints/last\.zip\), which can execute code when loaded; .* retrain the run"
        if kind == "zip"
        else r"best_model\.pt is not a plain weights file \(it holds a pickled object"
    )
    for load in (
        lambda: load_run_model(run),
        lambda: load_run_model(run, run / "final_model.zip"),
        lambda: evaluate_run(run, "txl-tiny", console=quiet()),
    ):
        with pytest.raises(ValueError) as e:
            load()
        assert "\n" not in str(e.value)
        assert not marker.exists()
    with pytest.raises(ValueError, match=expected):
        evaluate_run(run, "txl-tiny", mode="finetune:16", console=quiet())
    assert not marker.exists() and not (run / "eval").exists()


def test_an_output_directory_that_cannot_be_made_is_refused_before_any_work(
    tmp_path: Path, monkeypatch
):
    import graphopt.eval.evaluate as evaluate

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(evaluate, "load_run_model", never)
    run = rundir.new_run_dir(tmp_path / "runs", "placement", "fab")
    tiny_config().save(run / rundir.CONFIG_FILE)
    (run / rundir.BEST).write_bytes(b"never loaded")
    blocker = tmp_path / "F"
    blocker.write_text("a regular file")
    with pytest.raises(ValueError, match=rf"'{blocker}' is a file, not a directory"):
        evaluate_run(run, "txl-tiny", out_dir=blocker / "out", console=quiet())
    (run / "eval").write_text("a file where RUN/eval/<mode> goes")
    with pytest.raises(ValueError, match=r"eval' is a file, not a directory"):
        evaluate_run(run, "txl-tiny", console=quiet())


def test_an_edit_policy_runs_on_any_device_count(tmp_path: Path):
    # The edit policy sees one row per candidate move, whatever the device count: a run trained
    # on 2 devices is evaluated on 8 (a GO placement run is refused: tests/graphopt/cli/test_train.py).
    run = train(
        tiny_config(task="placement-edit", candidates=4, horizon=4, policy_kwargs={"hidden": 8}),
        runs_root=tmp_path / "runs",
        show_progress=False,
    )
    comparisons = evaluate_run(
        run, "txl-tiny", cluster="v100-nvlink-8", out_dir=tmp_path / "out", console=quiet()
    )
    rows = {r.method: r for r in comparisons[0].results}
    policy = rows["policy (greedy)"]
    assert policy.valid and policy.step_time <= comparisons[0].best_heuristic.step_time


@pytest.mark.parametrize("task", ["scheduling-edit", "fusion-edit", "joint-edit"])
def test_a_simulated_edit_run_trains_and_is_compared_at_its_calls(tmp_path: Path, task: str):
    # A run of each simulated edit task trains (MovePolicy), is evaluated at K simulator calls
    # beside the task's baselines at the same budget, on another device count, never worse than
    # its start (the best heuristic), and refuses a mode that is not greedy or search:K.
    run = train(
        tiny_config(task=task, candidates=4, horizon=4, policy_kwargs={"hidden": 8}),
        runs_root=tmp_path / "runs",
        show_progress=False,
    )
    comparisons = evaluate_run(
        run,
        "txl-tiny",
        mode="search:12",
        budget=12,
        cluster="v100-nvlink-4",
        out_dir=tmp_path / "out",
        console=quiet(),
    )
    rows = {r.method: r for r in comparisons[0].results}
    policy = rows["policy (search:12)"]
    assert policy.valid and policy.step_time <= comparisons[0].best_heuristic.step_time
    assert policy.evaluations <= 12
    assert {"annealing", "random-search"} <= {m.split("@")[0] for m in rows}
    with pytest.raises(ValueError, match="use greedy or search:K"):
        evaluate_run(run, "txl-tiny", mode="sample:4", console=quiet())


def test_a_device_agnostic_go_policy_runs_on_any_device_count(trained: Path, tmp_path: Path):
    # policy_kwargs device_agnostic: a one-shot GO placement run trained on 2 devices is
    # evaluated on 8 and on the heterogeneous 3-device preset, greedy = its hint there (the best
    # heuristic of that cluster); without it (`trained`: the same config, plain) the same
    # evaluation is refused, naming the option.
    base = tiny_config()
    kwargs = {**base.policy_kwargs, "device_agnostic": True}
    run = train(tiny_config(policy_kwargs=kwargs), runs_root=tmp_path / "a", show_progress=False)
    for cluster in ("v100-nvlink-8", "hetero-cpu-2gpu"):
        comparisons = evaluate_run(
            run, "txl-tiny", cluster=cluster, out_dir=tmp_path / cluster, console=quiet()
        )
        rows = {r.method: r for r in comparisons[0].results}
        policy = rows["policy (greedy)"]
        assert policy.valid
        assert policy.step_time == pytest.approx(comparisons[0].best_heuristic.step_time)
    with pytest.raises(ValueError, match="device_agnostic: true"):
        evaluate_run(trained, "txl-tiny", cluster="v100-nvlink-8", console=quiet())


def test_the_device_count_switch_is_the_policy_registrys(trained: Path, monkeypatch):
    # evaluation asks the registry which policy_kwargs key (if any) frees a run of its device
    # count, and names that fix; a policy without one is told to train on the other count
    import dataclasses

    from graphopt.train.policy_registry import REGISTRY

    with pytest.raises(ValueError, match=r"or train with policy_kwargs: \{device_agnostic: true\}"):
        evaluate_run(trained, "txl-tiny", cluster="v100-nvlink-8", console=quiet())
    no_switch = dataclasses.replace(REGISTRY["go"], any_device_count=None)
    monkeypatch.setitem(REGISTRY, "go", no_switch)
    with pytest.raises(ValueError, match="train a run on 8 devices .the weights of policy go fit"):
        evaluate_run(trained, "txl-tiny", cluster="v100-nvlink-8", console=quiet())


def test_cluster_each_evaluates_every_graph_on_its_own_cluster(trained: Path, tmp_path: Path):
    """Two graph files on two 2-device clusters in one call: one table, each graph's rows those
    of a call on its cluster alone (the policy's greedy row included)."""
    from own_clusters import graph_file, slow_cluster

    a = graph_file(tmp_path / "a.json")
    slow_cluster().save(tmp_path / "a.cluster.yaml")
    b = graph_file(tmp_path / "b.json", cluster="v100-nvlink-2")
    both = evaluate_run(
        trained, f"{a},{b}", cluster="each", out_dir=tmp_path / "both", console=quiet()
    )
    assert [(c.graph, c.cluster) for c in both] == [
        ("txl-tiny", "slow-2"),
        ("txl-tiny", "v100-nvlink-2"),
    ]
    for graph, cluster, together in ((a, slow_cluster(), both[0]), (b, "v100-nvlink-2", both[1])):
        (alone,) = evaluate_run(
            trained, str(graph), cluster=cluster, out_dir=tmp_path / "one", console=quiet()
        )
        assert [(r.method, r.step_time) for r in together.results] == [
            (r.method, r.step_time) for r in alone.results
        ]
    times = [[r.step_time for r in c.results] for c in both]
    assert times[0] != times[1]  # slower links: the clusters differ
    rows = json.loads((tmp_path / "both" / "results.json").read_text())["graphs"]
    assert [g["cluster"] for g in rows] == ["slow-2", "v100-nvlink-2"]
    with pytest.raises(ValueError, match="has no cluster of its own"):
        evaluate_run(trained, "txl-tiny", cluster="each", console=quiet())


def test_eval_reads_the_run_config_and_resolves_its_cluster_once(
    trained: Path, tmp_path: Path, monkeypatch
):
    import graphopt.eval.evaluate
    import graphopt.train.trainer
    from graphopt.train.config import load_config

    loads: list[Path] = []

    def counting(path=None, **kwargs):
        loads.append(path)
        return load_config(path, **kwargs)

    monkeypatch.setattr(graphopt.eval.evaluate, "load_config", counting)
    monkeypatch.setattr(graphopt.train.trainer, "load_config", counting)
    built = []  # the run's cluster preset, each time it is resolved (the model's checks too)
    preset = PRESETS["v100-nvlink-2"]
    monkeypatch.setitem(PRESETS, "v100-nvlink-2", lambda: built.append(1) or preset())
    evaluate_run(trained, "txl-tiny", out_dir=tmp_path / "out", console=quiet())
    assert loads == [trained / rundir.CONFIG_FILE] and built == [1]
