"""``graphopt optimize``: the decision file is written whole and replays, Ctrl-C writes the best
so far, bad input is one line (exit 2) and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphopt.cli import optimize as optimize_cli
from graphopt.tasks import ONE_SHOT_TASKS

GRAPH, CLUSTER = "txl-tiny", "v100-nvlink-2"


def _step_time(proc_stdout: str) -> float:
    """The step time (ms) of ``graphopt simulate --json``'s one row."""
    return float(json.loads(proc_stdout)[0]["step_time"])


def test_the_tasks_are_the_one_shot_tasks():
    assert optimize_cli.TASKS == ONE_SHOT_TASKS


def test_a_subprocess_run_writes_a_decision_that_replays(run_cli, tmp_path: Path):
    out = tmp_path / "deep" / "best.json"  # missing folders are created
    proc = run_cli("optimize", GRAPH, "--cluster", CLUSTER, "--calls", "8", "-o", str(out))
    saved = json.loads(out.read_text())
    assert (
        saved["format"] == "graphopt-decision"
        and saved["method"] == "decoder-search+annealing@calls=8"
    )
    assert saved["graph"] == GRAPH and saved["cluster"] == CLUSTER and saved["task"] == "placement"
    assert "8 simulator calls" in proc.stdout and "over the best heuristic" in proc.stdout
    assert "ops moved from" in proc.stdout and "peak memory" in proc.stdout
    assert f"graphopt simulate {GRAPH} --cluster {CLUSTER} --decision {out}" in proc.stdout
    assert sorted(p.name for p in out.parent.iterdir()) == ["best.json"]  # no temporary left
    replay = run_cli("simulate", GRAPH, "--decision", str(out), "--json")
    assert _step_time(replay.stdout) == saved["step_time"]  # bit for bit


@pytest.mark.parametrize(
    ("task", "method"), [("joint", "decoder-search+annealing"), ("fusion", "annealing")]
)
def test_other_tasks_search_and_replay(run_cli_here, tmp_path: Path, task: str, method: str):
    out = tmp_path / "best.json"
    proc = run_cli_here(
        "optimize", GRAPH, "--cluster", CLUSTER, "--task", task, "--calls", "70", "-o", str(out)
    )
    saved = json.loads(out.read_text())
    assert saved["method"] == f"{method}@calls=70" and saved["task"] == task
    assert "priorities changed" in proc.stdout and "fusion bits flipped" in proc.stdout
    replay = run_cli_here("simulate", GRAPH, "--decision", str(out), "--json")
    assert _step_time(replay.stdout) == saved["step_time"]


def test_ctrl_c_writes_the_best_so_far_and_exits_130(run_cli_here, tmp_path: Path, monkeypatch):
    import graphopt.decoders.search

    decode = graphopt.decoders.search.decode
    calls = []

    def interrupted_decode(*args, **kwargs):
        calls.append(1)
        if len(calls) == 12:
            raise KeyboardInterrupt
        return decode(*args, **kwargs)

    monkeypatch.setattr(graphopt.decoders.search, "decode", interrupted_decode)
    out, chart = tmp_path / "best.json", tmp_path / "charts" / "best.svg"
    proc = run_cli_here(
        "optimize",
        GRAPH,
        "--cluster",
        CLUSTER,
        "--calls",
        "100000",
        "-o",
        str(out),
        "--gantt",
        str(chart),
        check=False,
    )
    assert proc.returncode == 130 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "interrupted after 11 calls" in proc.stderr
    assert "wrote the best decision so far" in proc.stderr and str(out) in proc.stderr
    assert f"and its Gantt chart to {chart}" in proc.stderr  # the set is whole: both files
    saved = json.loads(out.read_text())
    assert b"<svg" in chart.read_bytes()
    monkeypatch.setattr(graphopt.decoders.search, "decode", decode)
    replay = run_cli_here("simulate", GRAPH, "--decision", str(out), "--json")
    assert _step_time(replay.stdout) == saved["step_time"]
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [
        "best.json",
        "charts",
        "charts/best.svg",
    ]


