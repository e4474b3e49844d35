"""Heuristic baselines that learned policies are measured against (one module per family)."""

from graphopt.baselines.placement import PLACERS, round_robin, single_device

__all__ = ["PLACERS", "round_robin", "single_device"]
