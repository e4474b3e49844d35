"""Anytime curves: every method at every budget, files and plots, and refused budgets."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from rich.console import Console
from tiny_runs import tiny_config

from graphopt.eval.curves import (
    CurvePoint,
    geomeans,
    graph_curves,
    write_curves,
)
from graphopt.eval.evaluate import curve_run
from graphopt.hardware import get_cluster
from graphopt.train.trainer import train
from graphopt.typing import Decision
from graphopt.workloads import resolve_graphs


def quiet() -> Console:
    return Console(file=open("/dev/null", "w"), width=200)  # noqa: SIM115


def test_search_curves_start_at_the_heuristic_and_never_fall_below_it() -> None:
    graph = resolve_graphs("txl-tiny")[0]
    cluster = get_cluster("v100-nvlink-2")
    points = graph_curves(graph, cluster, "placement", calls=(0, 16, 64), seconds=(0.2,))
    methods = {p.method for p in points}
    assert methods == {
        "best heuristic",
        "random-search",
        "annealing",
        "estimate-search",
        "decoder-search",
    }
    by = {(p.method, p.axis, p.budget): p for p in points}
    for method in methods:
        assert by[(method, "calls", 0)].speedup == pytest.approx(1.0)  # the start itself
        if method != "best heuristic":
            assert by[(method, "calls", 0)].calls == 0
        for k in (16, 64):
            p = by[(method, "calls", k)]
            assert p.speedup >= 1.0 - 1e-12 and p.valid  # kept from the best heuristic
    assert by[("annealing", "calls", 64)].calls == 64
    assert by[("random-search", "calls", 16)].calls == 16
    assert by[("estimate-search", "calls", 16)].calls == 1  # estimates are no simulator calls
    assert by[("annealing", "seconds", 0.2)].calls >= 1
    assert by[("decoder-search", "calls", 64)].calls == 64
    assert by[("decoder-search", "seconds", 0.2)].calls >= 1


def test_the_decoder_search_curve_is_search_placements_at_each_budget() -> None:
    from graphopt.baselines.staged import best_heuristic
    from graphopt.decoders.search import search_placements
    from graphopt.sim import Simulator

    # txl-tiny: the search improves on the heuristic by 64 calls; gnmt-tiny's placement chain
    # alone (the max-load DP) took seconds
    graph = resolve_graphs("txl-tiny")[0]
    cluster = get_cluster("v100-nvlink-4")
    points = graph_curves(graph, cluster, "placement", calls=(0, 16, 64), seconds=(), seed=2)
    found = {p.budget: p for p in points if p.method == "decoder-search"}
    assert sorted(found) == [0, 16, 64] and found[0].calls == 0
    start, _, _ = best_heuristic(graph, cluster, "placement", Simulator())
    for k in (16, 64):
        same = search_placements(graph, cluster, start, k, seed=2)
        assert found[k].step_time == same.measurement.step_time and found[k].calls == same.calls
    scheduling = graph_curves(graph, cluster, "scheduling", calls=(0, 4), seconds=())
    assert "decoder-search" not in {p.method for p in scheduling}  # a placement search


def test_policy_modes_are_asked_for_with_their_budgets() -> None:
    graph = resolve_graphs("txl-tiny")[0]
    cluster = get_cluster("v100-nvlink-2")
    asked: list[str] = []

    def policy(index: int, mode: str) -> tuple[Decision, int]:
        asked.append(mode)
        return Decision(), 1 if mode == "greedy" else int(mode.split(":")[1])

    points = graph_curves(
        graph,
        cluster,
        "placement",
        calls=(0, 4, 8),
        seconds=(),
        policy=policy,
        finetune_max=4,
        policy_kinds=("sample", "finetune"),
    )
    assert asked == ["greedy", "sample:4", "sample:8", "finetune:4"]
    finetune = [p for p in points if p.method == "finetune"]
    assert [p.budget for p in finetune] == [4]  # 0: no fine-tuning; 8 > finetune_max
    greedy = [p for p in points if p.method == "greedy"]
    assert [p.budget for p in greedy] == [0, 4, 8] and len({p.step_time for p in greedy}) == 1


def test_geomeans_and_files(tmp_path: Path) -> None:
    def point(graph: str, method: str, speedup: float) -> CurvePoint:
        return CurvePoint(graph, method, "calls", 16, 1.0, speedup > 0, speedup, 16, 0.1)

    points = [point("a", "m", 2.0), point("b", "m", 0.5), point("a", "x", 2.0), point("b", "x", 0)]
    means = geomeans(points)
    assert means[("m", "calls", 16)] == pytest.approx(1.0)
    assert means[("x", "calls", 16)] == 0.0  # invalid on one graph
    csv_path, json_path, png = write_curves(points, tmp_path / "out", "t")
    rows = list(csv.DictReader(csv_path.open()))
    assert len(rows) == 4 and rows[0]["method"] == "m"
    data = json.loads(json_path.read_text())
    assert len(data["points"]) == 4 and {m["method"] for m in data["geomeans"]} == {"m", "x"}
    assert png.stat().st_size > 0


def test_curve_run_writes_the_policy_and_the_baselines(tmp_path: Path) -> None:
    run = train(tiny_config(), runs_root=tmp_path / "runs", show_progress=False)
    out = tmp_path / "curves"
    points = curve_run(
        run,
        "txl-tiny",
        calls=(0, 4),
        seconds=(0.05,),
        finetune_max=4,
        out_dir=out,
        console=quiet(),
        save_decisions=tmp_path / "saved",
    )
    methods = {p.method for p in points}
    assert {"greedy", "sample", "finetune", "plan", "annealing", "best heuristic"} <= methods
    assert all(math.isfinite(p.seconds) for p in points)
    assert (out / "curves.csv").exists() and (out / "curves.png").exists()
    # every point's decision is saved, the policy's included, and replays to its step time
    from graphopt.decisions.io import load_decision
    from graphopt.eval.curves import point_method
    from graphopt.sim import simulate
    from graphopt.workloads import get_graph

    index = json.loads((tmp_path / "saved" / "index.json").read_text())["decisions"]
    files = {e["method"]: e["file"] for e in index}
    assert {"greedy", "sample@calls=4", "plan@calls=4"} <= set(files)
    graph, cluster = get_graph("txl-tiny"), tiny_config().validate().resolved_cluster
    for p in points:
        decision = load_decision(tmp_path / "saved" / files[point_method(p)], graph)
        assert simulate(graph, cluster, decision).step_time == p.step_time, point_method(p)


def test_the_curve_files_appear_together_or_not_at_all(tmp_path: Path) -> None:
    points = [CurvePoint("a", "m", "calls", 16, 1.0, True, 1.5, 16, 0.1)]
    out = tmp_path / "out"
    out.mkdir()
    (out / "curves.csv").write_text("old")
    (out / "curves.png").mkdir()  # the plot cannot be put in place: no file of the set changes
    with pytest.raises(ValueError, match="curves.png"):
        write_curves(points, out, "t")
    assert sorted(p.name for p in out.iterdir()) == ["curves.csv", "curves.png"]
    assert (out / "curves.csv").read_text() == "old"
