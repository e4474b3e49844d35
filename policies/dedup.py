"""Find the distinct graphs in a batch of observations, so that each is embedded once.

A PPO mini-batch of one-shot episodes repeats the same few graphs many times. The policy embeds
each distinct observation once and scatters the result back (``index``), which is exact: the
network is a function of the observation alone (dropout aside).

**Key.** Two observations share a key when their ``counts`` are equal and two 64-bit hashes agree.
Each hash is a fixed random linear form over the raw bits of every array the network reads
(``op_features``, ``op_type``, ``edge_index``, ``device_features``, ``device_mask``,
``graph_features``): elements are read as integers (float32 through their IEEE bits, so equal
arrays give equal keys whatever the dtype SB3 stored), multiplied by coefficients drawn once from
a seeded generator and summed modulo ``2**64`` (int64 arithmetic wraps). Integer sums do not depend
on the order of summation, so the key of an observation is exactly reproducible. Two different
observations collide with probability at most ``2**-32`` per hash for adversarial differences
and ``2**-64`` for typical ones; with two independent hashes, never in practice. A collision would
only make one sample read another graph's logits. Cost: one multiply-add per observation element,
far less than the network's forward pass over the same data.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

HASHED_KEYS = (
    "op_features",
    "op_type",
    "edge_index",
    "device_features",
    "device_mask",
    "graph_features",
    "hint",
)
NUM_HASHES = 2
_SEED = 0x60_6F_5EED

_coefficients: dict[tuple[int, int, str], Tensor] = {}


def _coeffs(size: int, salt: int, device: torch.device) -> Tensor:
    """``(NUM_HASHES, size)`` int64 random coefficients, fixed per ``(size, salt)``."""
    key = (size, salt, str(device))
    c = _coefficients.get(key)
    if c is None:
        gen = torch.Generator().manual_seed(_SEED + 1_000_003 * salt + size)
        c = torch.randint(-(2**63), 2**63 - 1, (NUM_HASHES, size), generator=gen, dtype=torch.int64)
        c = c.to(device)
        _coefficients[key] = c
    return c


def _as_int64(x: Tensor) -> Tensor:
    """Integer view of ``x``: IEEE bits for float32 (floats of other widths go through float32)."""
    if x.is_floating_point():
        return x.float().contiguous().view(torch.int32).long()
    return x.long()


def observation_keys(obs: Mapping[str, Tensor]) -> Tensor:
    """Key rows ``(B, 2 + NUM_HASHES)`` int64: ``counts`` then the hashes (module docstring)."""
    batch = obs["counts"].shape[0]
    acc = obs["counts"].new_zeros((batch, NUM_HASHES), dtype=torch.int64)
    for salt, name in enumerate(HASHED_KEYS):
        if name not in obs:  # e.g. observations without a hint
            continue
        x = _as_int64(obs[name]).reshape(batch, -1)
        coeff = _coeffs(x.shape[1], salt, x.device)
        for h in range(NUM_HASHES):
            acc[:, h] += (x * coeff[h]).sum(dim=1)
    return torch.cat([_as_int64(obs["counts"]).reshape(batch, -1), acc], dim=1)


def unique_rows(keys: Tensor) -> tuple[Tensor, Tensor]:
    """``(first, inverse)``: the first row of each distinct key ``(G,)`` and, for every row, the
    position of its key among them ``(B,)`` (so ``keys[first][inverse] == keys``)."""
    _, inverse = torch.unique(keys, dim=0, return_inverse=True)
    groups = int(inverse.max()) + 1 if inverse.numel() else 0
    rows = torch.arange(keys.shape[0], device=keys.device)
    first = torch.full((groups,), keys.shape[0], dtype=torch.long, device=keys.device)
    first = first.scatter_reduce(0, inverse, rows, reduce="amin")
    return first, inverse
