"""Learned cost model: ranking quality on TpuGraphs and on held-out simulator graphs, and speed.

Usage:
    python bench/bench_costmodel.py tpugraphs [--budget SECONDS] [--loss NAME]
    python bench/bench_costmodel.py tpugraphs-shapes [--budget SECONDS] [--loss NAME]
    python bench/bench_costmodel.py sim [--samples K] [--budget SECONDS] [--loss NAME]

``tpugraphs``: the real TpuGraphs layout sample (``graphopt/data/tpugraphs``), configurations
split at random 80/20 (seed 0), and a second split that keeps every copy of a configuration on one
side (the file repeats many configurations: a random split puts copies of half the test set in the
training set). For each split: the GNN (trained for ``--budget`` seconds) and gradient-boosted trees
on the flattened configuration features; Kendall's tau, ordered-pair accuracy and top-K error on
the test configurations.

``tpugraphs-shapes``: the same two splits, gradient-boosted trees on the configuration features,
on them plus the shape-aware features of :mod:`graphopt.costmodel.layout_shapes` (each tensor's
minor-most and second-minor sizes under the configured layout and its (8, 128) tile padding, and
totals per configuration), and on the shape-aware features alone; then, unless ``--budget 0``, the
GNN with and without them (the per-node shape features appended to each node's configuration
features, signed-log scaled).

``sim``: decisions sampled on the ``default`` suite and five more random DAGs, measured by the simulator train the GNN;
it is scored against the simulator on the held-out families of ``heldout-small`` (wavenet,
amoebanet: never seen in training), and on 128 fresh decisions of each training graph (new
decisions, known graphs: how well the model fits its own distribution). Beside it: the analytic
estimate max(busiest device, critical path, busiest link), the list schedule in topological order
(:func:`graphopt.costmodel.features.path_lengths`), the contention-aware insertion schedule
(:func:`graphopt.costmodel.features.contention_schedule`: the network's prior, which it
corrects), gradient-boosted trees on the summary features, and the same trees fitting a
correction to the prior; on the new decisions of the training graphs, the prior alone beside the
network. Then scoring throughput, decisions per second,
of the learned model (batched) and of the simulator on the same decisions.

Every figure comes from runs in this process; one torch thread.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from graphopt.costmodel import data
from graphopt.costmodel.features import PRIOR, SUMMARY_FEATURES
from graphopt.costmodel.fit import feature_layout, fit, net_layout, predict
from graphopt.costmodel.gbdt import GBDTRanker, layout_features
from graphopt.costmodel.layout_shapes import PER_TENSOR, TENSORS, TOTALS, shape_layout_features
from graphopt.costmodel.metrics import grouped_report, kendall_tau, ranking_report
from graphopt.costmodel.model import CostNet, log_seconds
from graphopt.costmodel.noise import noise_ceiling_tau, relative_noise, repeat_groups, repeat_tau
from graphopt.costmodel.tpugraphs import load_tpugraphs
from graphopt.data import TPUGRAPHS_SAMPLE

TRAIN_GRAPHS = [
    "suite:default",
    "random-layered-300-s10",
    "random-layered-800-s11",
    "random-sp-400-s12",
    "random-sp-700-s13",
    "random-layered-1500-s14",
]


def _row(name: str, report: dict[str, float], extra: str = "") -> None:
    print(
        f"  {name:<34} tau {report['kendall_tau']:6.3f}  OPA {report['opa']:.3f}  "
        f"top-1 {report['top1_error']:7.2%}  top-5 {report['top5_error']:7.2%}  "
        f"top-10 {report['top10_error']:7.2%}  {extra}"
    )


def _repeated_row(pred: np.ndarray, runtime: np.ndarray, repeated: np.ndarray) -> None:
    tau = kendall_tau(pred[repeated], runtime[repeated])
    print(f"    same, on the configurations measured more than once: tau {tau:.3f}")


def _net(samples: list[data.GraphSamples]) -> CostNet:
    return CostNet(net_layout(feature_layout(samples)))


def _unique_split(groups: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """80/20 split of distinct configurations; all copies of one go to the same side."""
    distinct = int(groups.max()) + 1
    test_ids = np.random.default_rng(seed).permutation(distinct)[: int(0.2 * distinct)]
    test = np.isin(groups, test_ids)
    return np.flatnonzero(~test), np.flatnonzero(test)


def _tpugraphs_splits(
    num_configs: int, groups: np.ndarray
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The two TpuGraphs splits: random 80/20 (seed 0), and 80/20 of distinct configurations."""
    perm = np.random.default_rng(0).permutation(num_configs)
    cut = int(0.8 * num_configs)
    return {
        "random 80/20": (np.sort(perm[:cut]), np.sort(perm[cut:])),
        "distinct configurations 80/20": _unique_split(groups),
    }


