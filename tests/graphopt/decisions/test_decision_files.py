"""A directory of saved decisions: files, index, names, atomic writes, directories refused, an
index's entries checked (never a path to follow), nothing created before the index is written."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from graphopt.decisions.files import (
    INDEX,
    DecisionDir,
    dumps,
    file_name,
    save_decision,
    write_json_atomic,
)
from graphopt.decisions.format import record_of, to_json
from graphopt.decisions.io import load_decision
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster
from graphopt.sim import simulate
from graphopt.typing import Decision

CLUSTER = get_cluster("v100-nvlink-2")


def graph(name: str = "g:1 (x)") -> CompGraph:
    ops = [Op(n, "MatMul", flops=1e9, output_bytes=1e6) for n in "abc"]
    return CompGraph.build(name, ops, [("a", "b", 1e6), ("a", "c", 1e6)])


def unwritable_directory(tmp_path: Path) -> Path:
    """A directory nothing can be created in: read-only for a user, sysfs for root."""
    if os.geteuid() != 0:
        locked = tmp_path / "ro"
        locked.mkdir()
        locked.chmod(0o555)
        return locked
    if not Path("/sys/kernel").is_dir():  # pragma: no cover
        pytest.skip("no read-only directory for root")
    return Path("/sys/kernel")


def test_files_and_index(tmp_path):
    g = graph()
    d = Decision(placement=np.array([0, 1, 1]))
    m = simulate(g, CLUSTER, d)
    saved = DecisionDir(tmp_path / "out")
    name = saved.save(g, CLUSTER, "heft", d, m, task="placement", seed=3)
    assert name == "g_1_x--heft.json"
    saved.write_index()
    index = json.loads((tmp_path / "out" / INDEX).read_text())
    assert index["format"] == "graphopt-decision-index" and index["version"] == 1
    (entry,) = index["decisions"]
    assert entry == {
        "graph": g.name,
        "method": "heft",
        "file": name,
        "step_time": m.step_time,
        "valid": True,
        "task": "placement",
        "seed": 3,
        "graph_fingerprint": g.fingerprint,
        "cluster": CLUSTER.name,
        "cluster_fingerprint": CLUSTER.fingerprint,
    }
    loaded = load_decision(tmp_path / "out" / name, g, cluster=CLUSTER)
    assert simulate(g, CLUSTER, loaded).step_time == m.step_time
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted([INDEX, name])  # no temp


def test_names_that_collide_get_a_suffix_and_a_pair_saved_again_keeps_its_file(tmp_path):
    saved = DecisionDir(tmp_path)
    d = Decision(placement=np.zeros(3, dtype=np.int64))
    first = saved.save(graph("g x"), CLUSTER, "m", d)
    second = saved.save(graph("g_x"), CLUSTER, "m", d)
    assert (first, second) == ("g_x--m.json", "g_x--m-2.json")
    assert saved.save(graph("g x"), CLUSTER, "m", d) == first
    assert len(saved.entries) == 2
    assert file_name("a/b", "cp-sat, no fusion (feasible)") == "a_b--cp-sat_no_fusion_feasible.json"


def test_one_graph_on_two_clusters_keeps_both_files(tmp_path):
    """``--cluster each``: the same graph and method on another cluster is another file (it used
    to replace the first), named with its cluster; each saved again keeps its own file."""
    other = get_cluster("v100-nvlink-4")
    assert other.name != CLUSTER.name
    d = Decision(placement=np.zeros(3, dtype=np.int64))
    saved = DecisionDir(tmp_path)
    first = saved.save(graph("g"), CLUSTER, "heft", d)
    second = saved.save(graph("g"), other, "heft", d)
    assert (first, second) == ("g--heft.json", "g--v100-nvlink-4--heft.json")
    assert saved.save(graph("g"), other, "heft", d) == second
    saved.write_index()
    again = DecisionDir(tmp_path)  # an earlier run's index: the same files again
    assert again.save(graph("g"), CLUSTER, "heft", d) == first
    assert again.save(graph("g"), other, "heft", d) == second
    assert {e["cluster"] for e in again.entries} == {CLUSTER.name, other.name}


def test_an_index_of_an_earlier_run_is_kept(tmp_path):
    d = Decision(placement=np.zeros(3, dtype=np.int64))
    save_decision(tmp_path, graph("one"), CLUSTER, "heft", d)
    path = save_decision(tmp_path, graph("two"), CLUSTER, "heft", d)
    assert path == tmp_path / "two--heft.json"
    index = json.loads((tmp_path / INDEX).read_text())
    assert [e["graph"] for e in index["decisions"]] == ["one", "two"]


def test_a_directory_that_is_a_file_or_holds_a_foreign_index_is_refused(tmp_path):
    (tmp_path / "F").write_text("")
    with pytest.raises(ValueError, match="decisions directory '.*F' is a file, not a directory"):
        DecisionDir(tmp_path / "F")
    with pytest.raises(ValueError, match="cannot create the directory: '.*F' is a file"):
        DecisionDir(tmp_path / "F" / "sub")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / INDEX).write_text('{"something": "else"}')
    with pytest.raises(ValueError, match="index.json: not a decision index"):
        DecisionDir(tmp_path / "d")


def test_an_unwritable_directory_is_refused_and_nothing_is_left(tmp_path):
    locked = unwritable_directory(tmp_path)
    before = sorted(p.name for p in locked.iterdir())
    with pytest.raises(ValueError, match="is not writable") as info:
        DecisionDir(locked)
    assert str(locked) in str(info.value) and "\n" not in str(info.value)
    assert sorted(p.name for p in locked.iterdir()) == before


def test_an_atomic_write_that_fails_leaves_nothing(tmp_path):
    (tmp_path / "blocker").write_text("a file where a folder would go")
    with pytest.raises(ValueError, match="cannot write '.*x.json'"):
        write_json_atomic(tmp_path / "blocker" / "x.json", {"a": 1})
    (tmp_path / "blocker").unlink()
    target = tmp_path / "x.json"
    target.write_text("old")
    with pytest.raises(ValueError):  # not JSON: the old file stays whole, no temporary is left
        write_json_atomic(target, {"a": float("nan")})
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_the_fast_text_is_that_of_the_record(tmp_path):
    """The slow twin: a file written by DecisionDir (per-op arrays formatted from the graph's
    encoded names) has exactly the text of the record's JSON, for names that need escaping, a '%'
    and a graph file listing its ops out of order."""
    names = ["out %d", 'q"uote', "ünï/cödé", "src"]
    ops = [
        Op(n, t, flops=1e9, output_bytes=1e6)
        for n, t in zip(names, ["Add", "Relu", "Relu", "MatMul"], strict=True)
    ]
    g = CompGraph.build(
        "odd",
        ops,
        [("src", 'q"uote', 1e6), ('q"uote', "ünï/cödé", 1e6), ("ünï/cödé", "out %d", 1e6)],
    )
    data = g.to_json_dict()
    assert data["ops"]["name"][0] == "src"
    order = [3, 1, 0, 2]
    data["ops"] = {key: [column[i] for i in order] for key, column in data["ops"].items()}
    (tmp_path / "g.json").write_text(json.dumps(data))
    for graph in (g, CompGraph.load(tmp_path / "g.json")):
        d = Decision(placement=np.array([0, 1, 1, 0]), fusion=np.array([0, 1, 0, 0]), priority=None)
        m = simulate(graph, CLUSTER, d)
        saved = DecisionDir(tmp_path / graph.fingerprint[:8])
        name = saved.save(graph, CLUSTER, "m", d, m, task="joint", seed=1)
        saved.write_index()
        record = record_of(graph, CLUSTER, d, method="m", measurement=m, task="joint", seed=1)
        assert (saved.path / name).read_text() == dumps(to_json(record))
        assert json.loads((saved.path / name).read_text()) == json.loads(
            json.dumps(to_json(record))
        )


def test_dumps_breaks_lines_only_between_entries():
    data = {"a": {'x, "y': 1, "q}, {": 2, "": 3}, "k": [["a], [b", "c"], ["d"]], "e": [], "f": {}}
    data |= {"g": [{"m": "n}, {"}], "h": None, "i": 1.5}
    text = dumps(data)
    assert json.loads(text) == data and text.count("\n") == 18


def test_a_file_that_cannot_be_written_fails_the_index(tmp_path):
    """A file that cannot be put in place fails write_index, and nothing is written: no index,
    no staging directory."""
    g = graph("g")
    d = Decision(placement=np.zeros(3, dtype=np.int64))
    (tmp_path / "out" / "g--m.json").mkdir(parents=True)  # a directory where the file goes
    saved = DecisionDir(tmp_path / "out")
    saved.save(g, CLUSTER, "m", d)
    with pytest.raises(ValueError, match="cannot write '.*g--m.json'"):
        saved.write_index()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["g--m.json"]


def write_index(folder: Path, decisions: object) -> Path:
    folder.mkdir(exist_ok=True)
    index = folder / INDEX
    index.write_text(
        json.dumps({"format": "graphopt-decision-index", "version": 1, "decisions": decisions})
    )
    return index


ENTRY = {"graph": "g", "method": "m", "cluster": CLUSTER.name}


@pytest.mark.parametrize(
    ("decisions", "match"),
    [
        (
            [{**ENTRY, "file": "../victim.json"}],
            r"entry 0 of 'decisions': 'file' '\.\./victim\.json' is not a decision file name inside the directory",
        ),
        (
            [ENTRY, {**ENTRY, "file": "/tmp/victim.json"}],
            "entry 1 of 'decisions': 'file' '/tmp/victim.json'",
        ),
        ([{**ENTRY, "file": "sub/x.json"}], "'file' 'sub/x.json'"),
        ([{**ENTRY, "file": INDEX}], "'file' 'index.json'"),
        ([{**ENTRY, "file": ".hidden.json"}], "'file' '.hidden.json'"),
        ([{**ENTRY, "file": 5}], "'file' 5"),
        ([{**ENTRY}], "'file' None"),
        ([{**ENTRY, "file": "x.json", "graph": ["g"]}], "'graph' must be a string"),
        ([{**ENTRY, "file": "x.json", "cluster": 3}], "'cluster' must be a string"),
        (["x.json"], "entry 0 of 'decisions' must be an object, got str"),
        (5, "'decisions' must be a list of entries, got int"),
    ],
)
def test_an_index_entry_is_data_to_check_never_a_path_to_follow(tmp_path, decisions, match):
    """An entry naming a file outside the directory is refused when the directory is opened,
    before anything is saved: no file outside it is ever written."""
    if isinstance(decisions, list) and decisions and decisions[0] is ENTRY:
        decisions[0] = {**ENTRY, "file": "g--m.json"}
    victim = tmp_path / "victim.json"
    victim.write_text("mine")
    index = write_index(tmp_path / "out", decisions)
    with pytest.raises(ValueError) as info:
        DecisionDir(tmp_path / "out", "--save-decisions")
    message = str(info.value)
    assert re.search(match, message), message
    assert message.startswith(str(index)) and "\n" not in message
    assert victim.read_text() == "mine"


def test_non_finite_numbers_in_an_index_are_refused(tmp_path):
    index = tmp_path / "out" / INDEX
    index.parent.mkdir()
    for number in ("NaN", "Infinity", "1e999"):
        index.write_text(
            '{"format": "graphopt-decision-index", "decisions": [{"step_time": ' + number + "}]}"
        )
        with pytest.raises(ValueError, match="not a readable decision index"):
            DecisionDir(index.parent)


def test_nothing_is_created_before_the_index_is_written(tmp_path):
    d = Decision(placement=np.zeros(3, dtype=np.int64))
    saved = DecisionDir(tmp_path / "a" / "out")
    saved.save(graph("g"), CLUSTER, "m", d)
    saved.flush()
    assert not (tmp_path / "a" / "out").exists()  # staged beside it, in "a"
    saved.discard()
    assert list(tmp_path.iterdir()) == []  # "a", made for the staging directory, too
    saved.save(graph("g"), CLUSTER, "m", d)
    saved.write_index()
    assert sorted(p.name for p in (tmp_path / "a" / "out").iterdir()) == ["g--m.json", INDEX]