def test_the_decision_and_its_gantt_chart_are_written_as_one_set(
    run_cli_here, tmp_path: Path, monkeypatch
):
    from graphopt import file_set

    out, chart = tmp_path / "d" / "best.json", tmp_path / "g" / "best.png"
    args = ["optimize", GRAPH, "--cluster", CLUSTER, "--calls", "8", "-o", str(out)]
    proc = run_cli_here(*args, "--gantt", str(chart))
    assert f"wrote {chart}" in proc.stdout
    assert json.loads(out.read_text())["graph"] == GRAPH
    assert chart.read_bytes()[:4] == b"\x89PNG"
    before = sorted(p.name for p in tmp_path.iterdir())
    again = tmp_path / "again"
    rename = file_set.os.rename

    def failing(src, dst):
        if again in (Path(dst), Path(dst).parent):  # the pair cannot be moved into place
            raise OSError(28, "No space left on device")
        rename(src, dst)

    monkeypatch.setattr(file_set.os, "rename", failing)
    proc = run_cli_here(
        *args[:-1], str(again / "best.json"), "--gantt", str(again / "best.png"), check=False
    )
    assert proc.returncode == 2 and "No space left on device" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # neither file, no staging


def test_ctrl_c_before_the_search_writes_nothing(run_cli_here, tmp_path: Path, monkeypatch):
    import graphopt.optimizer

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(graphopt.optimizer, "measure_chain", interrupted)
    proc = run_cli_here(
        "optimize",
        GRAPH,
        "--cluster",
        CLUSTER,
        "--calls",
        "8",
        "-o",
        str(tmp_path / "b.json"),
        check=False,
    )
    assert proc.returncode == 130 and proc.stderr.count("\n") == 1
    assert "nothing written" in proc.stderr and list(tmp_path.iterdir()) == []


def _bad(tmp_path: Path) -> list[tuple[list[str], str]]:
    (tmp_path / "a_dir.json").mkdir()
    (tmp_path / "a_file").write_text("")
    out = str(tmp_path / "out.json")
    ok = ["--cluster", CLUSTER, "-o", out]
    return [
        (["no-such-graph", *ok, "--calls", "8"], "unknown graph"),
        (["suite:tiny", *ok, "--calls", "8"], "GRAPH must name one graph"),
        ([GRAPH, "--cluster", "v100x3", "-o", out, "--calls", "8"], "unknown cluster preset"),
        ([GRAPH, *ok], "give exactly one budget: --seconds (wall time) or --calls"),
        ([GRAPH, *ok, "--calls", "8", "--seconds", "1"], "give exactly one budget"),
        ([GRAPH, *ok, "--seconds", "0"], "--seconds must be a number of seconds in (0,"),
        ([GRAPH, *ok, "--seconds", "-2"], "got -2.0"),
        ([GRAPH, *ok, "--seconds", "nan"], "got nan"),
        ([GRAPH, *ok, "--seconds", "inf"], "got inf"),
        ([GRAPH, *ok, "--seconds", "1e9"], "--seconds must be a number of seconds"),
        ([GRAPH, *ok, "--calls", "0"], "--calls must be in 1.."),
        ([GRAPH, *ok, "--calls", "2.5"], "invalid int value: '2.5'"),
        ([GRAPH, *ok, "--calls", "8", "--task", "placement-edit"], "invalid choice"),
        ([GRAPH, *ok, "--task", "joint", "--calls", "0"], "--calls must be in 1.."),
        ([GRAPH, *ok, "--task", "joint", "--seconds", "-1"], "got -1.0"),
        ([GRAPH, *ok, "--task", "joint"], "give exactly one budget"),
        ([GRAPH, "--cluster", CLUSTER, "--calls", "8"], "required: -o/--output"),
        ([GRAPH, "--calls", "8", "-o", out], "required: --cluster"),
        (
            [GRAPH, "--cluster", CLUSTER, "--calls", "8", "-o", str(tmp_path / "a_dir.json")],
            "is a directory",
        ),
        (
            [
                GRAPH,
                "--cluster",
                CLUSTER,
                "--calls",
                "8",
                "-o",
                str(tmp_path / "a_file" / "o.json"),
            ],
            "is a file, not a directory",
        ),
        ([GRAPH, "--cluster", CLUSTER, "--calls", "8", "-o", str(tmp_path / "o.txt")], "JSON"),
        ([GRAPH, *ok, "--calls", "8", "--run", str(tmp_path / "no-run")], "--run"),
        ([GRAPH, *ok, "--calls", "8", "--seed", "-1"], "--seed must be an integer"),
        ([GRAPH, *ok, "--calls", "8", "--gantt", out], "would overwrite the decision file"),
        ([GRAPH, *ok, "--calls", "8", "--gantt", str(tmp_path / "g.xyz")], "use one of .png"),
        (
            [GRAPH, *ok, "--calls", "8", "--prescreen", "0"],
            "--prescreen must be an integer in 1..64",
        ),
        ([GRAPH, *ok, "--calls", "8", "--prescreen", "65"], "got 65"),
        (
            [GRAPH, *ok, "--calls", "8", "--task", "joint", "--prescreen", "4"],
            "--prescreen applies to the placement task's decoder search, not to joint",
        ),
    ]


