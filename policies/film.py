"""Graph-level embedding and feature-wise linear modulation (FiLM; GO, step 3).

The graph context of graph ``b`` pools its node embeddings and appends the graph and cluster
features of the observation:

.. math::
    \\mathbf{c}_b = \\big[\\mathrm{mean}_{i} \\mathbf{h}_{b,i} \\,\\|\\, \\max_{i} \\mathbf{h}_{b,i}
        \\,\\|\\, \\mathbf{g}_b \\,\\|\\, \\mathrm{mean}_{k} \\mathbf{u}_{b,k} \\,\\|\\,
        \\max_{k} \\mathbf{u}_{b,k}\\big] \\in \\mathbb{R}^{2d + 8 + 10}

over real ops ``i`` and real devices ``k`` (``g``: :data:`graphopt.encoding.GRAPH_FEATURES`,
``u``: :data:`graphopt.encoding.DEVICE_FEATURES`). A graph without ops pools to zeros.

FiLM (Perez et al., 2018) maps the context to one scale and shift per modulated layer ``l``,

.. math::
    [\\boldsymbol{\\gamma}_l, \\boldsymbol{\\beta}_l]_l = \\mathbf{W}_2\\,
        \\mathrm{ReLU}(\\mathbf{W}_1 \\mathbf{c} + \\mathbf{b}_1) + \\mathbf{b}_2,
    \\qquad \\mathbf{h} \\leftarrow \\mathbf{h} \\odot (1 + \\boldsymbol{\\gamma}_l) +
        \\boldsymbol{\\beta}_l,

so that one set of weights can specialise per graph and cluster (GO, Sec. 3). The last linear map
starts at zero: at initialisation FiLM is the identity.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from graphopt.encoding import DEVICE_FEATURES, GRAPH_FEATURES
from policies.segment_attention import FilmParams


def context_dim(hidden: int) -> int:
    """Width of :func:`graph_context` for node embeddings of width ``hidden``."""
    return 2 * hidden + len(GRAPH_FEATURES) + 2 * len(DEVICE_FEATURES)


def masked_mean_max(x: Tensor, mask: Tensor) -> Tensor:
    """Mean and max over dim 1 of ``x`` ``(B, L, d)`` where ``mask`` ``(B, L)``; ``(B, 2d)``.

    Rows without any True entry give zeros (never NaN or -inf).
    """
    m = mask[..., None]
    count = m.sum(dim=1).clamp(min=1).to(x.dtype)
    mean = x.masked_fill(~m, 0.0).sum(dim=1) / count
    peak = x.masked_fill(~m, float("-inf")).amax(dim=1) if x.shape[1] else x.new_zeros(mean.shape)
    peak = torch.where(mask.any(dim=1, keepdim=True), peak, torch.zeros_like(peak))
    return torch.cat([mean, peak], dim=-1)


def graph_context(
    h: Tensor,
    mask: Tensor,
    graph_features: Tensor,
    device_features: Tensor,
    device_mask: Tensor,
) -> Tensor:
    """The context vector ``c`` of each graph (see the module docstring).

    Shapes:
        - h: ``(B, L, d)``; mask: ``(B, L)`` bool; graph_features: ``(B, 8)``;
          device_features: ``(B, MAX_DEVICES, 5)``; device_mask: ``(B, MAX_DEVICES)`` bool.
        - output: ``(B, 2d + 18)``.
    """
    return torch.cat(
        [
            masked_mean_max(h, mask),
            graph_features,
            masked_mean_max(device_features, device_mask),
        ],
        dim=-1,
    )


class FiLM(nn.Module):
    """Per-layer scale and shift from the graph context.

    Args:
        in_dim: width of the context (:func:`context_dim`).
        hidden: width ``d`` of the modulated features (and of the inner layer).
        num_layers: number of modulated layers.

    Shapes:
        - input: ``(B, in_dim)``.
        - output: ``num_layers`` pairs ``(gamma, beta)``, each ``(B, d)``.
    """

    def __init__(self, in_dim: int, hidden: int, num_layers: int) -> None:
        super().__init__()
        self.hidden, self.num_layers = hidden, num_layers
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU())
        if num_layers:
            last = nn.Linear(hidden, 2 * hidden * num_layers)
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)
            self.net.append(last)

    def forward(self, context: Tensor) -> list[FilmParams]:
        if self.num_layers == 0:
            return []
        out = self.net(context).view(-1, self.num_layers, 2, self.hidden)
        return [(out[:, i, 0], out[:, i, 1]) for i in range(self.num_layers)]
