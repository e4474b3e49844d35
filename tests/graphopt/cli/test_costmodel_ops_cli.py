"""``graphopt costmodel ops train|eval`` and a cluster file with ``op_times: learned``: ``train`` in
a subprocess, the other calls through the same entry point in this process (a subprocess per call
would only import the libraries again)."""

from __future__ import annotations

import json

import yaml

from graphopt.graph import CompGraph, Op

KIND = "cpu-test"
CLUSTER = {
    "name": "one",
    "devices": [
        {
            "name": "cpu0",
            "kind": KIND,
            "peak_flops": 1e11,
            "mem_bandwidth": 2e10,
            "memory": 1e10,
            "launch_overhead": 2e-6,
        }
    ],
}


def chain(name: str, family: str, scale: int) -> CompGraph:
    ops = []
    for k in range(12):
        n = scale * (k + 1)
        for op_type, flops, nbytes, share in (
            ("mm", 2.0 * n**3, 12.0 * n * n, 0.5),
            ("relu", 0.0, 8.0 * n * n, 0.25),
        ):
            seconds = max(flops / 1e11, nbytes / 2e10) / share + 2e-6
            ops.append(
                Op(
                    f"{op_type}{k}",
                    op_type,
                    flops=flops,
                    bytes_accessed=nbytes,
                    output_bytes=4.0 * n * n,
                    measured={KIND: seconds},
                    output_shapes=((n, n),),
                    output_dtypes=("float32",),
                )
            )
    edges = [(a.name, b.name, a.output_bytes) for a, b in zip(ops, ops[1:], strict=False)]
    return CompGraph.build(name, ops, edges, metadata={"zoo": family})


def test_train_eval_and_simulate(tmp_path, run_cli, run_cli_here):
    paths = [str(chain(n, n, s).save(tmp_path / f"{n}.json")) for n, s in (("a", 16), ("b", 24))]
    cluster = tmp_path / "c.yaml"
    cluster.write_text(yaml.safe_dump(CLUSTER))
    model = tmp_path / "ops.json"
    out = run_cli("costmodel", "ops", "train", *paths, "--cluster", str(cluster), "-o", str(model),
                  "--rounds", "20").stdout  # fmt: skip
    assert "wrote" in out and KIND in out and model.is_file()
    rows = json.loads(
        run_cli_here(
            "costmodel",
            "ops",
            "eval",
            *paths,
            "--cluster",
            str(cluster),
            "--model",
            str(model),
            "--json",
        ).stdout  # fmt: skip
    )
    assert [r["graph"] for r in rows] == ["a", "b"] and all(r["priced"] == 24 for r in rows)
    learned = tmp_path / "learned.yaml"
    learned.write_text(yaml.safe_dump({**CLUSTER, "op_times": "learned", "op_model": "ops.json"}))
    bare = chain("c", "c", 20).to_json_dict()
    bare["measured"] = {}
    (tmp_path / "c.json").write_text(json.dumps(bare))
    run_cli_here("simulate", str(tmp_path / "c.json"), "--cluster", str(learned), "--placement",
                 "single")  # fmt: skip


def test_bad_input_is_one_line_exit_2(tmp_path, run_cli_here):
    run_cli = run_cli_here  # refusals: in this process
    learned = tmp_path / "learned.yaml"
    learned.write_text(yaml.safe_dump({**CLUSTER, "op_times": "learned"}))
    graph = chain("a", "a", 16).save(tmp_path / "a.json")
    proc = run_cli("simulate", str(graph), "--cluster", str(learned), "--placement", "single",
                   check=False)  # fmt: skip
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "graphopt costmodel ops train" in proc.stderr
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps({"format": "graphopt-op-model", "version": 1,
                                 "op_feature_version": 0}))  # fmt: skip
    proc = run_cli("costmodel", "ops", "eval", str(graph), "--cluster", str(tmp_path / "x.yaml"),
                   "--model", str(stale), check=False)  # fmt: skip
    assert proc.returncode == 2  # the cluster file is missing
    learned.write_text(yaml.safe_dump(CLUSTER))
    proc = run_cli("costmodel", "ops", "eval", str(graph), "--cluster", str(learned), "--model",
                   str(stale), check=False)  # fmt: skip
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "op-feature version 0" in proc.stderr and "op-feature version 1" in proc.stderr


