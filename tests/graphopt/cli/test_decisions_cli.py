"""Saved decisions on the command line: every row of ``baselines --save-decisions`` replays to its
step time bit for bit; ``simulate --save-decisions``; ``decision diff`` and ``export``; bad input
as one line, exit status 2, nothing written. Through the commands' entry point in this process (a
subprocess per call would only import numba and torch again; test_simulate.py and
test_baselines.py run the commands in subprocesses)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, graphopt_here

from graphopt.cli import main
from graphopt.decisions.files import INDEX
from graphopt.decisions.io import load_decision
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.workloads import resolve_graphs

GRAPHS = "suite:tiny,pipedream:resnet50"


def replay_all(out: Path, spec: str) -> list[dict]:
    """Replay every decision of ``out``'s index; assert each gives its saved step time exactly."""
    graphs = {g.name: g for g in resolve_graphs(spec)}
    sim = Simulator()
    entries = json.loads((out / INDEX).read_text())["decisions"]
    for e in entries:
        graph, cluster = graphs[e["graph"]], get_cluster(e["cluster"])
        m = sim.evaluate(graph, cluster, load_decision(out / e["file"], graph, cluster=cluster))
        assert m.valid == e["valid"], e["file"]
        if e["step_time"] is None:
            assert not math.isfinite(m.step_time), e["file"]
        else:
            assert m.step_time == e["step_time"], e["file"]  # bit for bit
    return entries


@pytest.mark.parametrize("task", ["placement", "scheduling", "fusion", "joint"])
def test_every_saved_baseline_decision_replays_exactly(run_cli_here, tmp_path, task):
    run_cli = run_cli_here
    out, results = tmp_path / "decisions", tmp_path / "results.json"
    printed = run_cli(
        "baselines",
        GRAPHS,
        "--task",
        task,
        "--budget",
        "8",
        "--save-decisions",
        str(out),
        "--json",
        str(results),
    ).stdout
    assert f"and {out / INDEX}" in printed.replace("\n", "")
    entries = replay_all(out, GRAPHS)
    by_file = {e["file"]: e for e in entries}
    rows = [
        (g["graph"], r) for g in json.loads(results.read_text())["graphs"] for r in g["results"]
    ]
    assert len(rows) == len(entries) + sum(r["decision_file"] is None for _, r in rows)
    for graph, r in rows:
        if r["decision_file"] is None:  # a heuristic that gave no decision, e.g. inductor here
            assert not r["valid"] and r["evaluations"] == 0
            continue
        e = by_file[r["decision_file"]]
        assert (e["graph"], e["method"], e["step_time"]) == (graph, r["method"], r["step_time"])
        assert e["task"] == task
    # the command a user runs replays it too (the cluster comes from the file)
    e = entries[-1]
    replayed = json.loads(
        run_cli(
            "simulate", e["graph"].split(" ")[0], "--decision", str(out / e["file"]), "--json"
        ).stdout
    )
    assert replayed[0]["step_time"] == e["step_time"]


def test_exact_and_estimate_search_rows_are_saved(run_cli_here, tmp_path):
    run_cli = run_cli_here
    out = tmp_path / "d"
    run_cli(
        "baselines",
        "random-layered-20-s0",
        "--estimate-budget",
        "30",
        "--exact-time-limit",
        "30",  # CP-SAT proves this 20-op graph in well under a second; the limit is for loaded cores
        "--save-decisions",
        str(out),
    )
    methods = {e["method"] for e in replay_all(out, "random-layered-20-s0")}
    assert "estimate-search@30" in methods and any(
        m.startswith(("optimum", "cp-sat")) for m in methods
    )


