"""A step-wise policy trained on one model, reused on that model's variants (GO's fine-tuning
setting: train once per model, then run it at other batch sizes, image sizes and depths).

Usage: python bench/bench_stepwise_transfer.py [--bases SPEC] [--cluster C] [--calls K]
       [--train-calls T] [--updates U] [--seed S] [--no-network]

For each base graph (``--bases``: comma-separated ``gen:`` names, default :data:`BASES`), a fresh
:class:`policies.step_policy.StepPolicy` is trained on the base alone by expert iteration
(``algorithm: search``, as ``bench/bench_stepwise_per_graph.py --algorithm search``: ``U``
updates of ``T`` decoder-search calls each, the policy imitating the fastest placement found).
Then on each variant of the base (:func:`variants`: the batch halved and doubled, which keeps the
graph's ops and edges and changes their costs; and one architecture argument changed, which
changes the graph) the script prints, as speed-ups over the variant's own best heuristic:

- ``reused``: the base's best placement applied to the variant as it is where the variant has
  the base's ops and edges; on a variant of another depth, applied by op name (the ops the base
  does not have on the variant's best heuristic's devices, as they are or renumbered, the faster:
  ``graphopt optimize --start``'s rule; the share of the variant's ops named in brackets): what
  remembering the placement alone gives;
- ``reused+search``: the search below started from that placement (``graphopt optimize --start``
  with the base's decision file);
- ``greedy``: the trained policy's one greedy decode on the variant (one simulator call, no
  search: the zero-shot transfer);
- ``policy+search``: ``graphopt optimize``'s decoder search for ``K`` calls started from the
  policy's greedy placement (where it is faster than the best heuristic; the greedy decode's
  price is one of the ``K`` calls): fine-tuning's first step;
- ``search``: the same search from the best heuristic at the same ``K`` calls;
- ``annealing``: simulated annealing from the best heuristic at the same ``K`` calls.

With ``--no-network`` no policy is trained: the base's placement is the decoder search's at
``U * T`` calls, and the two policy columns are left out (``-``).

Targets read from it (issue #37): the network pays inside search (``policy+search`` >= ``search``
+ 2 points), and the zero-shot greedy decode >= 1.05x.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np
import torch
from bench_stepwise_per_graph import search_config

from graphopt.baselines.search import simulated_annealing
from graphopt.decisions.format import placement_by_names
from graphopt.decoders.stepwise import decode
from graphopt.optimizer import filled_placements, optimize_graph
from graphopt.train.step_run import build_items, resolve_clusters, resolve_run_graphs
from graphopt.train.stepwise import Item, geomean, greedy_speedups, train
from graphopt.typing import Decision
from graphopt.workloads import generated
from graphopt.workloads.distribution import architecture, spec_of

BASES = (
    "gen:rnnlm?batch=32&hidden=512&layers=2&steps=8&vocab=4000,"
    "gen:gnmt?batch=32&hidden=512&layers=2&src_len=4&tgt_len=4&vocab=4000,"
    "gen:inception?aux=0&batch=32&classes=100&image=128,"
    "gen:txl?batch=4&d_inner=1024&d_model=256&heads=4&layers=2&mem_len=64&segments=2&tgt_len=64"
)
"""Four models of the training families, 600-1,400 ops, whose best heuristic leaves room."""

STRUCTURE = {"rnnlm": ("steps", 2), "gnmt": ("layers", 1), "inception": ("image", 32)}
"""The architecture argument each family's third variant changes, and by how much (txl and
others: ``layers`` + 1)."""


def variants(base: str) -> list[tuple[str, str]]:
    """``(label, name)`` of the base's variants: batch / 2, batch * 2, and one architecture
    argument changed (:data:`STRUCTURE`)."""
    family = architecture(base)[0]
    values = generated.parse_name(base)[1]
    out = []
    for label, factor in (("batch / 2", 0.5), ("batch * 2", 2.0)):
        batch = max(1, int(values["batch"] * factor))
        out.append((label, spec_of(family, {**values, "batch": batch})))
    key, step = STRUCTURE.get(family.removeprefix("gen:"), ("layers", 1))
    out.append((f"{key} + {step}", spec_of(family, {**values, key: values[key] + step})))
    return out


def same_graph(a: Item, b: Item) -> bool:
    """Whether two items' graphs have the same ops in the same order and the same edges."""
    ga, gb = a.sg.graph, b.sg.graph
    return (
        ga.num_ops == gb.num_ops
        and np.array_equal(ga.edge_src, gb.edge_src)
        and np.array_equal(ga.edge_dst, gb.edge_dst)
    )


