"""Smoke tests of ``graphopt baselines`` in a subprocess; the tests of several calls or of
refusals run the same entry point in this process (a subprocess per call would only import numba
and torch again)."""

from __future__ import annotations

import csv
import json
import os
import re
import signal

import pytest

from graphopt.hardware import get_cluster
from graphopt.sim import lower_bounds
from graphopt.workloads import get_graph


def test_json_writes_exactly_the_named_files_and_says_so(run_cli, tmp_path):
    keep = tmp_path / "results.json"
    keep.write_text("not mine")  # a file of the same directory the command must leave alone
    mine = tmp_path / "mine.json"
    out = run_cli(
        "baselines",
        "random-layered-20-s0",
        "--task",
        "fusion",
        "--budget",
        "20",
        "--json",
        str(mine),
    ).stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.csv", "mine.json", "results.json"]
    assert keep.read_text() == "not mine"
    assert f"wrote {mine} and {tmp_path / 'mine.csv'}" in out.replace("\n", "")
    data = json.loads(mine.read_text())
    rows = list(csv.DictReader((tmp_path / "mine.csv").open()))
    assert [g["graph"] for g in data["graphs"]] == ["random-layered-20-s0"]
    assert {r["method"] for r in rows} == {r["method"] for r in data["graphs"][0]["results"]}


def test_json_and_plot_in_two_directories_are_written_as_one_set(run_cli_here, tmp_path):
    mine, plot = tmp_path / "tables" / "mine.json", tmp_path / "plots" / "bars.svg"
    out = run_cli_here(
        "baselines", "txl-tiny", "--budget", "8", "--json", str(mine), "--plot", str(plot)
    ).stdout
    assert f"wrote {mine}, {mine.with_suffix('.csv')} and {plot}" in out.replace("\n", "")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [
        "plots",
        "plots/bars.svg",
        "tables",
        "tables/mine.csv",
        "tables/mine.json",
    ]
    assert b"<svg" in plot.read_bytes() and json.loads(mine.read_text())["graphs"]


@pytest.mark.parametrize("stop", ["sigterm", "error"])
def test_decisions_json_and_plot_are_one_set_and_a_stop_before_the_moves_leaves_nothing_new(
    run_cli_here, tmp_path, monkeypatch, stop
):
    """``--save-decisions`` with ``--json`` and ``--plot`` (#40: written one after the other):
    the decisions, their index, the table and the plot appear together; a SIGTERM or an error
    once the decisions are staged, before anything is moved into place, leaves every
    directory as it was and no staging directory."""
    from graphopt.eval import report

    saved, mine, plot = tmp_path / "saved", tmp_path / "tables" / "mine.json", tmp_path / "p.svg"
    args = ["baselines", "txl-tiny", "--budget", "8", "--save-decisions", str(saved)]
    args += ["--json", str(mine), "--plot", str(plot)]
    out = run_cli_here(*args).stdout
    assert f"decisions and {saved / 'index.json'}" in out and f"and {plot}" in out
    files = {e["file"] for e in json.loads((saved / "index.json").read_text())["decisions"]}
    assert sorted(p.name for p in saved.iterdir()) == sorted([*files, "index.json"])
    rows = json.loads(mine.read_text())["graphs"][0]["results"]
    assert {r["decision_file"] for r in rows if r["decision_file"]} == files
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    again = tmp_path / "again"
    plotted = report.comparison_plot

    def stopped(*a, **k):  # the decisions are staged, nothing is moved yet
        plotted(*a, **k)
        if stop == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        raise ValueError("cannot draw the plot")

    monkeypatch.setattr(report, "comparison_plot", stopped)
    args = ["baselines", "txl-tiny", "--budget", "8", "--save-decisions", str(again / "saved")]
    args += ["--json", str(mine), "--plot", str(again / "p.svg")]
    proc = run_cli_here(*args, check=False)
    assert proc.returncode == (130 if stop == "sigterm" else 2), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert not again.exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "p.svg",
        "saved",
        "tables",
    ]


def test_json_that_would_be_its_own_csv_is_refused(run_cli, tmp_path):
    proc = run_cli(
        "baselines", "random-layered-20-s0", "--json", str(tmp_path / "t.csv"), check=False
    )
    assert proc.returncode != 0 and "suffix .csv" in proc.stdout + proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_fusion_table_has_no_negative_gap(run_cli):
    """The review's case: with fusion, 1.483 ms against a no-fusion bound of 1.508 ms was -1.7%."""
    out = run_cli("baselines", "random-layered-20-s0", "--task", "fusion", "--budget", "100").stdout
    graph, cluster = get_graph("random-layered-20-s0"), get_cluster("v100-nvlink-4")
    unfused = lower_bounds(graph, cluster).best * 1e3
    shown = float(re.search(r"lower bound ([\d.,]+) ms", out).group(1))  # type: ignore[union-attr]
    assert shown < unfused
    gaps = re.findall(r"([+-]\d+\.\d)%", out)
    assert gaps and all(not g.startswith("-") for g in gaps)


