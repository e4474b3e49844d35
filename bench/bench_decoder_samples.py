"""The one-pass decoder policy trained the way Jeon et al. (ICLR 2023) train one-pass priorities
for list scheduling: many samples per graph, the step time standardised within each graph
(:mod:`graphopt.train.one_pass`); then zero-shot on unseen graphs.

Usage:
    python bench/bench_decoder_samples.py train --config graphopt/configs/decoder-samples.yaml
        [--graphs SPEC] [--updates U] [--minutes M] [--seed S] [--name NAME] [--anchor false]
    python bench/bench_decoder_samples.py eval RUN --graphs suite:family-test
        [--methods greedy,sample:16,sample:64] [--max-ops 1400] [--prefix gen:] [--clusters C]

``train`` writes ``runs/placement-one-pass/<name>_<k>/`` (``config.yaml``, ``progress.jsonl``,
``policy.pt``, ``best.pt``). ``eval`` prints, per graph, the speed-up over the best heuristic of
``greedy`` (one decode of the mean action) and ``sample:K`` (the fastest of the greedy decode
and ``K - 1`` sampled ones), with the geometric mean; ``--max-ops`` leaves out larger graphs and
``--prefix`` graphs of other sources.
The config file holds ``graphs``, ``val_graphs``, ``clusters``, ``name`` and any field of
:class:`graphopt.train.one_pass.OnePassConfig`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from graphopt import rundir
from graphopt.eval.stepwise import Row, table
from graphopt.train.one_pass import (
    OnePassConfig,
    best_of,
    load_checkpoint,
    make_item,
    train,
)
from graphopt.train.step_run import resolve_clusters, resolve_run_graphs

RUN_KEYS = {"graphs": "suite:train-gen-small", "val_graphs": "", "clusters": "v100-nvlink-4"}
RUN_KEYS["name"] = "one-pass"
TRAIN_KEYS = {f.name for f in dataclasses.fields(OnePassConfig)}


def load(path: str, overrides: dict[str, object]) -> tuple[dict[str, str], OnePassConfig]:
    """The run keys and the training configuration of a YAML file with ``overrides``."""
    values = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(values, dict):
        raise ValueError(f"config file {path} must hold a mapping of keys")
    values.update({k: v for k, v in overrides.items() if v is not None})
    unknown = sorted(set(values) - set(RUN_KEYS) - TRAIN_KEYS)
    if unknown:
        known = ", ".join([*RUN_KEYS, *sorted(TRAIN_KEYS)])
        raise ValueError(f"unknown config key(s) {', '.join(unknown)}; known: {known}")
    run = {k: str(values.get(k, v)) for k, v in RUN_KEYS.items()}
    config = OnePassConfig(**{k: v for k, v in values.items() if k in TRAIN_KEYS}).validate()
    return run, config


def items_of(graphs: str, clusters: str, max_ops: int = 0, prefix: str = "") -> list:
    found = [
        g
        for g in resolve_run_graphs(graphs)
        if (not max_ops or g.num_ops <= max_ops) and g.name.startswith(prefix)
    ]
    return [make_item(g, c) for c in resolve_clusters(clusters) for g in found]


def cmd_train(args: argparse.Namespace) -> int:
    overrides = {"graphs": args.graphs, "name": args.name, "updates": args.updates}
    overrides["seed"] = args.seed
    overrides["anchor"] = None if args.anchor is None else args.anchor == "true"
    if args.minutes is not None:
        overrides["max_seconds"] = 60.0 * args.minutes
    run, config = load(args.config, overrides)
    start = time.perf_counter()
    items = items_of(run["graphs"], run["clusters"])
    val = items_of(run["val_graphs"], run["clusters"]) if run["val_graphs"] else []
    out = rundir.new_run_dir(args.runs_dir, "placement-one-pass", run["name"], checkpoints=False)
    dump = {**run, **dataclasses.asdict(config)}
    (out / "config.yaml").write_text(yaml.safe_dump(dump, sort_keys=False))
    print(
        f"run: {out} ({len(items)} training and {len(val)} validation graphs, set-up "
        f"{time.perf_counter() - start:.1f} s)",
        flush=True,
    )

    def show(row: dict[str, float]) -> None:
        if "val/speedup" in row:
            print(f"update {int(row['update'])}: validation {row['val/speedup']:.4f}x", flush=True)
        elif int(row["update"]) % 10 == 0:
            print(
                f"update {int(row['update'])}: samples {row['train/speedup']:.4f}x, best sample "
                f"{row['train/best_sample']:.4f}x, released {row['train/released']:.4f}, "
                f"{row['seconds']:.0f} s",
                flush=True,
            )

    try:
        train(items, val, config, out_dir=out, log=show)
    except KeyboardInterrupt:
        print(f"interrupted: {out / 'policy.pt'} holds the weights so far", file=sys.stderr)
        return 130
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    policy, settings = load_checkpoint(args.run)
    if args.anchor is not None:  # checkpoints written before they recorded their settings
        settings = dataclasses.replace(settings, anchor=args.anchor == "true")
    budgets = []
    for part in args.methods.split(","):
        kind, _, k = part.partition(":")
        if kind not in ("greedy", "sample") or (kind == "sample") != k.isdigit():
            raise ValueError(f"unknown method {part!r}; choose greedy or sample:K")
        budgets.append((part, int(k) if k else 1))
    rows = []
    for item in items_of(args.graphs, args.clusters, args.max_ops, args.prefix):
        g = item.graph
        row = Row(g.name, item.cluster.name, g.num_ops, item.reference_name, item.reference_time)
        for label, budget in budgets:
            placement, speedup = best_of(policy, item, budget, seed=args.seed, settings=settings)
            row.speedup[label], row.placement[label] = speedup, placement
        rows.append(row)
        print(f"{g.name}: " + ", ".join(f"{k} {v:.4f}" for k, v in row.speedup.items()), flush=True)
    print("\n".join(table(rows)))
    wins = {k: int(np.sum([r.speedup[k] > 1.0005 for r in rows])) for k in row.speedup}
    print(f"graphs above the best heuristic by more than 0.05%: {wins} of {len(rows)}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    verbs = ap.add_subparsers(dest="verb", required=True)
    t = verbs.add_parser("train")
    t.add_argument("--config", required=True)
    t.add_argument("--graphs")
    t.add_argument("--name")
    t.add_argument("--updates", type=int)
    t.add_argument("--minutes", type=float, help="stop after this much training time")
    t.add_argument("--seed", type=int)
    t.add_argument("--anchor", choices=("true", "false"), help="override the config's anchor")
    t.add_argument("--runs-dir", default="runs")
    t.set_defaults(func=cmd_train)
    e = verbs.add_parser("eval")
    e.add_argument("run", help="a run directory (its best.pt) or a .pt file")
    e.add_argument("--graphs", default="suite:family-test")
    e.add_argument("--clusters", default="v100-nvlink-4")
    e.add_argument("--methods", default="greedy,sample:16,sample:64")
    e.add_argument("--max-ops", type=int, default=0, help="leave out larger graphs (0: none)")
    e.add_argument("--prefix", default="", help="only graphs whose name starts so, e.g. gen:")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--anchor", choices=("true", "false"), help="override the run's anchor")
    e.set_defaults(func=cmd_eval)
    args = ap.parse_args()
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
