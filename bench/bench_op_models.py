"""LightGBM against a small MLP as the per-op runtime model, leaving one model family out.

For every family of the measured graphs in ``--data`` (``bench_profile.py`` writes them): fit on
the other families, on the device calibrated on them (:mod:`graphopt.sim.calibrate`), and predict
the family's graphs; an op the model does not price keeps the calibrated roofline. Both models
read the same features (:func:`graphopt.op_model.op_features`) and the same target (log of the
time over the roofline plus the overhead), with the same weights:

- ``lightgbm``: :func:`graphopt.costmodel.op_fit.fit_op_model`, what ``op_times: learned`` uses;
- ``mlp``: two hidden ReLU layers of ``--hidden`` units over the standardised numeric features
  (missing ones 0, with a missing flag each) and embeddings of the op type (8) and class (4);
  Adam, full batch, ``--epochs`` steps, weight decay 1e-4, seeded; an unmeasured type keeps the
  roofline.

Printed: the median and worst absolute error of the eager step (sum of op times, one device, as
``bench_profile`` reports it), of the sum of the measured ops, and the median per-op error.

Run: ``python bench/bench_op_models.py [--data DIR] [--hidden 64] [--epochs 400] [--seed 0]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from graphopt.costmodel.op_fit import fit_op_model, op_rows
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, Device
from graphopt.op_model import FEATURES, op_features, roofline_seconds
from graphopt.sim.calibrate import calibrate, source_of

NUMERIC = list(range(2, len(FEATURES)))


def standardise(x: np.ndarray, stats: tuple[np.ndarray, np.ndarray] | None = None) -> tuple:
    values = x[:, NUMERIC]
    if stats is None:
        mean = np.nan_to_num(np.nanmean(values, axis=0))
        std = np.nan_to_num(np.nanstd(values, axis=0), nan=1.0) + 1e-6
        stats = (mean, std)
    missing = np.isnan(values).astype(np.float32)
    scaled = np.nan_to_num((values - stats[0]) / stats[1]).astype(np.float32)
    return np.concatenate([scaled, missing], axis=1), stats


class MLP(torch.nn.Module):
    def __init__(self, inputs: int, types: int, classes: int, hidden: int) -> None:
        super().__init__()
        self.op_type = torch.nn.Embedding(types + 1, 8)  # the last code: a type never measured
        self.cls = torch.nn.Embedding(classes, 4)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(inputs + 12, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, 1),
        )

    def forward(self, x: torch.Tensor, t: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, self.op_type(t), self.cls(c)], dim=1)).squeeze(1)


def mlp_predictor(others: list[CompGraph], device: Device, args: argparse.Namespace):  # noqa: ANN201
    types = sorted({t for g in others for t in g.op_types})
    classes = sorted({c for g in others for c in g.op_classes})
    codes = {t: i for i, t in enumerate(types)}, {c: i for i, c in enumerate(classes)}
    rows = op_rows(others, [device], *codes)
    x, stats = standardise(rows.x)
    target = torch.tensor(np.log(rows.seconds / rows.base), dtype=torch.float32)
    weight = torch.tensor(np.sqrt(rows.seconds / rows.seconds.mean()), dtype=torch.float32)
    torch.manual_seed(args.seed)
    model = MLP(x.shape[1], len(types), len(classes), args.hidden)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    inputs = torch.tensor(x)
    t = torch.tensor(rows.x[:, 0], dtype=torch.long)
    c = torch.tensor(rows.x[:, 1], dtype=torch.long)
    for _ in range(args.epochs):
        opt.zero_grad()
        loss = (weight * (model(inputs, t, c) - target) ** 2).mean()
        loss.backward()
        opt.step()

    def predict(graph: CompGraph) -> np.ndarray:
        feats = op_features(graph, device, *codes)
        xg, _ = standardise(feats, stats)
        tg = torch.tensor(np.nan_to_num(feats[:, 0], nan=len(types)), dtype=torch.long)
        cg = torch.tensor(np.nan_to_num(feats[:, 1], nan=0), dtype=torch.long)
        with torch.no_grad():
            ratio = model(torch.tensor(xg), tg, cg).numpy()
        out = np.exp(ratio) * (roofline_seconds(graph, device) + device.launch_overhead)
        out[np.isnan(feats[:, 0])] = np.nan
        return out

    return predict


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--data", type=Path, default=Path(__file__).parent / "data" / "profile-cpu-amd-epyc-t1"
    )
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--epochs", type=int, default=400)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)
    base = Cluster.load(args.data / "cluster.yaml").devices[0]
    graphs = [CompGraph.load(path) for path in sorted(args.data.glob("*.json.gz"))]
    results: dict[str, dict[str, list]] = {
        name: {"step": [], "sum": [], "op": []} for name in ("lightgbm", "mlp")
    }
    for family in sorted({source_of(g) for g in graphs}):
        others = [g for g in graphs if source_of(g) != family]
        device = calibrate(others, base).device
        booster = fit_op_model(others, [device])
        predictors = {
            "lightgbm": lambda g, d=device, m=booster: m.predict(g, d),
            "mlp": mlp_predictor(others, device, args),
        }
        for graph in (g for g in graphs if source_of(g) == family):
            times = graph.measured[base.kind]
            measured = np.isfinite(times)
            compute, memory = device.op_efficiency(graph.op_types, graph.op_classes)
            roofline = device.roofline_time(graph.flops, graph.bytes_accessed, compute, memory)
            eager = graph.metadata["profile"]["eager_seconds"]
            for name, predict in predictors.items():
                predicted = predict(graph)
                full = np.where(np.isnan(predicted), roofline, predicted)
                out = results[name]
                out["step"].append(full.sum() / eager - 1)
                out["sum"].append(full[measured].sum() / times[measured].sum() - 1)
                out["op"].append(np.abs(full[measured] / times[measured] - 1))
    print(f"{'model':<10}{'eager step |err|':>20}{'sum of ops |err|':>20}{'per-op |err|':>14}")
    for name, out in results.items():
        step, total = np.abs(out["step"]), np.abs(out["sum"])
        print(
            f"{name:<10}{np.median(step):>10.1%} / {step.max():<6.1%}"
            f"{np.median(total):>11.1%} / {total.max():<6.1%}"
            f"{np.median(np.concatenate(out['op'])):>12.1%}"
        )


if __name__ == "__main__":
    main()
