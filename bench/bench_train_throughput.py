"""Training throughput of every policy: graphs/s and op decisions/s of rollouts, of updates, and
end to end; and the start-up of a fresh step-wise training run.

Usage: python bench/bench_train_throughput.py [--ops 1000] [--graphs 8] [--updates 6]
       [--threads 2] [--device cpu|cuda|auto] [--skip-one-shot] [--skip-startup]
       [--skip-stepwise] [--skip-moves]

``--device`` is where the encoders and the updates compute (the step-wise decoder and its head
always run on the CPU, one core); ``cuda`` is the GPU bench (``bench/gpu_train.sh``).

Step-wise policy (:mod:`graphopt.train.stepwise`), on ``--graphs`` random graphs of ``--ops`` ops
(``gen:layered`` and ``gen:sp``, alternating) on ``v100-nvlink-4``, at the training defaults
(8 graphs an update, 16 samples a graph, 2 epochs of 4 minibatches), for each encoder (``go``:
GraphSAGE + segment attention + FiLM; ``mlp``):

- rollouts: the encoder once per graph, 16 decodes each with the head inside the compiled loop,
  and the simulator pricing the 16 placements at once;
- updates: PPO's passes over the recorded steps (the encoder once per graph and minibatch);
- end to end: :func:`graphopt.train.stepwise.train` for ``--updates`` updates, wall clock
  (rollouts, updates and the bookkeeping between them; no validation).

Target (issue #37): end to end >= 20,000 op decisions/s for the GO encoder on 1,000-op graphs on
2 cores.

One-shot GO policy (``graphopt train``'s default PPO run, SB3, one episode decides every op): its
episodes/s and op decisions/s from ``bench/bench_train.py``'s measurement at 256 timesteps.

Move-gain model (:mod:`graphopt.train.move_gain`, ``graphopt moves train``), on the same graphs:
moves labelled by the simulator per second and moves fitted per second (3 epochs; CPU).

Start-up: a fresh process imports the trainer, loads ``suite:train-gen`` (524 graphs) from the
graph cache, builds their items (best-heuristic references from the reference cache, the decoder's
arrays, the encodings) and runs one rollout (numba's compiled functions from its cache). Run twice:
the first fills the caches when they are empty (a fresh machine), the second is what every later
run pays. Target: <= 20 s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

STARTUP = """
import time
t0 = time.perf_counter()
import numpy as np
from graphopt.hardware import get_cluster
from graphopt.train.step_run import build_items, resolve_run_graphs
from graphopt.train.stepwise import rollout
from policies.step_policy import StepPolicy
t1 = time.perf_counter()
graphs = resolve_run_graphs("suite:train-gen")
t2 = time.perf_counter()
items = build_items(graphs, [get_cluster("v100-nvlink-4")])
t3 = time.perf_counter()
rollout(StepPolicy(), items[0], 2, np.random.default_rng(0))
t4 = time.perf_counter()
print(f"{len(items)} {t1 - t0:.2f} {t2 - t1:.2f} {t3 - t2:.2f} {t4 - t3:.2f} {t4 - t0:.2f}")
"""


def startup() -> None:
    print("start-up of a step-wise run on suite:train-gen (fresh process each):")
    for label in ("first (fills empty caches)", "second (warm caches)"):
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", STARTUP], capture_output=True, text=True, check=True
        ).stdout.split()
        wall = time.perf_counter() - start
        n, imports, graphs, items, first, total = out
        print(
            f"  {label}: {wall:.1f} s wall ({n} graphs; imports {imports} s, graphs {graphs} s, "
            f"references + encodings {items} s, first rollout {first} s; in-process {total} s)"
        )


def stepwise(num_ops: int, num_graphs: int, updates: int, threads: int, device: str) -> None:
    from graphopt.hardware import get_cluster
    from graphopt.train.step_run import build_items, resolve_run_graphs
    from graphopt.train.stepwise import StepTrainConfig, ppo_update, rollout_with, train
    from policies.step_policy import StepPolicy

    names = [
        f"gen:{'layered' if k % 2 == 0 else 'sp'}?ops={num_ops}&seed={100 + k}"
        for k in range(num_graphs)
    ]
    items = build_items(resolve_run_graphs(",".join(names)), [get_cluster("v100-nvlink-4")])
    print(
        f"step-wise policy: {num_graphs} graphs of {num_ops:,} ops, v100-nvlink-4, {threads} "
        f"threads, torch on {device}"
    )

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    print(
        "| encoder | rollouts: graphs/s | rollouts: decisions/s | updates: decisions/s | end to end: decisions/s |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for encoder in ("go", "mlp"):
        torch.manual_seed(0)
        config = StepTrainConfig(
            updates=updates,
            imitation_updates=0,
            eval_every=10**6,
            threads=threads,
            device=device,
            policy={"encoder": encoder},
        )
        policy = StepPolicy(encoder=encoder).to(device)
        optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
        rng = np.random.default_rng(0)
        # one warm-up update (numba and torch first calls)
        with torch.no_grad():
            pres = policy.embed_many([it.observation for it in items])
        batches = [
            rollout_with(policy, it, p, config.samples_per_graph, rng)
            for it, p in zip(items, pres, strict=True)
        ]
        ppo_update(policy, optimizer, batches, config)
        sync()
        start = time.perf_counter()
        with torch.no_grad():
            pres = policy.embed_many([it.observation for it in items])
        batches = [
            rollout_with(policy, it, p, config.samples_per_graph, rng)
            for it, p in zip(items, pres, strict=True)
        ]
        t_roll = time.perf_counter() - start
        decisions = sum(b.decisions for b in batches)
        start = time.perf_counter()
        ppo_update(policy, optimizer, batches, config)
        sync()
        t_upd = time.perf_counter() - start
        start = time.perf_counter()
        _, rows = train(items, [], config, policy=policy)
        t_all = time.perf_counter() - start
        print(
            f"| {encoder} | {len(items) / t_roll:,.1f} | {decisions / t_roll:,.0f} | "
            f"{decisions / t_upd:,.0f} | {rows[-1]['decisions'] / t_all:,.0f} |"
        )


def move_model(num_ops: int, num_graphs: int, epochs: int) -> None:
    """The move-gain model's training (``graphopt moves train``'s code): moves labelled by the
    simulator per second (256 drawn ops a graph, every other device each) and moves fitted per
    second (one pass of the network over each graph's labelled moves, backward included)."""
    from graphopt.baselines.reference_cache import cached_best_placement
    from graphopt.hardware import get_cluster
    from graphopt.train.move_gain import fit_move_net, move_examples
    from graphopt.workloads import resolve_graphs

    names = [
        f"gen:{'layered' if k % 2 == 0 else 'sp'}?ops={num_ops}&seed={100 + k}"
        for k in range(num_graphs)
    ]
    graphs = resolve_graphs(",".join(names))
    cluster = get_cluster("v100-nvlink-4")
    move_examples(graphs[:1], cluster, 256, 0)  # warm-up: numba's first calls
    for graph in graphs:  # the best heuristics' placements (cached by fingerprint) not timed
        cached_best_placement(graph, cluster)
    start = time.perf_counter()
    examples = move_examples(graphs, cluster, 256, 0)
    t_label = time.perf_counter() - start
    moves = sum(int((~np.isnan(e.gains)).sum()) for e in examples)
    start = time.perf_counter()
    fit_move_net(examples, epochs)
    t_fit = time.perf_counter() - start
    print(
        f"move-gain model ({num_graphs} graphs of {num_ops:,} ops, v100-nvlink-4): labelling "
        f"{len(graphs) / t_label:,.1f} graphs/s = {moves / t_label:,.0f} moves/s; fitting "
        f"{moves * epochs / t_fit:,.0f} moves/s ({epochs} epochs)"
    )


def one_shot(timesteps: int, device: str) -> None:
    from graphopt.train.config import load_config
    from graphopt.train.trainer import train
    from graphopt.workloads import resolve_graphs

    config = load_config(None, total_timesteps=timesteps, eval_every=10**9, device=device)
    ops = np.mean([g.num_ops for g in resolve_graphs(config.graphs)])
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        train(config, runs_root=tmp, show_progress=False)
        wall = time.perf_counter() - start
    print(
        f"one-shot GO policy (SB3 PPO on {device}, {config.graphs}, mean {ops:,.0f} ops, {timesteps} episodes "
        f"incl. set-up and one validation): {timesteps / wall:,.1f} episodes/s = "
        f"{timesteps * ops / wall:,.0f} op decisions/s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--graphs", type=int, default=8)
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="auto, cpu, cuda or cuda:N (default cpu)")
    ap.add_argument("--skip-one-shot", action="store_true")
    ap.add_argument("--skip-startup", action="store_true")
    ap.add_argument("--skip-moves", action="store_true", help="no move-gain model row")
    ap.add_argument("--skip-stepwise", action="store_true", help="no step-wise policy rows")
    args = ap.parse_args()
    from graphopt.accelerator import resolve_device

    device = resolve_device(args.device)
    torch.set_num_threads(args.threads)
    if not args.skip_startup:
        startup()
    if not args.skip_stepwise:
        stepwise(args.ops, args.graphs, args.updates, args.threads, device)
    if not args.skip_moves:
        move_model(args.ops, args.graphs, 3)
    if not args.skip_one_shot:
        one_shot(256, device)


if __name__ == "__main__":
    main()
