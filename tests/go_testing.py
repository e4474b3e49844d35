"""Helpers shared by the policy tests (a plain module: unique name, not a conftest)."""

from __future__ import annotations

import torch

from graphopt.encoding import encode
from graphopt.hardware import get_cluster
from graphopt.nn.batching import obs_to_tensors
from graphopt.workloads import get_graph

torch.set_num_threads(1)

CLUSTER = "v100-nvlink-2"


def encoded_obs(
    name: str = "txl-tiny", extra_ops: int = 0, extra_edges: int = 0, cluster: str = CLUSTER
) -> dict[str, torch.Tensor]:
    """Observation of graph ``name`` as a batch of one, with ``extra_ops`` / ``extra_edges``
    padding slots beyond the graph's own size."""
    g = get_graph(name)
    enc = encode(g, get_cluster(cluster), g.num_ops + extra_ops, g.num_edges + extra_edges)
    return obs_to_tensors(enc.observation)


def stack_obs(items: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Concatenate batches of observations of equal shapes."""
    return {k: torch.cat([o[k] for o in items]) for k in items[0]}