def bench_tpugraphs(budget: float, loss: str) -> None:
    samples = data.load_dataset(TPUGRAPHS_SAMPLE)[0]
    feat = samples.configs.features(np.arange(samples.num_configs))
    groups = repeat_groups(feat)
    print(
        f"TpuGraphs {samples.name}: {samples.num_nodes} nodes, {samples.num_configs:,} "
        f"configurations, {len(samples.config_node_ids)} configurable nodes"
    )
    splits = _tpugraphs_splits(samples.num_configs, groups)
    sigma = relative_noise(samples.runtime, groups)
    repeated_configs = int(np.count_nonzero(np.bincount(groups) > 1))
    median_gap = np.median(samples.runtime) / samples.runtime.min() - 1
    print(
        f"measurement noise: {repeated_configs:,} of {groups.max() + 1:,} distinct configurations "
        f"are measured more than once, and their copies differ by {sigma:.4%} (relative std); "
        f"the median configuration is {median_gap:.3%} slower than the fastest"
    )
    for split, (tr, te) in splits.items():
        print(f"split {split}: {len(tr):,} train, {len(te):,} test")
        train, test = samples.subset(tr), samples.subset(te)
        ceiling = np.mean(
            [noise_ceiling_tau(samples.runtime, groups, te, sigma, seed=k) for k in range(3)]
        )
        repeated, again = repeat_tau(samples.runtime, groups, te)
        print(
            f"  a perfect model (true means) against these noisy measurements: tau ~{ceiling:.3f}; "
            f"on the {np.count_nonzero(repeated):,} test configurations measured more than once, "
            f"measuring again (mean of the other copies): tau {again:.3f}"
        )
        t0 = time.perf_counter()
        gbdt = GBDTRanker().fit(layout_features(feat[tr]), train.runtime)
        fit_s = time.perf_counter() - t0
        pred = gbdt.predict(layout_features(feat[te]))
        _row("gradient-boosted trees", ranking_report(pred, test.runtime), f"fit {fit_s:.0f} s")
        _repeated_row(pred, test.runtime, repeated)
        net = _net([train])
        t0 = time.perf_counter()
        history = fit(
            net, [train], None, loss=loss, epochs=1000, batch_size=64, lr=1e-3, time_budget=budget
        )
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        pred = predict(net, test)
        rate = test.num_configs / (time.perf_counter() - t0)
        _row(
            f"GNN ({loss}, {len(history)} epochs)",
            ranking_report(pred, test.runtime),
            f"fit {fit_s:.0f} s, scores {rate:,.0f} configs/s",
        )
        _repeated_row(pred, test.runtime, repeated)


