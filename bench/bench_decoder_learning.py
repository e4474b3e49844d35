"""Can the GO network learn to steer the placement decoder? PPO, evolution strategies and imitation
of the decoder search at equal budgets of decisions, and an ablation of the network like GO's
Table 4; every figure zero-shot on held-out graphs (one forward pass, one decode, no search).

Usage:
    python bench/bench_decoder_learning.py compare [--budget 4096] [--seeds 0] [--methods ppo,es,imitation]
    python bench/bench_decoder_learning.py ablation [--budget 4096] [--seeds 0,1,2]

Setting: placement on v100-nvlink-4 with the ``heft-lc`` decoder anchored on the best heuristic
(graphopt.decoders.decision); training graphs: suite:default, PipeDream vgg16 / densenet121 /
nasnetamobile / alexnet, txl-2 and 20 random DAGs; evaluation graphs (never trained on): the
issue's held-out set, suite:heldout-small, PipeDream resnet50 / inception_v3 / gnmt,
torch:inception, torch:lstm. Speed-ups are over each graph's best heuristic (= zero outputs).

- ``ppo``: SB3 PPO with :class:`policies.decoder_policy.GODecoderPolicy` (Gaussian outputs), the
  configuration of ``graphopt/configs/decoder.yaml`` on these graphs; ``budget`` decisions.
- ``es``: antithetic evolution strategies on the same network's weights (greedy outputs, 8 pairs
  of perturbations, 8 training graphs per pair, centred ranks, Adam), the release gate's bias
  started at -0.3 so that perturbations release ops; ``budget`` decisions.
- ``imitation``: the decoder search (:func:`graphopt.decoders.search.decoder_search`) from zero
  outputs on every training graph, its releases pruned to those that matter; the network trained
  to predict them (gate: weighted binary cross-entropy; device: cross-entropy); the searches
  spend the ``budget`` decisions.

``ablation`` trains the network variants with ``ppo`` (full; no segment attention; no FiLM;
GraphSAGE replaced by the input projection alone, an MLP on node features) and adds random
outputs (N(0, 1) per channel) and zero outputs (the best heuristic) through the same decoder;
each row also gives the network-seeded decoder search at 256 calls.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from stable_baselines3.common.vec_env import DummyVecEnv
from torch.nn.utils import parameters_to_vector, vector_to_parameters

import envs
from graphopt.decoders.search import decoder_search
from graphopt.train.config import TrainConfig
from graphopt.train.trainer import build_model

CLUSTER = "v100-nvlink-4"
MAX_OPS = 6144
RANDOM = [f"random-layered-{n}-s{s}" for s, n in enumerate([300, 500, 800, 1200, 400], 10)] + [
    f"random-sp-{n}-s{s}" for s, n in enumerate([300, 500, 800, 1200, 400], 20)
]
RANDOM += [f"random-layered-{n}-s{s}" for s, n in enumerate([700, 1000, 1500, 600, 900], 15)]
RANDOM += [f"random-sp-{n}-s{s}" for s, n in enumerate([700, 1000, 1500, 600, 900], 25)]
TRAIN = ",".join(
    [
        "suite:default",
        "pipedream:vgg16",
        "pipedream:densenet121",
        "pipedream:nasnetamobile",
        "pipedream:alexnet",
        "txl-2",
        *RANDOM,
    ]
)
EVAL = (
    "suite:heldout-small,pipedream:resnet50,pipedream:inception_v3,pipedream:gnmt,"
    "torch:inception,torch:lstm"
)
SETTINGS = dict(decoder="heft-lc", max_ops=MAX_OPS, max_edges=4 * MAX_OPS)
ABLATION = {
    "full GO network": {},
    "without segment attention": {"attn_layers": 0},
    "without FiLM": {"film": False},
    "MLP instead of GraphSAGE": {"sage_layers": 0},
}


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(max(v, 1e-6)) for v in values))


def make(graphs: str, seed: int) -> Any:
    return envs.make_env("placement", graphs, CLUSTER, seed=seed, **SETTINGS)


def config(seed: int, budget: int, **network: Any) -> TrainConfig:
    return TrainConfig(
        task="placement",
        graphs=TRAIN,
        val_graphs=EVAL,
        cluster=CLUSTER,
        decoder="heft-lc",
        total_timesteps=budget,
        n_envs=4,
        n_steps=64,
        batch_size=64,
        learning_rate=1e-4,
        max_ops=MAX_OPS,
        seed=seed,
        policy_kwargs={"device_agnostic": True, **network},
    ).validate()


def new_model(env: Any, seed: int, budget: int, **network: Any) -> Any:
    torch.manual_seed(seed)
    return build_model(config(seed, budget, **network), DummyVecEnv([lambda: env]), device="cpu")


def means(policy: Any, env: Any, index: int) -> np.ndarray:
    """``(C, N)`` greedy outputs of ``policy`` for graph ``index``."""
    obs, _ = env.reset(options={"graph": index})
    batch = {k: torch.as_tensor(v[None]) for k, v in obs.items()}
    with torch.no_grad():
        logits, _, _, _ = policy._run(batch)
        out = policy.means(logits)[0].numpy()
    return out[:, : env.graphs[index].num_ops]


def pricer(env: Any, index: int) -> Any:
    """outputs -> (decision, measurement) of graph ``index``: one decode, one simulation."""
    graph = env.graphs[index]

    def evaluate(outputs: np.ndarray) -> Any:
        decision = env.decode_outputs(index, outputs)
        return decision, env.cost_model.evaluate(graph, env.cluster, decision)

    return evaluate


def speedup(env: Any, index: int, outputs: np.ndarray) -> float:
    m = pricer(env, index)(outputs)[1]
    return env.reference(index).measurement.step_time / m.step_time if m.valid else 1.0 / 16


def zero_shot(policy: Any, env: Any) -> list[float]:
    return [speedup(env, i, means(policy, env, i)) for i in range(len(env.graphs))]


def seeded_search(env: Any, starts: list[np.ndarray], calls: int, seed: int) -> list[float]:
    out = []
    for i, start in enumerate(starts):
        found = decoder_search(pricer(env, i), start, calls, seed=seed)
        out.append(env.reference(i).measurement.step_time / found.measurement.step_time)
    return out


# ---------------------------------------------------------------------------------- the methods
def train_ppo(seed: int, budget: int, evaluation: Any, **network: Any) -> tuple[Any, list]:
    """PPO for ``budget`` decisions; the zero-shot geomean every quarter of the budget."""
    train_env = make(TRAIN, seed)
    model = new_model(train_env, seed, budget, **network)
    curve = [(0, geomean(zero_shot(model.policy, evaluation)))]
    for _ in range(4):
        model.learn(budget // 4, reset_num_timesteps=False)
        curve.append((model.num_timesteps, geomean(zero_shot(model.policy, evaluation))))
    return model.policy, curve


def train_es(seed: int, budget: int, evaluation: Any) -> tuple[Any, list]:
    """Antithetic ES on the network's weights (module docstring)."""
    train_env = make(TRAIN, seed)
    policy = new_model(train_env, seed, budget).policy
    head = policy.network.output_head
    with torch.no_grad():
        head.bias[policy.scalars.index("gate")] = -0.3
    params = [p for n, p in policy.named_parameters() if "value_head" not in n and n != "log_std"]
    theta = parameters_to_vector(params).detach().clone()
    rng = np.random.default_rng(seed)
    pairs, per_pair, sigma, lr = 8, 8, 0.05, 0.02
    m, v = torch.zeros_like(theta), torch.zeros_like(theta)
    iterations = max(1, budget // (2 * pairs * per_pair))
    curve = [(0, geomean(zero_shot(policy, evaluation)))]
    for it in range(iterations):
        idx = rng.choice(
            len(train_env.graphs), size=min(per_pair, len(train_env.graphs)), replace=False
        )
        eps = torch.randn(
            pairs, theta.numel(), generator=torch.Generator().manual_seed(seed * 7919 + it)
        )
        fit = np.zeros((pairs, 2))
        for k in range(pairs):
            for j, sign in enumerate((1.0, -1.0)):
                vector_to_parameters(theta + sign * sigma * eps[k], params)
                fit[k, j] = statistics.fmean(
                    math.log(speedup(train_env, i, means(policy, train_env, i))) for i in idx
                )
        ranks = fit.reshape(-1).argsort().argsort().reshape(fit.shape) / (fit.size - 1) - 0.5
        grad = torch.as_tensor(
            ((ranks[:, 0] - ranks[:, 1])[:, None] * eps.numpy()).sum(0) / (pairs * sigma),
            dtype=theta.dtype,
        )
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        theta = theta + lr * (m / (1 - 0.9 ** (it + 1))) / (
            (v / (1 - 0.999 ** (it + 1))).sqrt() + 1e-8
        )
        vector_to_parameters(theta, params)
        if (it + 1) % max(1, iterations // 4) == 0 or it + 1 == iterations:
            used = (it + 1) * 2 * pairs * per_pair
            curve.append((used, geomean(zero_shot(policy, evaluation))))
    return policy, curve


def train_imitation(seed: int, budget: int, evaluation: Any) -> tuple[Any, list]:
    """Imitation of the pruned decoder-search releases (module docstring)."""
    train_env = make(TRAIN, seed)
    policy = new_model(train_env, seed, budget).policy
    graphs = len(train_env.graphs)
    per_graph = max(2, budget // graphs)
    labels = []
    for i, graph in enumerate(train_env.graphs):
        evaluate = pricer(train_env, i)

        start = np.zeros((len(train_env.channels), graph.num_ops))
        start[1] = -1.0
        found = decoder_search(evaluate, start, per_graph, seed=seed)
        out, best = found.outputs.copy(), found.measurement.step_time
        for op in np.flatnonzero(out[1] > 0)[:64]:  # prune releases that do not matter
            trial = out.copy()
            trial[1, op] = -1.0
            m = evaluate(trial)[1]
            if m.valid and m.step_time <= best:
                out, best = trial, m.step_time
        labels.append((out[1] > 0, evaluate(out)[0].placement))
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    curve = [(0, geomean(zero_shot(policy, evaluation)))]
    steps = 4 * graphs * 5
    for step in range(steps):
        i = step % graphs
        obs, _ = train_env.reset(options={"graph": i})
        batch = {k: torch.as_tensor(v[None]) for k, v in obs.items()}
        logits, _, _, _ = policy._run(batch)
        mean = policy.means(logits)[0]
        released, placement = labels[i]
        n = len(released)
        target = torch.as_tensor(released.astype(np.float32))
        positive = max(float(target.sum()), 1.0)
        weight = torch.tensor((n - positive) / positive * 0.2)
        loss = F.binary_cross_entropy_with_logits(mean[1, :n], target, pos_weight=weight)
        if released.any():
            affinity = mean[2:, :n].T[torch.as_tensor(released)]
            loss = loss + F.cross_entropy(affinity, torch.as_tensor(placement[released]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (step + 1) % (steps // 4) == 0:
            curve.append((budget, geomean(zero_shot(policy, evaluation))))
    return policy, curve


METHODS = {"ppo": train_ppo, "es": train_es, "imitation": train_imitation}


def compare(seeds: list[int], budget: int, methods: list[str]) -> None:
    evaluation = make(EVAL, 0)
    names = [g.name for g in evaluation.graphs]
    print(f"zero-shot speed-up over the best heuristic, {budget:,} decisions per method")
    print("| method | seed | curve (decisions: geomean) | " + " | ".join(names) + " | geomean |")
    print("| --- | --- | --- | " + " | ".join("---:" for _ in names) + " | ---: |")
    for name in methods:
        train = METHODS[name]
        for seed in seeds:
            began = time.perf_counter()
            policy, curve = train(seed, budget, evaluation)
            final = zero_shot(policy, evaluation)
            trace = ", ".join(f"{d}: {g:.4f}" for d, g in curve)
            cells = " | ".join(f"{x:.4f}" for x in final)
            print(
                f"| {name} | {seed} | {trace} | {cells} | {geomean(final):.4f} |"
                f" <!-- {time.perf_counter() - began:.0f} s -->",
                flush=True,
            )


def ablation(seeds: list[int], budget: int) -> None:
    evaluation = make(EVAL, 0)
    count = len(evaluation.graphs)
    print(
        f"ablation: zero-shot and network-seeded search@256, {budget:,} PPO decisions, seeds {seeds}"
    )
    print("| variant | zero-shot geomean (mean, range) | search@256 geomean (mean, range) |")
    print("| --- | --- | --- |")
    rows: dict[str, tuple[list[float], list[float]]] = {}
    for name, network in ABLATION.items():
        for seed in seeds:
            policy, _ = train_ppo(seed, budget, evaluation, **network)
            starts = [means(policy, evaluation, i) for i in range(count)]
            greedy = geomean([speedup(evaluation, i, s) for i, s in enumerate(starts)])
            searched = geomean(seeded_search(evaluation, starts, 256, seed))
            rows.setdefault(name, ([], []))
            rows[name][0].append(greedy)
            rows[name][1].append(searched)
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for name in ("random outputs", "zero outputs (the best heuristic)"):
            starts = []
            for i in range(count):
                shape = (len(evaluation.channels), evaluation.graphs[i].num_ops)
                starts.append(
                    rng.normal(size=shape) if name == "random outputs" else np.zeros(shape)
                )
            greedy = geomean([speedup(evaluation, i, s) for i, s in enumerate(starts)])
            searched = geomean(seeded_search(evaluation, starts, 256, seed))
            rows.setdefault(name, ([], []))
            rows[name][0].append(greedy)
            rows[name][1].append(searched)
    for name, (greedy, searched) in rows.items():

        def cell(xs: list[float]) -> str:
            return f"{statistics.fmean(xs):.4f} ({min(xs):.4f}-{max(xs):.4f})"

        print(f"| {name} | {cell(greedy)} | {cell(searched)} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", choices=("compare", "ablation"))
    parser.add_argument("--budget", type=int, default=4096)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--methods", default=",".join(METHODS), help="compare: which methods")
    args = parser.parse_args()
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.study == "compare":
        compare(seeds, args.budget, args.methods.split(","))
    else:
        ablation(seeds, args.budget)


if __name__ == "__main__":
    main()
