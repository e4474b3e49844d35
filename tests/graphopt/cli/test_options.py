"""The shared options of graphopt.cli.options: every command that takes one refuses a bad value
of it in one line that names the flag (exit status 2), before any work."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from graphopt import cli, demo
from graphopt.cli import options

BAD = {
    "--cluster": ("v100x3", "unknown cluster preset 'v100x3'"),
    "--workers": ("0", "must be >= 1, got 0"),
    "--ray-address": ("nohost", "'nohost' is not HOST:PORT"),
    "--seed": ("-1", "must be an integer in 0..4294967295, got -1"),
    "--device": ("gpu", "'gpu' is unknown; use auto, cpu, cuda or cuda:N"),
    "--budget": ("-3", "must be >= 0, got -3"),
    "--estimate-budget": ("-2", "must be >= 0, got -2"),
    "--runs-dir": ("BLOCKED/runs", "is a file, not a directory"),
    "--curve-calls": ("0,lots", "budget 'lots' is not an integer"),
    "--curve-seconds": ("-1", "budget '-1' is not a positive number of seconds"),
    "--mode": ("best", "unknown --mode 'best'"),
    "--save-decisions": ("BLOCKED/dir", "is a file, not a directory"),
}
"""A bad value of every shared option, and what its one line says besides the flag."""

REQUIRED = {
    "graphopt simulate": ["simulate", "txl-tiny"],
    "graphopt optimize": [
        *("optimize", "txl-tiny", "--cluster", "v100-nvlink-2", "--calls", "8", "-o", "d.json")
    ],
    "graphopt calibrate": ["calibrate", "g.json", "-o", "c.yaml", "--cluster", "v100-nvlink-2"],
    "graphopt baselines": ["baselines", "txl-tiny"],
    "graphopt decision diff": ["decision", "diff", "a.json", "b.json"],
    "graphopt train": ["train"],
    "graphopt sweep": ["sweep"],
    "graphopt eval": ["eval", "RUN", "--graphs", "txl-tiny"],
    "graphopt stepwise train": ["stepwise", "train"],
    "graphopt stepwise eval": ["stepwise", "eval", "RUN", "--graphs", "txl-tiny"],
    "graphopt moves train": ["moves", "train", "--graphs", "txl-tiny", "-o", "m.pt"],
    "graphopt costmodel dataset": ["costmodel", "dataset", "--graphs", "txl-tiny", "--out", "d"],
    "graphopt costmodel train": ["costmodel", "train", "--data", "d"],
    "graphopt profile": ["profile", "torch:resnet18", "-o", "g.json"],
    "graphopt costmodel ops train": ["costmodel", "ops", "train", "g.json", "-o", "m.json"],
    "graphopt costmodel ops eval": ["costmodel", "ops", "eval", "g.json", "--model", "m.json"],
}
"""Each command with shared options, and the arguments it needs beside them."""


def leaf_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its ``prog``."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {parser.prog: parser}
    out = {}
    for choice in subs[0].choices.values():
        out.update(leaf_parsers(choice))
    return out


def shared_flags(parser: argparse.ArgumentParser) -> list[str]:
    """The shared options a parser was given (by their flags)."""
    given = {o for a in parser._actions for o in a.option_strings}
    return [flag for flag in BAD if flag in given and flag in _recorded(parser)]


def _recorded(parser: argparse.ArgumentParser) -> set[str]:
    return set((parser.get_default(options.FLAGS) or {}).values())


def cases() -> list[tuple[str, str]]:
    parsers = leaf_parsers(cli.build_parser())
    return [(prog, flag) for prog, p in parsers.items() for flag in shared_flags(p)]


def test_every_command_with_shared_options_is_walked() -> None:
    parsers = leaf_parsers(cli.build_parser())
    with_options = {prog for prog, p in parsers.items() if shared_flags(p)}
    assert with_options == set(REQUIRED), "add the new command's arguments to REQUIRED"
    assert {flag for _, flag in cases()} == set(BAD)  # every shared option is taken somewhere


@pytest.mark.parametrize(("command", "flag"), cases())
def test_a_bad_value_is_one_line_naming_the_flag(
    command: str, flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing may be written; relative paths land here
    (tmp_path / "BLOCKED").write_text("a file where a directory would go")
    value, says = BAD[flag]
    assert cli.main([*REQUIRED[command], flag, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("graphopt: error: "), err
    assert flag in err and says in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["BLOCKED"]


@pytest.mark.parametrize("flag", ["--budget", "--runs-dir"])
def test_the_demo_shares_the_options(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "BLOCKED").write_text("a file where a directory would go")
    value, says = BAD[flag]
    assert demo.main([flag, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("demo: error: ") and flag in err and says in err
    assert set(shared_flags(demo.build_parser())) == {"--budget", "--runs-dir"}


def test_a_value_argparse_refuses_is_one_line_too(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["baselines", "txl-tiny", "--workers", "many"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert "argument --workers: invalid int value: 'many'" in err and "--help" in err


def test_each_option_is_defined_once() -> None:
    root = Path(cli.__file__).parent
    for path in [*root.glob("*.py"), root.parent / "demo.py"]:
        if path.name != "options.py":
            text = re.sub(r"\s+", "", path.read_text())
            defined = [flag for flag in BAD if f'add_argument("{flag}"' in text]
            if path.name == "profile.py":  # its --mode is the graph's (training or forward)
                defined.remove("--mode")
            assert not defined, f"{path.name} defines {defined}: use graphopt.cli.options"


def test_checked_values_are_passed_down_resolved() -> None:
    from graphopt.hardware import Cluster

    parser = cli.build_parser("baselines")
    args = parser.parse_args(["baselines", "txl-tiny", "--cluster", "v100-nvlink-2"])
    options.check(args)
    assert isinstance(args.cluster, Cluster) and args.cluster.num_devices == 2
    assert args.curve_calls == (0, 16, 64, 256, 1024, 4096) and args.curve_seconds == (1, 10, 60)


def test_library_errors_name_arguments_not_flags() -> None:
    """Outside graphopt.cli (and the demo), a raised message names a flag only inside a command
    to run (``graphopt train --resume RUN``, ``ray start --head``)."""
    import ast

    root = Path(cli.__file__).parents[2]
    flag = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
    command = re.compile(r"(graphopt [a-z]+|ray start)( [^;()]*)?$")
    found = []
    for package in ("graphopt", "envs", "policies"):
        for path in sorted((root / package).rglob("*.py")):
            if "cli" in path.parts or path.name == "demo.py":
                continue
            source = path.read_text()
            if not flag.search(source):  # no flag anywhere in the file: none in a message
                continue  # (parsing every module is most of this test's time)
            for node in ast.walk(ast.parse(source)):
                if not isinstance(node, ast.Raise) or node.exc is None:
                    continue
                for text in (
                    c.value
                    for c in ast.walk(node.exc)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                ):
                    for m in flag.finditer(text):
                        if not command.search(text[: m.start()].rstrip()):
                            found.append(f"{path.relative_to(root)}:{node.lineno}: {m.group()}")
    assert not found, "name the argument (graphopt.errors.InvalidArgument):\n" + "\n".join(found)


def test_cluster_each_is_taken_by_baselines_and_eval_only(capsys: pytest.CaptureFixture[str]):
    from graphopt.workloads.clusters import EACH

    assert options.EACH == EACH
    for command in ("graphopt baselines", "graphopt eval"):
        args = cli.build_parser(command.split()[1]).parse_args(
            [*REQUIRED[command], "--cluster", EACH]
        )
        options.check(args)
        assert args.cluster == EACH  # left for the command: every graph's own
    assert cli.main(["simulate", "txl-tiny", "--cluster", EACH]) == 2
    assert "--cluster each: unknown cluster preset 'each'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["baselines", "txl-tiny", "--num-priorities", "0"],
            "must be an integer in 1..1000000, got 0",
        ),
        (
            ["baselines", "txl-tiny", "--exact-time-limit", "nan"],
            "must be a number in 0.001..86400, got 'nan'",
        ),
        (
            ["decision", "diff", "a.json", "b.json", "--limit", "x"],
            "must be an integer in 0..1000000, got 'x'",
        ),
        (
            ["costmodel", "dataset", "--graphs", "txl-tiny", "--out", "d", "--samples", "100001"],
            "must be an integer in 1..100000, got 100001",
        ),
        (
            ["costmodel", "train", "--data", "d", "--epochs", "1000001"],
            "must be an integer in 1..1000000, got 1000001",
        ),
        (
            ["costmodel", "train", "--data", "d", "--batch-size", "1"],
            "must be an integer in 2..4096, got 1",
        ),
        (
            ["costmodel", "train", "--data", "d", "--hidden", "1000000000"],
            "must be an integer in 1..4096, got 1000000000",
        ),
        (["costmodel", "train", "--data", "d", "--layers", "65"], "must be an integer in 0..64"),
        (["costmodel", "train", "--data", "d", "--lr", "inf"], "must be a number in (0, 10], got"),
        (["costmodel", "train", "--data", "d", "--lr", "0"], "must be a number in (0, 10], got"),
        (
            ["costmodel", "train", "--data", "d", "--test-fraction", "1"],
            "must be a number in (0, 1), got '1'",
        ),
        (
            ["costmodel", "train", "--data", "d", "--val-fraction", "nan"],
            "must be a number in (0, 1), got 'nan'",
        ),
        (
            ["costmodel", "train", "--data", "d", "--time-budget", "1e9"],
            "must be a number in (0, 2592000], got '1e9'",
        ),
        (
            ["costmodel", "eval", "RUN", "--data", "d", "--batch-size", "4097"],
            "must be an integer in 1..4096, got 4097",
        ),
        (
            ["profile", "torch:resnet18", "-o", "g.json", "--threads", "1025"],
            "must be an integer in 1..1024, got 1025",
        ),
        (
            ["profile", "torch:resnet18", "-o", "g.json", "--iterations", "0"],
            "must be an integer in 1..1000, got 0",
        ),
        (
            ["profile", "torch:resnet18", "-o", "g.json", "--warmup", "1001"],
            "must be an integer in 0..1000, got 1001",
        ),
        (
            [*REQUIRED["graphopt calibrate"], "--min-ops", "1000001"],
            "must be an integer in 1..1000000, got 1000001",
        ),
        (
            [*REQUIRED["graphopt calibrate"], "--min-sources", "0"],
            "must be an integer in 1..1000000, got 0",
        ),
        (["sweep", "--seeds", "1001"], "must be an integer in 1..1000, got 1001"),
    ],
)
def test_numeric_options_are_refused_outside_their_range_before_any_work(
    args, message, capsys, tmp_path, monkeypatch
):
    """A numeric option of one command takes its range as its type (options.integer, number):
    one line naming the flag, exit 2, nothing written; the range is in its help."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        cli.main(args)
    err = capsys.readouterr().err.strip()
    flag = [a for a in args if a.startswith("--")][-1]
    assert info.value.code == 2 and "\n" not in err and f"argument {flag}: {message}" in err
    assert list(tmp_path.iterdir()) == []
    parser = leaf_parsers(cli.build_parser())[
        f"graphopt {' '.join(args[: 2 if args[0] in ('decision', 'costmodel') else 1])}"
    ]
    help_text = re.sub(r"\s+", " ", parser.format_help())
    shown = message.split(" in ")[1].split(", got")[0]
    assert shown.split(",")[0] in help_text if ".." in shown else shown in help_text


def test_integer_and_number_types():
    assert options.integer(1, 3)("2") == 2 and options.number(0, 1)("0.5") == 0.5
    for parse, text in ((options.integer(1, 3), "4"), (options.number(0, 1), "inf")):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)


@pytest.mark.parametrize(
    ("above", "below", "taken", "refused", "shown"),
    [
        (False, False, ["0", "1", "0.5"], ["-0.1", "1.1", "nan", "x"], "0..1"),
        (True, False, ["1", "1e-300"], ["0", "-1", "inf"], "(0, 1]"),
        (False, True, ["0"], ["1", "-inf"], "[0, 1)"),
        (True, True, ["0.5"], ["0", "1", "nan"], "(0, 1)"),
    ],
)
def test_number_ends_may_be_open(above, below, taken, refused, shown):
    parse = options.number(0, 1, above=above, below=below)
    assert options.span(0, 1, above=above, below=below) == shown
    for text in taken:
        assert parse(text) == float(text)
    for text in refused:
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"in {shown}, got")):
            parse(text)


def test_a_range_writes_whole_numbers_in_full():
    assert options.span(0.001, 86_400) == "0.001..86400"
    assert options.span(0, 30 * 86_400, above=True) == "(0, 2592000]"