def test_eval_json_is_strict_json_a_missing_figure_null_with_its_reason(tmp_path, run_cli_here):
    """A model that prices none of a graph's ops: its errors are null, with a note (#40: the JSON
    held NaN)."""
    from dataclasses import replace

    from graphopt.costmodel.op_fit import fit_op_model
    from graphopt.hardware import Cluster

    cluster = tmp_path / "c.yaml"
    cluster.write_text(yaml.safe_dump(CLUSTER))
    graph = chain("a", "a", 16).save(tmp_path / "a.json")
    trained = fit_op_model([chain("b", "b", 24)], Cluster.from_dict(CLUSTER).devices, rounds=2)
    replace(trained, types=("conv",)).save(tmp_path / "m.json")  # no type of the graph's
    text = run_cli_here("costmodel", "ops", "eval", str(graph), "--cluster", str(cluster),
                        "--model", str(tmp_path / "m.json"), "--json").stdout  # fmt: skip

    def refuse(name: str):
        raise AssertionError(f"{name} in the JSON")

    (row,) = json.loads(text, parse_constant=refuse)
    assert row["priced"] == 0 and row["median_op_error"] is None and row["sum_error"] is None
    assert row["note"].startswith("the model prices none of the measured ops")


def test_eval_of_a_graph_measured_all_zero_says_so(tmp_path, run_cli_here):
    """#40: a graph whose measured times are all 0 was said to hold "no op type it knows"."""
    from graphopt.costmodel.op_fit import fit_op_model
    from graphopt.hardware import Cluster

    cluster = tmp_path / "c.yaml"
    cluster.write_text(yaml.safe_dump(CLUSTER))
    graph = chain("z", "z", 16)
    data = graph.to_json_dict()
    data["measured"] = {KIND: [0.0] * graph.num_ops}
    (tmp_path / "z.json").write_text(json.dumps(data))
    trained = fit_op_model([chain("b", "b", 24)], Cluster.from_dict(CLUSTER).devices, rounds=2)
    trained.save(tmp_path / "m.json")
    args = ["costmodel", "ops", "eval", str(tmp_path / "z.json"), "--cluster", str(cluster),
            "--model", str(tmp_path / "m.json")]  # fmt: skip
    (row,) = json.loads(run_cli_here(*args, "--json").stdout)
    assert row["note"] == "the graph has no measured times on this kind (all zero)"
    assert row["median_op_error"] is None and row["sum_error"] is None
    table = run_cli_here(*args).stdout
    assert f"z on {KIND}: the graph has no measured times on this kind (all zero)" in table
    assert "no op type it knows" not in table


def test_rounds_are_bounded_before_any_work(tmp_path, run_cli_here):
    """#40: ``--rounds 1000000000000`` was a traceback, ``--rounds 2000000000`` grew to 24 GB."""
    from graphopt.cli import costmodel_ops
    from graphopt.costmodel.op_fit import MAX_ROUNDS, fit_op_model
    from graphopt.errors import InvalidArgument

    assert costmodel_ops.MAX_ROUNDS == MAX_ROUNDS
    for rounds in ("0", "2000000000", "1000000000000", "many"):
        proc = run_cli_here("costmodel", "ops", "train", "missing.json", "--cluster",
                            "v100-nvlink-2", "-o", str(tmp_path / "m.json"), "--rounds", rounds,
                            check=False)  # fmt: skip
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
        assert f"--rounds: must be an integer in 1..{MAX_ROUNDS}" in proc.stderr
    assert list(tmp_path.iterdir()) == []
    help_text = run_cli_here("costmodel", "ops", "train", "--help", check=False).stdout
    assert f"1..{MAX_ROUNDS}" in help_text
    try:
        fit_op_model([chain("a", "a", 16)], [], rounds=MAX_ROUNDS + 1)
    except InvalidArgument as e:
        assert e.named({"rounds": "--rounds"}).startswith("--rounds must be an integer in 1..")
    else:  # pragma: no cover
        raise AssertionError("rounds above MAX_ROUNDS were taken")