def bench_tpugraphs_shapes(budget: float, loss: str) -> None:
    """LightGBM (and the GNN, if ``budget > 0``) with and without the shape-aware features."""
    layout = load_tpugraphs(TPUGRAPHS_SAMPLE)
    samples = data.from_layout(layout)
    groups = repeat_groups(layout.config_feat)
    t0 = time.perf_counter()
    shapes, names = shape_layout_features(layout)
    print(
        f"TpuGraphs {layout.name}: {len(names)} shape-aware features per configuration "
        f"({len(layout.config_node_ids)} configurable nodes x {len(TENSORS)} tensors x "
        f"{len(PER_TENSOR)}, and {len(TOTALS)} totals) in {time.perf_counter() - t0:.1f} s"
    )
    truth = layout.runtime
    for name in TOTALS:
        tau = kendall_tau(shapes[:, names.index(name)], truth)
        print(f"  {name} alone, all configurations: tau {tau:6.3f}")
    flat = layout_features(layout.config_feat)
    inputs = {
        "config features": flat,
        "config + shape features": np.concatenate([flat, shapes], axis=1),
        "shape features alone": shapes,
    }
    per_node = shapes[:, : -len(TOTALS)].reshape(
        layout.num_configs, layout.config_feat.shape[1], -1
    )
    with_shapes = replace(
        samples,
        configs=data.ArrayConfigs(
            np.concatenate([layout.config_feat, data.signed_log(per_node)], axis=2)
        ),
    )
    for split, (tr, te) in _tpugraphs_splits(layout.num_configs, groups).items():
        print(f"split {split}: {len(tr):,} train, {len(te):,} test")
        for label, x in inputs.items():
            t0 = time.perf_counter()
            gbdt = GBDTRanker().fit(x[tr], truth[tr])
            fit_s = time.perf_counter() - t0
            _row(
                f"LightGBM, {label}",
                ranking_report(gbdt.predict(x[te]), truth[te]),
                f"fit {fit_s:.0f} s, {x.shape[1]} columns",
            )
        if budget <= 0:
            continue
        for label, source in (("config features", samples), ("+ shape features", with_shapes)):
            torch.manual_seed(0)
            train, test = source.subset(tr), source.subset(te)
            net = _net([train])
            t0 = time.perf_counter()
            history = fit(
                net,
                [train],
                None,
                loss=loss,
                epochs=1000,
                batch_size=64,
                lr=1e-3,
                time_budget=budget,
            )
            fit_s = time.perf_counter() - t0
            _row(
                f"GNN, {label} ({len(history)} ep.)",
                ranking_report(predict(net, test), test.runtime),
                f"fit {fit_s:.0f} s",
            )


def _graph_relative(samples: list[data.GraphSamples]) -> tuple[np.ndarray, np.ndarray]:
    x = np.concatenate([s.configs.summary(np.arange(s.num_configs)) for s in samples])
    y = np.concatenate([np.log(s.runtime) - np.log(s.runtime).mean() for s in samples])
    return x, y