def test_output_paths_that_cannot_be_written_fail_before_the_comparison(run_cli_here, tmp_path):
    run_cli = run_cli_here  # refusals: in this process
    blocker = tmp_path / "F"
    blocker.write_text("a regular file")
    for args, fragment in (
        (
            ("--json", str(blocker / "out.json")),
            f"cannot create --json {str(blocker / 'out.json')!r}",
        ),
        (("--plot", str(blocker / "b.png")), f"cannot create --plot {str(blocker / 'b.png')!r}"),
        (("--json", str(tmp_path)), "is a directory; give the name of a file"),
        (("--plot", str(tmp_path / "b.xyz")), "the suffix says the image type; use one of .png"),
        (("--json", str(tmp_path / "r.png"), "--plot", str(tmp_path / "r.png")), "overwrite"),
    ):
        proc = run_cli("baselines", "random-layered-20-s0", *args, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and fragment in proc.stderr
        if "cannot create" in fragment:
            assert f"{str(blocker)!r} is a file, not a directory" in proc.stderr
        assert proc.stdout == ""  # no table: refused before the comparison
    assert sorted(p.name for p in tmp_path.iterdir()) == ["F"]


def test_a_graph_of_zero_cost_ops_prints_a_table(run_cli, tmp_path):
    """Zero FLOPs, zero bytes and no launch overhead: every step is 0 s, and no ratio exists."""
    from graphopt.graph import CompGraph, Op

    graph = tmp_path / "zero.json"
    CompGraph.build("zero", [Op("a", "Relu"), Op("b", "Relu")], [("a", "b", 0.0)]).save(graph)
    cluster = tmp_path / "c.yaml"
    cluster.write_text(
        "name: zero\ndevices:\n  - {name: d0, kind: z, peak_flops: 1e12, mem_bandwidth: 1e11, "
        "memory: 1e9, launch_overhead: 0}\n"
    )
    proc = run_cli("baselines", str(graph), "--cluster", str(cluster), "--budget", "4", check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr and "single" in proc.stdout


def test_cluster_each_runs_every_graph_on_its_own_cluster_in_one_table(run_cli_here, tmp_path):
    """Two graph files on two clusters (the file beside one, the metadata of the other) in one
    call give the rows that one call per graph on its cluster gives; --curve and
    --save-decisions take each graph's cluster too."""
    run_cli = run_cli_here  # four calls: in this process
    from own_clusters import graph_file, slow_cluster

    a = graph_file(tmp_path / "a.json")
    slow_cluster().save(tmp_path / "a.cluster.yaml")
    b = graph_file(tmp_path / "b.json", name="random-layered-20-s0", cluster="v100-nvlink-4")
    both = tmp_path / "both.json"
    out = run_cli(
        "baselines",
        f"{a},{b}",
        "--cluster",
        "each",
        "--json",
        str(both),
        "--save-decisions",
        str(tmp_path / "saved"),
    ).stdout
    assert "placement on each graph's cluster (slow-2, v100-nvlink-4)" in " ".join(out.split())
    graphs = json.loads(both.read_text())["graphs"]
    assert [(g["graph"], g["cluster"]) for g in graphs] == [
        ("txl-tiny", "slow-2"),
        ("random-layered-20-s0", "v100-nvlink-4"),
    ]
    for graph, cluster in ((a, tmp_path / "a.cluster.yaml"), (b, "v100-nvlink-4")):
        one = tmp_path / "one.json"
        run_cli("baselines", str(graph), "--cluster", str(cluster), "--json", str(one))
        alone = json.loads(one.read_text())["graphs"][0]
        together = next(g for g in graphs if g["graph"] == alone["graph"])
        assert [(r["method"], r["step_time"]) for r in together["results"]] == [
            (r["method"], r["step_time"]) for r in alone["results"]
        ]
    index = json.loads((tmp_path / "saved" / "index.json").read_text())
    assert {d["cluster"] for d in index["decisions"]} == {"slow-2", "v100-nvlink-4"}
    proc = run_cli("baselines", "txl-tiny", "--cluster", "each", check=False)
    assert proc.returncode == 2 and "has no cluster of its own" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_graph_beyond_the_dps_bound_is_one_refused_row(run_cli_here, tmp_path):
    """17 independent ops have 2**17 ideals, over the max-load DP's bound: its row is refused in
    one line naming the bound, and the other methods still run (exit 0)."""
    from graphopt.graph import CompGraph, Op

    graph = tmp_path / "wide.json"
    ops = [Op(f"o{i}", "MatMul", flops=1e9 * (1 + i)) for i in range(17)]
    CompGraph.build("wide", ops, []).save(graph)
    out = tmp_path / "wide-table.json"
    args = ("baselines", str(graph), "--cluster", "v100-nvlink-4", "--json", str(out))
    args += ("--exact-time-limit", "0.5")  # CP-SAT on 17 ops would take its default 10 s
    assert run_cli_here(*args).returncode == 0
    rows = {r["method"]: r for r in csv.DictReader(out.with_suffix(".csv").open())}
    dp = rows["tarnawski-dp"]
    assert dp["valid"] == "False" and "\n" not in dp["reason"], dp
    assert "more than 60,000 ideals" in dp["reason"], dp["reason"]
    assert rows["tarnawski-greedy"]["valid"] == "True"
