"""Smoke tests of ``graphopt graphs`` in a subprocess."""

from __future__ import annotations

import json

from graphopt.graph import CompGraph, Op


def test_help(run_cli):
    for args in (
        ["--help"],
        ["graphs", "--help"],
        ["graphs", "list", "--help"],
        ["graphs", "show", "--help"],
        ["graphs", "export", "--help"],
    ):
        assert "usage: graphopt" in run_cli(*args).stdout


def test_list(run_cli):
    data = json.loads(run_cli("graphs", "list", "--json").stdout)
    assert "gnmt-4" in data["graphs"] and "tiny" in data["suites"]
    assert {"pipedream:vgg16", "tarnawski:bert_l-3", "tarnawski:resnet50"} <= set(data["imported"])
    text = run_cli("graphs", "list").stdout
    assert "gnmt-4" in text
    assert 'pip install "graphopt[transformers]"' in text  # not eaten as rich markup


def test_show_and_export_round_trip(run_cli, tmp_path):
    report = json.loads(run_cli("graphs", "show", "suite:tiny", "--json", "--top", "3").stdout)
    assert len(report) >= 2 and all(len(r["largest_ops"]) == 3 for r in report)
    first = report[0]["name"]
    out = tmp_path / "g.json.gz"
    run_cli("graphs", "export", first, "-o", str(out))
    graph = CompGraph.load(out)
    assert graph.num_ops == report[0]["ops"]
    assert report[0]["total_flops"] == float(graph.flops.sum())
    text = run_cli("graphs", "show", str(out)).stdout
    assert "largest" in text and f"{graph.num_ops:,} ops" in text
    run_cli("graphs", "export", "suite:tiny", "-o", str(tmp_path / "dir"))
    assert len(list((tmp_path / "dir").glob("*.json"))) == len(report)


def test_unknown_graph_is_a_clear_error(run_cli):
    proc = run_cli("graphs", "show", "gnmt-3", check=False)
    assert proc.returncode == 2
    assert "unknown graph 'gnmt-3'" in proc.stderr and "gnmt-4" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_import_pipedream_profile(run_cli, tmp_path):
    out = tmp_path / "vgg.json"
    text = run_cli("graphs", "import", "pipedream:vgg16?mode=forward", "-o", str(out)).stdout
    assert "41 ops" in text and CompGraph.load(out).num_ops == 41
    proc = run_cli("graphs", "import", "resnet", "-o", str(out), check=False)
    assert proc.returncode == 2 and "cannot import 'resnet'" in proc.stderr


def test_a_missing_profile_path_is_one_line_for_import_and_simulate(run_cli, tmp_path):
    for args in (
        ("graphs", "import", "pipedream:/nope/graph.txt", "-o", str(tmp_path / "g.json")),
        ("simulate", "pipedream:/nope/graph.txt"),
    ):
        proc = run_cli(*args, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("graphopt: error: no PipeDream profile at '/nope/graph.txt'")
    assert not (tmp_path / "g.json").exists()


def test_import_without_an_optional_dependency_is_one_line(run_cli_here, tmp_path):
    import importlib.util

    import pytest

    run_cli = run_cli_here  # the refusal comes after torch is imported: in this process
    if importlib.util.find_spec("transformers") is not None:
        pytest.skip("transformers is installed")
    proc = run_cli(
        "graphs",
        "import",
        "torch:gpt2?n_layer=1&seq=16",
        "-o",
        str(tmp_path / "g.json"),
        check=False,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert 'pip install "graphopt[transformers]"' in proc.stderr


def test_show_refuses_a_negative_top(run_cli):
    proc = run_cli("graphs", "show", "txl-tiny", "--top", "-3", check=False)
    assert proc.returncode == 2 and "expected an integer >= 0, got -3" in proc.stderr


def test_output_paths_that_cannot_be_written_fail_first(run_cli, tmp_path):
    blocker = tmp_path / "F"
    blocker.write_text("a regular file")
    folder = tmp_path / "d.json"
    folder.mkdir()
    for args, fragment in (
        (("export", "txl-tiny", "-o", str(blocker / "sub.json")), "cannot create -o"),
        (("export", "suite:tiny", "-o", str(blocker / "sub")), "cannot create -o"),
        (("export", "suite:tiny", "-o", str(blocker)), "is a file, not a directory; give a"),
        (("export", "txl-tiny", "-o", str(folder)), "is a directory; give the name of a file"),
        (("import", "torch:lstm", "-o", str(blocker / "x.json")), "cannot create -o"),
    ):
        proc = run_cli("graphs", *args, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and fragment in proc.stderr
        assert proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["F", "d.json"]
    assert not any(folder.iterdir()) and blocker.read_text() == "a regular file"


def test_a_graph_path_with_a_comma_is_taken_whole(run_cli, tmp_path):
    folder = tmp_path / "a,b"
    run_cli("graphs", "export", "txl-tiny", "-o", str(folder / "g,1.json"))
    path = folder / "g,1.json"
    report = json.loads(run_cli("graphs", "show", f"{path},gnmt-tiny", "--json").stdout)
    assert [r["name"] for r in report] == ["txl-tiny", "gnmt-tiny"]
    proc = run_cli("graphs", "show", str(folder / "h,1.json"), check=False)  # no such file
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def _shaped_graph() -> CompGraph:
    """Two ops, the second with known shapes (tests/graphopt/test_shapes.py tests the format)."""
    ops = [
        Op("x", "Placeholder", output_bytes=512.0),
        Op(
            "mm",
            "mm",
            flops=8192.0,
            bytes_accessed=3584.0,
            output_bytes=1024.0,
            output_shapes=((8, 32),),
            output_dtypes=("float32",),
            input_shapes=((8, 16), (16, 32)),
        ),
    ]
    return CompGraph.build("g", ops, [("x", "mm", 512.0)])


def test_bad_shapes_in_a_file_exit_2(tmp_path, run_cli):
    data = _shaped_graph().to_json_dict()
    data["ops"]["shapes"][1] = [[8, -32]]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    proc = run_cli("graphs", "show", str(path), check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "op 'mm'" in lines[0] and "negative dim" in lines[0]


def test_show_prints_shapes(tmp_path, run_cli):
    path = _shaped_graph().save(tmp_path / "g.json")
    report = json.loads(run_cli("graphs", "show", str(path), "--json").stdout)[0]
    assert report["ops_with_shapes"] == 1
    mm = next(op for op in report["largest_ops"] if op["name"] == "mm")
    assert mm["outputs"] == "f32[8,32]" and mm["inputs"] == "[8,16], [16,32]"
    assert "f32[8,32]" in run_cli("graphs", "show", str(path)).stdout