def speedup(item: Item, placement: np.ndarray) -> float:
    """``t_ref / t`` of one placement on the item (0 if invalid)."""
    m = item.prepared.evaluate_batch(placement[None, :])
    return float(item.reference_time / m.step_time[0]) if m.valid[0] else 0.0


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bases", default=BASES)
    ap.add_argument("--cluster", default="v100-nvlink-4")
    ap.add_argument("--calls", type=int, default=256, help="calls of the searches on a variant")
    ap.add_argument("--train-calls", type=int, default=1024, help="search calls per update")
    ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--no-network",
        action="store_true",
        help="no policy: the base's placement is the decoder search's at the training's calls "
        "(updates x train-calls); the greedy and policy+search columns are left out",
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    clusters = resolve_clusters(args.cluster)
    how = (
        f"the decoder search at {args.updates * args.train_calls} calls"
        if args.no_network
        else f"expert iteration ({args.updates} updates of {args.train_calls} calls)"
    )
    print(
        f"the base's placement by {how}, {args.cluster}, seed {args.seed}; on each variant the "
        f"searches at {args.calls} calls"
    )
    print(
        "| base | variant | ops | best heuristic | reused | reused+search | greedy "
        "| policy+search | search | annealing |"
    )
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    keys = ("reused+search", "greedy", "policy+search", "search", "annealing")
    cols: dict[str, list[float]] = {k: [] for k in keys}
    for base_name in (s.strip() for s in args.bases.split(",") if s.strip()):
        (base,) = build_items(resolve_run_graphs(base_name), clusters)
        start = time.perf_counter()
        policy = None
        if args.no_network:
            found = optimize_graph(
                base.sg.graph,
                base.sg.cluster,
                calls=args.updates * args.train_calls,
                seed=args.seed,
            )
            base.target = np.asarray(found.decision.placement, dtype=np.int64)
            base.target_return = float(np.log(found.speedup_over(base.reference_time)))
            own = ""
        else:
            # the per-graph table's settings: 2 samples a round, <= 1,000 passes, 14 frequencies
            config = search_config(args.updates, 2, args.train_calls, 1000, 14, args.seed)
            policy, _ = train([base], [], config)
            own = f"{greedy_speedups(policy, [base])[0]:.3f}x"
        family = architecture(base_name)[0]
        print(
            f"| {family} | the base itself ({time.perf_counter() - start:.0f} s) | "
            f"{base.sg.num_ops:,} | {base.reference_name} | {np.exp(base.target_return):.3f}x | "
            f"| {own} | | | |",
            flush=True,
        )
        for label, name in variants(base_name):
            (item,) = build_items(resolve_run_graphs(name), clusters)
            row = dict.fromkeys(keys, float("nan"))
            reused = "-"
            if same_graph(base, item):
                reused = f"{speedup(item, base.target):.3f}x"
                row["reused+search"] = seeded_search(item, base.target, args.calls, args.seed)
            else:  # another depth: the ops the base names, the rest on the best heuristic's
                devices = dict(zip(base.sg.graph.op_names, base.target.tolist(), strict=True))
                try:
                    mapped, named = placement_by_names(
                        base_name, devices, item.sg.graph, item.sg.num_devices
                    )
                except ValueError:
                    mapped, named = None, 0
                if mapped is not None:  # the faster of optimize --start's two fills
                    fills = filled_placements(mapped, item.sg.anchor, item.sg.cluster)
                    worths = [speedup(item, p) for p in fills]
                    mapped = fills[int(np.argmax(worths))]
                    reused = f"{max(worths):.3f}x ({named / item.sg.num_ops:.0%} named)"
                    row["reused+search"] = seeded_search(item, mapped, args.calls, args.seed)
            if policy is not None:
                with torch.no_grad():
                    head = policy.head_params(policy.embed(item.observation))
                greedy = decode(item.sg, "greedy", head).placement
                row["greedy"] = speedup(item, greedy)
                row["policy+search"] = seeded_search(item, greedy, args.calls, args.seed)
            row["search"] = optimize_graph(
                item.sg.graph, item.sg.cluster, calls=args.calls, seed=args.seed
            ).speedup_over(item.reference_time)
            result = simulated_annealing(
                item.sg.graph,
                item.sg.cluster,
                "placement",
                args.calls,
                args.seed,
                start=Decision(placement=item.sg.anchor.copy()),
            )
            m = result.measurement
            row["annealing"] = item.reference_time / m.step_time if m.valid else 0.0
            for key in keys:
                cols[key].append(row[key])
            shown = " | ".join("-" if np.isnan(row[k]) else f"{row[k]:.3f}x" for k in keys)
            print(
                f"| {family} | {label} | {item.sg.num_ops:,} | {item.reference_name} | {reused} "
                f"| {shown} |",
                flush=True,
            )
    means = {k: nan_geomean(np.array(v)) for k, v in cols.items()}
    print(
        "| geometric mean (variants) | | | | | "
        + " | ".join("-" if np.isnan(means[k]) else f"{means[k]:.3f}x" for k in keys)
        + " |"
    )
    search = np.array(cols["search"])
    for key in ("greedy", "policy+search", "reused+search"):
        v = np.array(cols[key])
        ok = ~np.isnan(v)
        if not ok.any():
            continue
        print(
            f"{key}: >= 1.05x on {(v[ok] >= 1.05).sum()} of {ok.sum()} variants, below 0.99x on "
            f"{(v[ok] < 0.99).sum()}; against the search from the best heuristic: ahead on "
            f"{(v[ok] > search[ok] + 1e-9).sum()}, behind on {(v[ok] < search[ok] - 1e-9).sum()}"
        )


def nan_geomean(values: np.ndarray) -> float:
    """The geometric mean of the values that are not NaN (NaN if none is)."""
    values = values[~np.isnan(values)]
    return geomean(values) if len(values) else float("nan")


def seeded_search(item: Item, placement: np.ndarray, calls: int, seed: int) -> float:
    """``graphopt optimize``'s search for ``calls`` calls from ``placement`` (where it is faster
    than the best heuristic; its price is one of the calls), as a speed-up over the best
    heuristic."""
    return optimize_graph(
        item.sg.graph,
        item.sg.cluster,
        calls=calls - 1,
        seed=seed,
        start=Decision(placement=placement),
        start_name="start",
    ).speedup_over(item.reference_time)


if __name__ == "__main__":
    main()