def test_simulate_saves_and_converts_decisions(tmp_path, capsys):
    graph = resolve_graphs("gnmt-tiny")[0]
    out = tmp_path / "sim"
    assert (
        main(
            [
                "simulate",
                "suite:tiny",
                "--placement",
                "heft",
                "--save-decisions",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert all(r["decision_file"].endswith("--heft.json") for r in rows)
    replay_all(out, "suite:tiny")
    old = tmp_path / "old.json"  # an older form: a plain list in the graph file's order
    old.write_text(json.dumps([i % 2 for i in range(graph.num_ops)]))
    assert (
        main(
            [
                "simulate",
                "gnmt-tiny",
                "--cluster",
                "v100-nvlink-2",
                "--decision",
                str(old),
                "--save-decisions",
                str(tmp_path / "conv"),
            ]
        )
        == 0
    )
    assert "wrote 1 decisions" in capsys.readouterr().out
    converted = tmp_path / "conv" / "gnmt-tiny--old.json"
    a = load_decision(old, graph)
    b = load_decision(converted, graph, cluster=get_cluster("v100-nvlink-2"))
    assert a.placement.tolist() == b.placement.tolist()
    # saved again, a versioned file keeps its method's name
    args = ["simulate", "gnmt-tiny", "--decision", str(converted), "--save-decisions"]
    assert main([*args, str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "gnmt-tiny--old.json").is_file()


def test_diff_and_export(run_cli_here, tmp_path):
    run_cli = run_cli_here
    out = tmp_path / "d"
    run_cli("baselines", "txl-tiny", "--task", "joint", "--save-decisions", str(out))
    a, b = out / "txl-tiny--heft.json", out / "txl-tiny--best+xla.json"
    text = run_cli("decision", "diff", str(a), str(b), "--limit", "2").stdout
    assert "ops moved:" in text and "kernels merged:" in text and "step time:" in text
    diff = json.loads(run_cli("decision", "diff", str(a), str(b), "--json").stdout)
    saved = [json.loads(p.read_text())["step_time"] for p in (a, b)]
    assert [diff["step_time_a"], diff["step_time_b"]] == saved
    again = json.loads(
        run_cli("decision", "diff", str(a), str(b), "--graph", "txl-tiny", "--json").stdout
    )
    assert again["step_time_delta"] == diff["step_time_delta"] and again["moved"] == diff["moved"]
    exported = json.loads(run_cli("decision", "export", str(b), "--format", "torch").stdout)
    assert exported["devices"] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert exported["fusion"] and all(len(k) >= 2 for k in exported["fusion"])
    target = tmp_path / "t.json"
    run_cli(
        "decision", "export", str(b), "--devices", "cpu:0,cpu:1,cpu:2,cpu:3", "--out", str(target)
    )
    assert set(json.loads(target.read_text())["placement"].values()) <= {
        "cpu:0",
        "cpu:1",
        "cpu:2",
        "cpu:3",
    }
    bad = run_cli("decision", "export", str(b), "--devices", "cpu", check=False)
    assert bad.returncode == 2 and "--devices: give one torch device per device" in bad.stderr


# ---------------------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def saved_once(tmp_path_factory) -> Path:
    """A fusion decision of gnmt-tiny on the default cluster (v100-nvlink-4), saved by
    ``baselines --save-decisions``: its ``best+xla`` row. Once per module (the run takes about a
    second; nine tests read it), each test gets its own copy (:func:`saved_file`)."""
    out = tmp_path_factory.mktemp("saved")
    graphopt_here("baselines", "gnmt-tiny", "--task", "fusion", "--save-decisions", str(out))
    return out / "gnmt-tiny--best+xla.json"


@pytest.fixture
def saved_file(saved_once, tmp_path) -> Path:
    """:func:`saved_once`'s file copied into the test's own directory, under the same name (the
    tests write their broken variants beside it)."""
    copy = tmp_path / "saved" / saved_once.name
    copy.parent.mkdir()
    shutil.copyfile(saved_once, copy)
    return copy


def rewrite(path: Path, edit) -> Path:
    data = json.loads(path.read_text())
    edit(data)
    bad = path.with_name("bad.json")
    bad.write_text(json.dumps(data))
    return bad


def _first(m: dict) -> str:
    return next(iter(m))


def _unknown(d):
    d["placement"]["no-such-op"] = d["placement"].pop(_first(d["placement"]))


def _missing(d):
    del d["priority"][_first(d["priority"])]


def _far(d):
    d["placement"][_first(d["placement"])] = 9


def _rules(d):
    for op in d["fusion"]:  # fuse everything: sources and contractions break the rules
        d["fusion"][op] = 1


@pytest.mark.parametrize(
    ("edit", "args", "match"),
    [
        (
            None,
            ["--cluster", "v100-nvlink-2"],
            "is for cluster 'v100-nvlink-4' .* not cluster 'v100-nvlink-2'",
        ),
        (_unknown, [], "placement names op 'no-such-op', which graph 'gnmt-tiny' does not have"),
        (_missing, [], "priority gives no priority for 1 of the"),
        (_far, [], "has device 9; the cluster has 4 devices"),
        (_rules, [], r"illegal fusion \(rule 2"),
    ],
)
def test_bad_decisions_are_one_line_exit_2(saved_file, tmp_path, capsys, edit, args, match):
    path = saved_file if edit is None else rewrite(saved_file, edit)
    out = tmp_path / "never"
    code = main(
        ["simulate", "gnmt-tiny", "--decision", str(path), "--save-decisions", str(out), *args]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and str(path) in err
    assert re.search(match, err), err
    assert not out.exists()  # nothing written


def test_a_decision_for_another_graph_names_both(saved_file, capsys):
    assert main(["simulate", "txl-tiny", "--decision", str(saved_file)]) == 2
    err = capsys.readouterr().err.strip()
    assert "graph 'gnmt-tiny'" in err and "graph 'txl-tiny'" in err and "\n" not in err


def test_duplicate_ops_and_truncated_files(saved_file, capsys):
    text = saved_file.read_text()
    first = text.index('"placement": {') + len('"placement": {')
    line_end = text.index("\n", first + 1)
    entry = text[first:line_end].strip().rstrip(",")
    dup = saved_file.with_name("dup.json")
    dup.write_text(text[:line_end] + f"\n  {entry}," + text[line_end:])
    cut = saved_file.with_name("cut.json")
    cut.write_text(text[: len(text) // 3])
    for path, match in ((dup, "is given twice in one object"), (cut, "truncated")):
        assert main(["simulate", "gnmt-tiny", "--decision", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert match in err and str(path) in err and "\n" not in err


def test_a_save_directory_that_is_a_file_or_unwritable_fails_before_the_run(run_cli_here, tmp_path):
    run_cli = run_cli_here
    blocker = tmp_path / "F"
    blocker.write_text("mine")
    proc = run_cli("baselines", "txl-tiny", "--save-decisions", str(blocker), check=False)
    assert proc.returncode == 2 and "is a file, not a directory" in proc.stderr
    assert proc.stdout == "" and blocker.read_text() == "mine"
    if os.geteuid() != 0:
        locked = tmp_path / "ro"
        locked.mkdir()
        locked.chmod(0o555)
    else:
        locked = Path("/sys/kernel")
        if not locked.is_dir():  # pragma: no cover
            pytest.skip("no read-only directory for root")
    before = sorted(p.name for p in locked.iterdir())
    proc = run_cli("baselines", "txl-tiny", "--save-decisions", str(locked), check=False)
    assert proc.returncode == 2 and "not writable" in proc.stderr and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in locked.iterdir()) == before


# ---------------------------------------------------------------- output directories


@pytest.mark.parametrize("bad", ["../victim.json", "ABSOLUTE"])
def test_an_index_entry_outside_the_directory_is_refused_and_nothing_is_written(
    tmp_path, capsys, bad
):
    """An index whose entry names a file outside the directory (#40: it was overwritten, exit
    0) is refused in one line naming the index and the entry, before any work."""
    victim = tmp_path / "victim.json"
    victim.write_text("mine")
    out = tmp_path / "out"
    out.mkdir()
    entry = {"graph": "txl-tiny", "method": "single", "cluster": "v100-nvlink-4"}
    entry["file"] = str(victim) if bad == "ABSOLUTE" else bad
    index = out / INDEX
    index.write_text(json.dumps({"format": "graphopt-decision-index", "decisions": [entry]}))
    before = index.read_text()
    code = main(["simulate", "txl-tiny", "--save-decisions", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert str(index) in err and "entry 0 of 'decisions': 'file'" in err
    assert victim.read_text() == "mine" and index.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "victim.json"]


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "no-such-graph"],
        ["simulate", "txl-tiny", "--placement", "no-such-placer"],
        ["baselines", "no-such-graph"],
        ["baselines", "txl-tiny", "--task", "fusion", "--estimate-budget", "5"],
    ],
    ids=["simulate-graph", "simulate-placer", "baselines-graph", "baselines-options"],
)
def test_a_refusal_leaves_no_save_directory(run_cli_here, tmp_path, args):
    out = tmp_path / "a" / "out"
    proc = run_cli_here(*args, "--save-decisions", str(out), check=False)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_a_signal_while_decisions_are_saved_leaves_the_whole_set_or_nothing(tmp_path, signum):
    """Stopped as it prints its table (the decisions are saved next), ``baselines
    --save-decisions`` ends with exit 130 and one line, or finishes; the directory holds the
    complete set (every file of the index, no other) or does not exist; no staging file is left.
    """
    out = tmp_path / "out"
    # started as the installed `graphopt` script starts it (`python -m` can report an interrupt
    # that came during an import as death by SIGINT, whatever the exit status asked for)
    launch = "import sys; from graphopt.cli import main; sys.exit(main())"
    proc = subprocess.Popen(
        [sys.executable, "-c", launch, "baselines", "txl-tiny", "--save-decisions", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # the table's first line
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 130), err
    if proc.returncode == 130:
        assert err.strip() == "graphopt: interrupted"
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["out"])  # no staging directory
    if out.exists():
        files = {e["file"] for e in json.loads((out / INDEX).read_text())["decisions"]}
        assert sorted(p.name for p in out.iterdir()) == sorted([*files, INDEX])


# ---------------------------------------------------------------- diff and export, bad input


def test_diff_limit_and_export_devices_are_checked(saved_file, tmp_path, capsys):
    """#40: ``decision diff --limit -1`` was taken, ``decision export --devices banana,kiwi``
    wrote a file."""
    with pytest.raises(SystemExit) as info:
        main(["decision", "diff", str(saved_file), str(saved_file), "--limit", "-1"])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and "--limit: must be an integer in 0..1000000, got -1" in err
    out = tmp_path / "t.json"
    code = main(["decision", "export", str(saved_file), "--devices", "banana,kiwi,cpu,cpu:1",
                 "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "'banana' is not a torch device" in err
    assert not out.exists()


def test_export_refuses_kernels_that_null_fusion_bits_do_not_make(saved_file, capsys):
    """#40: export wrote the fused kernels of a file whose fusion bits are null (simulate
    refuses it); now both refuse it, naming the file."""
    bad = rewrite(saved_file, lambda d: d.update(fusion=None))
    assert json.loads(bad.read_text())["kernels"]
    for args in (
        ["decision", "export", str(bad)],
        ["simulate", "gnmt-tiny", "--decision", str(bad)],
    ):
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert str(bad) in err and "but fusion is null" in err and "\n" not in err
