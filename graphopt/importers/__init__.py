"""Importers: graphs from outside sources, as :class:`~graphopt.graph.CompGraph` s.

- :mod:`graphopt.importers.torch`: any PyTorch model through ``torch.export``
  (:func:`~graphopt.importers.torch.from_torch`); imported lazily, as torch is heavy.
- :mod:`graphopt.importers.zoo`: real architectures by name, cached as graph files
  (:func:`~graphopt.importers.zoo.load_zoo`).
- :mod:`graphopt.importers.sources`: ``pipedream:NAME`` and ``torch:NAME?...`` strings usable
  wherever graphs are named.

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
