"""Baselines that learned policies are measured against (one module per family).

- placement (:mod:`.placement`, registry ``PLACERS``): single device, round-robin, layer split,
  METIS (:mod:`.metis`), HEFT and HEFT with link contention (:mod:`.heft`), Baechi's m-TOPO and
  m-ETF (:mod:`.baechi`), Tarnawski et al.'s latency greedy and max-load dynamic program
  (:mod:`.tarnawski`), PipeDream's planner (:mod:`.pipedream_planner`), on the chain of op groups
  of :mod:`.contiguous`; each made monotone in resources by :mod:`.monotone`;
- scheduling (:mod:`.scheduling`, ``SCHEDULERS``): topological, critical-path, HEFT rank,
  first come first served;
- fusion (:mod:`.fusion`, ``FUSERS``): none, XLA-like rules, simulator-guided greedy;
- search at a budget (:mod:`.search`): random search, simulated annealing;
- exact optimum for small graphs (:mod:`.exact`): CP-SAT.
"""

from graphopt.baselines.baechi import m_etf, m_topo
from graphopt.baselines.exact import ExactResult, solve_exact
from graphopt.baselines.fusion import FUSERS, greedy_fusion, xla_fusion
from graphopt.baselines.heft import (
    HeftSchedule,
    heft,
    heft_contention,
    heft_schedule,
    heft_schedule_from_costs,
)
from graphopt.baselines.metis import metis
from graphopt.baselines.monotone import monotone
from graphopt.baselines.pipedream_planner import pipedream_planner
from graphopt.baselines.placement import PLACERS, contiguous_split, round_robin, single_device
from graphopt.baselines.scheduling import SCHEDULERS, critical_path
from graphopt.baselines.search import SearchResult, random_search, simulated_annealing
from graphopt.baselines.tarnawski import latency_greedy, max_load_dp

__all__ = [
    "FUSERS",
    "PLACERS",
    "SCHEDULERS",
    "ExactResult",
    "SearchResult",
    "greedy_fusion",
    "random_search",
    "simulated_annealing",
    "solve_exact",
    "xla_fusion",
    "HeftSchedule",
    "contiguous_split",
    "critical_path",
    "heft",
    "heft_contention",
    "heft_schedule",
    "heft_schedule_from_costs",
    "latency_greedy",
    "m_etf",
    "m_topo",
    "max_load_dp",
    "metis",
    "monotone",
    "pipedream_planner",
    "round_robin",
    "single_device",
]
