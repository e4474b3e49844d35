"""Importers: graphs from outside sources, as :class:`~graphopt.graph.CompGraph` s.

- :mod:`graphopt.importers.pipedream`: PipeDream's per-layer profiles of 14 real models
  (measured forward and backward times), with :func:`load_pipedream` and :func:`list_profiles`.
"""

from graphopt.importers.pipedream import (
    PipeDreamLayer,
    PipeDreamProfile,
    default_profile_dir,
    estimate_forward_flops,
    list_profiles,
    load_pipedream,
    parse_profile,
    profile_to_graph,
)

__all__ = [
    "PipeDreamLayer",
    "PipeDreamProfile",
    "default_profile_dir",
    "estimate_forward_flops",
    "list_profiles",
    "load_pipedream",
    "parse_profile",
    "profile_to_graph",
]