def test_bad_input_is_one_line_exit_2_and_writes_nothing(run_cli_here, tmp_path: Path):
    for args, says in _bad(tmp_path):
        before = sorted(p.name for p in tmp_path.iterdir())
        proc = run_cli_here("optimize", *args, check=False)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert proc.stderr.count("\n") == 1 and says in proc.stderr, (args, proc.stderr)
        assert proc.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == before, args


def test_a_run_for_another_task_is_refused(run_cli_here, tmp_path: Path):
    from tiny_runs import tiny_config

    from graphopt import rundir

    run = tmp_path / "runs" / "joint" / "tiny_1"
    run.mkdir(parents=True)
    tiny_config(task="joint").save(run / rundir.CONFIG_FILE)
    (run / rundir.BEST).write_bytes(b"")  # looked at only once the task is right
    out = tmp_path / "best.json"
    proc = run_cli_here(
        "optimize",
        GRAPH,
        "--cluster",
        CLUSTER,
        "--calls",
        "8",
        "--run",
        str(run),
        "-o",
        str(out),
        check=False,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "the run decides joint" in proc.stderr and "--task is placement" in proc.stderr
    assert not out.exists()


@pytest.mark.expensive
def test_a_trained_run_can_be_the_start(run_cli_here, tmp_path: Path):
    import torch
    from tiny_runs import tiny_config

    from graphopt.train.trainer import train

    torch.set_num_threads(1)
    run = train(tiny_config(), runs_root=tmp_path / "runs", show_progress=False)
    out = tmp_path / "best.json"
    proc = run_cli_here(
        "optimize", GRAPH, "--cluster", CLUSTER, "--calls", "8", "--run", str(run), "-o", str(out)
    )
    assert "decoder-search+annealing from" in proc.stdout and out.exists()


def test_a_run_start_reads_the_run_config_and_resolves_its_cluster_once(tmp_path, monkeypatch):
    # run_decision hands the configuration it checked the task with to load_run: config.yaml is
    # read once and the run's cluster preset built once (the model's checks included)
    import torch
    from tiny_runs import tiny_config

    import graphopt.eval.evaluate
    import graphopt.train.config
    import graphopt.train.trainer
    from graphopt import rundir
    from graphopt.hardware import PRESETS, get_cluster
    from graphopt.train.config import load_config
    from graphopt.train.trainer import train
    from graphopt.workloads import get_graph

    torch.set_num_threads(1)
    run = train(tiny_config(), runs_root=tmp_path / "runs", show_progress=False)
    graph, cluster = get_graph(GRAPH), get_cluster(CLUSTER)
    loads: list[Path] = []

    def counting(path=None, **kwargs):
        loads.append(path)
        return load_config(path, **kwargs)

    for module in (graphopt.train.config, graphopt.eval.evaluate, graphopt.train.trainer):
        monkeypatch.setattr(module, "load_config", counting)
    built = []  # the run's cluster preset, each time it is resolved
    preset = PRESETS[CLUSTER]
    monkeypatch.setitem(PRESETS, CLUSTER, lambda: built.append(1) or preset())
    decision = optimize_cli.run_decision(str(run), graph, cluster, "placement", seed=0)
    assert len(decision.placement) == graph.num_ops
    assert loads == [run / rundir.CONFIG_FILE] and built == [1]


SMALL = "gen:rnnlm?batch=8&hidden=128&layers=1&steps=4&vocab=1000"
LARGE = SMALL.replace("batch=8", "batch=16")
"""One model at two batch sizes: the same op names, other costs (other fingerprints)."""


def start_from_small(run_cli_here, tmp_path: Path, target: str, calls: int):
    """``small.json`` (SMALL's decision), then ``optimize TARGET --start small.json``; returns
    the two files and the second command's process."""
    small, out = tmp_path / "small.json", tmp_path / "out.json"
    run_cli_here("optimize", SMALL, "--cluster", CLUSTER, "--calls", str(calls), "-o", str(small))
    proc = run_cli_here(
        "optimize", target, "--cluster", CLUSTER, "--calls", "8", "--start", str(small),
        "-o", str(out),
    )  # fmt: skip
    return small, out, proc


def test_a_decision_of_another_batch_size_is_the_start_by_op_name(run_cli_here, tmp_path: Path):
    from graphopt.baselines.reference_cache import cached_best_placement
    from graphopt.decisions.format import decision_by_names, decision_of, read_record
    from graphopt.hardware import get_cluster
    from graphopt.sim import Simulator
    from graphopt.workloads import get_graph

    small, large, proc = start_from_small(run_cli_here, tmp_path, LARGE, 64)
    graph, cluster = get_graph(LARGE), get_cluster(CLUSTER)
    sim = Simulator()
    start = sim.evaluate(graph, cluster, decision_by_names(small, read_record(small), graph))
    heuristic = cached_best_placement(graph, cluster)[1]
    found = sim.evaluate(graph, cluster, decision_of(large, read_record(large), graph, cluster))
    assert start.step_time < heuristic  # the smaller batch's decision is a better start here
    assert "from small.json" in proc.stdout and found.step_time <= start.step_time
    with pytest.raises(ValueError, match="fingerprint"):  # a replay stays exact
        decision_of(small, read_record(small), graph)


def test_a_decision_of_a_shallower_model_places_the_ops_it_names(run_cli_here, tmp_path: Path):
    """Two more steps of the RNN: the ops the smaller model's file names keep its devices, the
    new ones take the best heuristic's (-1 until then), and the summary says how many came by
    name and what the start was worth."""
    from graphopt.decisions.format import placement_by_names, read_record
    from graphopt.workloads import get_graph

    deeper = SMALL.replace("steps=4", "steps=6")
    small, out, proc = start_from_small(run_cli_here, tmp_path, deeper, 32)
    graph = get_graph(deeper)
    placement, named = placement_by_names(small, read_record(small).placement, graph, 2)
    assert graph.num_ops / 2 <= named <= get_graph(SMALL).num_ops < graph.num_ops
    assert (placement < 0).sum() == graph.num_ops - named
    assert (
        f"given start    small.json ({named:,} of {graph.num_ops:,} ops by name): " in proc.stdout
    )
    assert out.exists()


def test_a_bad_start_is_one_line_exit_2_and_writes_nothing(run_cli_here, tmp_path: Path):
    saved = tmp_path / "txl.json"
    run_cli_here("optimize", GRAPH, "--cluster", "v100-nvlink-4", "--calls", "8", "-o", str(saved))
    placement = json.loads(saved.read_text())["placement"]
    placement[next(iter(placement))] = 3  # a device a 2-device cluster does not have
    far = tmp_path / "far.json"
    far.write_text(json.dumps({**json.loads(saved.read_text()), "placement": placement}))
    out = str(tmp_path / "out.json")
    cases = [
        ([GRAPH, "--start", str(tmp_path / "none.json")], "--start: decision file"),
        ([GRAPH, "--start", str(saved), "--run", str(tmp_path)], "give --run or --start"),
        (["rnnlm-tiny", "--start", str(saved)], "a decision for another model?"),
        ([GRAPH, "--start", str(far)], "the cluster has 2 devices"),
    ]
    for args, says in cases:
        before = sorted(p.name for p in tmp_path.iterdir())
        proc = run_cli_here(
            "optimize", *args, "--cluster", CLUSTER, "--calls", "8", "-o", out, check=False
        )
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (args, proc.stderr)
        assert says in proc.stderr and proc.stdout == "", (args, proc.stderr)
        assert sorted(p.name for p in tmp_path.iterdir()) == before, args
