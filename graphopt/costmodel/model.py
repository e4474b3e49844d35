"""The learned cost model: a GraphSAGE network that predicts the log runtime of a configuration.

Following Kaufman et al. ("A Learned Performance Model for Tensor Processing Units", MLSys 2021)
and the TpuGraphs baseline (Phothilimthana et al., NeurIPS 2023). For one graph with ``N`` nodes
and a batch of ``B`` configurations, node ``i`` of configuration ``b`` starts from

.. math::
    \\mathbf{h}_{b,i}^{(0)} = \\mathbf{E}[t_i] + \\mathbf{W}_x \\mathbf{x}_i
        + [i \\in \\mathcal{C}]\\,(\\mathbf{W}_c \\mathbf{c}_{b,i} + \\mathbf{b}_c)

(``t_i`` the opcode, ``x_i`` the static node features, ``c_{b,i}`` the configuration's features on
the configurable nodes ``C``), goes through ``L`` GraphSAGE layers over the edges in both
directions (``torch_geometric.nn.SAGEConv``, mean aggregation; residual and LayerNorm)

.. math::
    \\mathbf{h}^{(l+1)} = \\mathrm{LN}\\big(\\mathbf{h}^{(l)}
        + \\mathrm{ReLU}(\\mathrm{SAGE}(\\mathbf{h}^{(l)}))\\big),

is pooled per configuration by sum and by mean, and an MLP maps the pooled vector to the
predicted natural-log runtime:

.. math::
    \\hat{y}_b = \\mathrm{MLP}\\big([\\,\\mathrm{slog}(\\textstyle\\sum_i \\mathbf{h}_{b,i}),\\;
        \\tfrac{1}{N}\\textstyle\\sum_i \\mathbf{h}_{b,i},\\; \\mathbf{s}_b\\,]\\big),
    \\qquad \\mathrm{slog}(z) = \\mathrm{sign}(z)\\log(1 + |z|)

(``s_b`` the configuration's summary features, if the data has any: graphopt decisions do, see
:data:`graphopt.costmodel.features.SUMMARY_FEATURES`; with ``prior_column`` set, ``log`` of that
summary column -- an analytic estimate of the runtime in seconds -- is added to the output, so the network
learns a multiplicative correction to it (the last layer starts at zero: an untrained network
predicts the estimate itself); ``slog`` keeps the sum's scale information without letting a 100,000-node graph swamp the MLP).
The pooled sum is additive over disjoint node sets: Graph Segment Training
(:mod:`graphopt.costmodel.gst`) computes it segment by segment with :meth:`CostNet.segment_sum`
and finishes with :meth:`CostNet.head`.

Shapes:
    - ``node_feat`` ``(N, F)``, ``opcode`` ``(N,)``, ``edges`` ``(2, E)``,
      ``config_node_ids`` ``(C,)``, ``config_feat`` ``(B, C, Fc)``, ``summary`` ``(B, S)``;
    - output ``(B,)`` predicted log runtimes (lower is faster).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn
from torch_geometric.nn import SAGEConv

from graphopt.costmodel.features import NUM_OPCODES
from graphopt.nn.graph_encoder import bidirectional, mean_adjacency


@dataclass(frozen=True)
class NetLayout:
    """Everything that fixes the network's parameter shapes (saved with every checkpoint)."""

    node_features: int
    """Static features per node (13 for graphopt graphs, 70-140 for TpuGraphs)."""
    config_features: int
    """Features per configurable node (25 for graphopt decisions, 10-18 for TpuGraphs layouts)."""
    summary_features: int = 0
    """Whole-configuration features fed to the head (12 for graphopt decisions, 0 for TpuGraphs)."""
    prior_column: int = -1
    """Index of a summary feature holding an analytic runtime estimate ``t`` seconds encoded as
    ``log10(1 + t * 1e6) / 7`` (:func:`log_seconds` decodes it); ``log t`` is added to the output,
    so the network learns a correction to it (-1: none)."""
    hidden: int = 64
    """Width of the node embeddings."""
    layers: int = 3
    """GraphSAGE layers."""
    num_opcodes: int = NUM_OPCODES
    """Size of the opcode table."""
    opcode_dim: int = 32
    """Width of the opcode embedding before projection."""

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def log_seconds(encoded: Tensor) -> Tensor:
    """Natural log of ``t`` seconds from the summary encoding ``log10(1 + t * 1e6) / 7``
    (:func:`graphopt.costmodel.features.encode_seconds`, whose inverse this is), so a
    prior in seconds makes the untrained network predict absolute log runtimes, the scale of
    the measurements (what MSE fits and the reward reads), not the scale of one graph."""
    micro = torch.expm1(encoded.double() * (7 * math.log(10)))
    return (torch.log(micro.clamp_min(1e-9)) - math.log(1e6)).to(encoded.dtype)