def bench_sim(samples_per_graph: int, budget: float, loss: str) -> None:
    from graphopt.hardware import get_cluster
    from graphopt.sim import PreparedGraph
    from graphopt.workloads.registry import resolve_graphs

    cluster = get_cluster("v100-nvlink-4")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        data.generate(
            resolve_graphs(TRAIN_GRAPHS),
            cluster,
            Path(tmp) / "train",
            samples=samples_per_graph,
            seed=0,
            progress=False,
        )
        data.generate(
            resolve_graphs(["suite:heldout-small"]),
            cluster,
            Path(tmp) / "test",
            samples=256,
            seed=1,
            progress=False,
        )
        data.generate(
            resolve_graphs(TRAIN_GRAPHS),
            cluster,
            Path(tmp) / "fresh",
            samples=128,
            seed=7,
            progress=False,
        )
        train = data.load_dataset(Path(tmp) / "train")
        test = data.load_dataset(Path(tmp) / "test")
        fresh = data.load_dataset(Path(tmp) / "fresh")
    print(
        f"simulator data on {cluster.name}: {sum(s.num_configs for s in train):,} valid decisions "
        f"on {len(train)} training graphs, {sum(s.num_configs for s in test):,} on "
        f"{len(test)} held-out graphs ({', '.join(s.name for s in test)}); "
        f"{time.perf_counter() - t0:.0f} s to sample and simulate"
    )
    groups = np.concatenate([np.full(s.num_configs, i) for i, s in enumerate(test)])
    truth = np.concatenate([s.runtime for s in test])
    summary = np.concatenate([s.configs.summary(np.arange(s.num_configs)) for s in test])
    analytic = summary[:, SUMMARY_FEATURES.index("analytic")]
    _row("analytic max(load, path, link)", grouped_report(analytic, truth, groups))
    listed = summary[:, SUMMARY_FEATURES.index("list_schedule")]
    _row("list schedule, topological order", grouped_report(listed, truth, groups))
    booked = summary[:, SUMMARY_FEATURES.index("contention_schedule")]
    _row("insertion schedule w. contention", grouped_report(booked, truth, groups))
    x, y = _graph_relative(train)
    gbdt = GBDTRanker(n_estimators=300).fit(x, np.exp(y))
    _row("gradient-boosted trees (summary)", grouped_report(gbdt.predict(summary), truth, groups))
    # the same trees fitting the log-correction to the prior, as the network does
    prior_train = log_seconds(torch.as_tensor(x[:, SUMMARY_FEATURES.index(PRIOR)])).numpy()
    prior_test = log_seconds(torch.as_tensor(summary[:, SUMMARY_FEATURES.index(PRIOR)])).numpy()
    runtime = np.concatenate([s.runtime for s in train])
    residual = GBDTRanker(n_estimators=300).fit(x, runtime / np.exp(prior_train))
    _row(
        "  same, correcting the prior",
        grouped_report(residual.predict(summary) + prior_test, truth, groups),
    )
    net = _net(train)
    t0 = time.perf_counter()
    history = fit(
        net, train, None, loss=loss, epochs=1000, batch_size=32, lr=2e-3, time_budget=budget
    )
    fit_s = time.perf_counter() - t0
    pred = np.concatenate([predict(net, s) for s in test])
    _row(
        f"GNN ({loss}, {len(history)} epochs)",
        grouped_report(pred, truth, groups),
        f"fit {fit_s:.0f} s",
    )
    for s in test:
        _row(f"  {s.name} ({s.num_nodes} ops)", ranking_report(predict(net, s), s.runtime))
    fresh_groups = np.concatenate([np.full(s.num_configs, i) for i, s in enumerate(fresh)])
    fresh_prior = [
        s.configs.summary(np.arange(s.num_configs))[:, SUMMARY_FEATURES.index(PRIOR)] for s in fresh
    ]
    _row(
        "prior, new decisions on training graphs",
        grouped_report(
            np.concatenate(fresh_prior), np.concatenate([s.runtime for s in fresh]), fresh_groups
        ),
    )
    _row(
        "GNN, new decisions on training graphs",
        grouped_report(
            np.concatenate([predict(net, s) for s in fresh]),
            np.concatenate([s.runtime for s in fresh]),
            fresh_groups,
        ),
    )

    # ---- throughput: the same 256 decisions through the learned model and the simulator
    from graphopt.costmodel.learned import LearnedCostModel

    model = LearnedCostModel(net)
    for name in ("wavenet-2", "random-layered-5000-s1"):
        graph = resolve_graphs([name])[0]
        rng = np.random.default_rng(0)
        place, prio, fuse = data.sample_decisions(graph, cluster, 256, rng)
        model.predict_batch(graph, cluster, place[:2])  # warm-up (caches, JIT)
        t0 = time.perf_counter()
        model.predict_batch(graph, cluster, place, prio, fuse)
        learned = 256 / (time.perf_counter() - t0)
        prepared = PreparedGraph(graph, cluster)
        prepared.evaluate_batch(place[:2], prio[:2], fuse[:2])
        t0 = time.perf_counter()
        prepared.evaluate_batch(place, prio, fuse)
        simulated = 256 / (time.perf_counter() - t0)
        print(
            f"  throughput on {name} ({graph.num_ops:,} ops): learned {learned:,.0f} decisions/s, "
            f"simulator {simulated:,.0f} decisions/s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("part", choices=["tpugraphs", "tpugraphs-shapes", "sim"])
    parser.add_argument(
        "--budget", type=float, default=240.0, help="GNN training seconds (0: no GNN)"
    )
    parser.add_argument(
        "--loss", default=None, help="training loss (default: listmle for tpugraphs, mse for sim)"
    )
    parser.add_argument("--samples", type=int, default=512, help="decisions per training graph")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if args.part == "tpugraphs":
        bench_tpugraphs(args.budget, args.loss or "listmle")
    elif args.part == "tpugraphs-shapes":
        bench_tpugraphs_shapes(args.budget, args.loss or "listmle")
    else:
        bench_sim(args.samples, args.budget, args.loss or "mse")


if __name__ == "__main__":
    main()
