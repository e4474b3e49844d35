"""Heuristic baselines that learned policies are measured against (one module per family)."""

from graphopt.baselines.placement import PLACERS, contiguous_split, round_robin, single_device

__all__ = ["PLACERS", "contiguous_split", "round_robin", "single_device"]