class CostNet(nn.Module):
    """See the module docstring.

    Args:
        layout: parameter shapes (:class:`NetLayout`).
        dropout: dropout on each layer's update during training (default 0).
    """

    def __init__(self, layout: NetLayout, dropout: float = 0.0) -> None:
        super().__init__()
        self.layout = layout
        h = layout.hidden
        self.opcode = nn.Embedding(layout.num_opcodes, layout.opcode_dim)
        self.node_in = nn.Linear(layout.node_features + layout.opcode_dim, h)
        self.config_in = nn.Linear(layout.config_features, h)
        self.convs = nn.ModuleList(SAGEConv(h, h, aggr="mean") for _ in range(layout.layers))
        self.norms = nn.ModuleList(nn.LayerNorm(h) for _ in range(layout.layers))
        self.dropout = nn.Dropout(dropout)
        self.mlp = nn.Sequential(
            nn.Linear(2 * h + layout.summary_features, h),
            nn.ReLU(),
            nn.Linear(h, h),
            nn.ReLU(),
            nn.Linear(h, 1),
        )
        if layout.prior_column >= 0:  # start from the analytic estimate: a zero correction
            last = self.mlp[-1]
            assert isinstance(last, nn.Linear)
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)

    def static(self, node_feat: Tensor, opcode: Tensor) -> Tensor:
        """``(N, H)`` configuration-independent input embedding of each node."""
        if node_feat.shape[1] != self.layout.node_features:
            raise ValueError(
                f"node features have {node_feat.shape[1]} columns; this model was built for "
                f"{self.layout.node_features} (a checkpoint for another feature layout?)"
            )
        if opcode.numel() and int(opcode.max()) >= self.layout.num_opcodes:
            raise ValueError(
                f"opcode {int(opcode.max())} is outside this model's table of "
                f"{self.layout.num_opcodes}"
            )
        return self.node_in(torch.cat([node_feat, self.opcode(opcode)], dim=1))

    def segment_sum(
        self, static: Tensor, edges: Tensor, config_pos: Tensor, config_feat: Tensor
    ) -> Tensor:
        """Sum of the final node embeddings of a node set, per configuration.

        Args:
            static: ``(n, H)`` rows of :meth:`static` for the node set.
            edges: ``(2, e)`` edges among the set, in the set's local indices.
            config_pos: ``(c,)`` local indices of the set's configurable nodes.
            config_feat: ``(B, c, Fc)`` their features for ``B`` configurations.

        Returns:
            ``(B, H)``.
        """
        if config_feat.shape[-1] != self.layout.config_features:
            raise ValueError(
                f"configurations have {config_feat.shape[-1]} features per node; this model was "
                f"built for {self.layout.config_features} (a checkpoint for another feature layout?)"
            )
        b, n, h = config_feat.shape[0], static.shape[0], static.shape[1]
        x = static.unsqueeze(0).repeat(b, 1, 1)
        x[:, config_pos] = x[:, config_pos] + self.config_in(config_feat)
        x = x.reshape(b * n, h)
        # One block-diagonal adjacency for the B copies of the graph (edges both ways).
        both = bidirectional(edges)
        offsets = (torch.arange(b, device=edges.device) * n).repeat_interleave(both.shape[1])
        adj = mean_adjacency(both.repeat(1, b) + offsets, b * n, x.dtype)
        for conv, norm in zip(self.convs, self.norms, strict=True):
            x = norm(x + self.dropout(torch.relu(conv(x, adj))))
        return x.reshape(b, n, h).sum(dim=1)

    def head(self, total: Tensor, num_nodes: int, summary: Tensor | None = None) -> Tensor:
        """``(B,)`` predicted log runtime from the ``(B, H)`` sum over all ``num_nodes`` nodes
        and the ``(B, S)`` summary features (``None`` when the layout has none)."""
        slog = torch.sign(total) * torch.log1p(total.abs())
        parts = [slog, total / max(num_nodes, 1)]
        if self.layout.summary_features:
            if summary is None or summary.shape != (total.shape[0], self.layout.summary_features):
                got = None if summary is None else tuple(summary.shape)
                raise ValueError(
                    f"summary features of shape {got}; this model needs "
                    f"({total.shape[0]}, {self.layout.summary_features})"
                )
            parts.append(summary)
        out = self.mlp(torch.cat(parts, dim=1)).squeeze(1)
        if self.layout.prior_column >= 0:
            assert summary is not None
            out = out + log_seconds(summary[:, self.layout.prior_column])
        return out

    def forward(
        self,
        node_feat: Tensor,
        opcode: Tensor,
        edges: Tensor,
        config_node_ids: Tensor,
        config_feat: Tensor,
        summary: Tensor | None = None,
    ) -> Tensor:
        """``(B,)`` predicted log runtimes of ``B`` configurations of one whole graph."""
        static = self.static(node_feat, opcode)
        total = self.segment_sum(static, edges, config_node_ids, config_feat)
        return self.head(total, static.shape[0], summary)
