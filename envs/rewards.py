"""Reward modes of the graphopt environments.

All modes are functions of the step time ``t`` of the agent's decision and the step time
``t_ref`` of the per-graph reference decision (by default the best heuristic). Two rules make them
comparable and safe:

- a valid decision's time is capped at ``CAP * t_ref`` (9x) before scoring, so one disastrous
  sample cannot dominate a batch;
- an invalid decision (out of memory, illegal fusion) is scored as if its step took
  ``INVALID * t_ref`` (16x): strictly worse than every valid decision, whatever the mode.

=================  ==========================  =============================================
mode               reward                      range
=================  ==========================  =============================================
``speedup``        ``1 - sqrt(t / t_ref)``     (-2, 1) valid; -3 invalid. 0 = as good as the
                                               reference; 0.1 = sqrt(step) 10% lower.
``neg_sqrt_time``  ``-sqrt(t)``, t in seconds  as in GO and HDP; -sqrt(16 t_ref) if invalid
``log_speedup``    ``log(t_ref / t)``          (-2.20, inf) valid; -2.77 invalid
=================  ==========================  =============================================
"""

from __future__ import annotations

import math

CAP = 9.0
INVALID = 16.0
REWARD_MODES = ("speedup", "neg_sqrt_time", "log_speedup")


def check_reward_mode(mode: str) -> str:
    if mode not in REWARD_MODES:
        raise ValueError(f"unknown reward mode {mode!r}; choose one of: {', '.join(REWARD_MODES)}")
    return mode


def reward(mode: str, step_time: float, valid: bool, reference_time: float) -> float:
    """The reward of one decision (see the module docstring)."""
    if reference_time <= 0 or not math.isfinite(reference_time):
        raise ValueError(f"reference step time must be finite and > 0, got {reference_time}")
    t = min(step_time, CAP * reference_time) if valid else INVALID * reference_time
    if mode == "speedup":
        return 1.0 - math.sqrt(t / reference_time)
    if mode == "neg_sqrt_time":
        return -math.sqrt(t)
    if mode == "log_speedup":
        return math.log(reference_time / t)
    raise ValueError(f"unknown reward mode {mode!r}; choose one of: {', '.join(REWARD_MODES)}")


def speedup(reference_time: float, step_time: float, valid: bool) -> float:
    """The speed-up ``t_ref / t`` of a decision over the reference that ``info["speedup"]``
    reports: 0 for an invalid decision or a step time that is not positive."""
    return reference_time / step_time if valid and step_time > 0 else 0.0
