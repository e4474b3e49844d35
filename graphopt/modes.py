"""How a trained policy runs in ``graphopt eval`` (``--mode``): the modes' names and budgets,
checked without importing torch or the policies (the CLI checks ``--mode`` before any work).

The modes themselves run in :func:`policies.rollout.run_policy`.
"""

from __future__ import annotations

import re

from graphopt.errors import InvalidArgument
from graphopt.tasks import SIMULATED_MOVE_TASKS, get_task

MODE_PATTERN = re.compile(r"greedy|(sample|finetune|plan|search):[1-9][0-9]*")
"""Every mode's syntax: ``greedy`` or ``KIND:K`` with ``K >= 1``."""


def parse_mode(mode: str, task: str | None = None) -> tuple[str, int]:
    """``"greedy"`` -> (greedy, 1); ``"sample:K"`` -> (sample, K): the greedy decision and K - 1
    samples, the best kept; ``"finetune:STEPS"`` -> (finetune, STEPS); ``"plan:K"`` -> (plan, K):
    the greedy placement refined by K analytic estimates (:func:`policies.rollout.plan_placement`), for a policy
    of the placement ``task`` only; ``"search:K"`` -> (search, K): the learned search of K
    simulator calls (:func:`policies.learned_search.learned_search`), for a placement-edit policy,
    annealing over the decoder's inputs from the network's outputs for a one-shot run with a
    decoder (:func:`graphopt.decoders.search.decoder_search`), or one greedy episode of K calls
    for a scheduling, fusion or joint edit policy (both checked
    when ``task`` is given; those three take greedy and search:K only).

    Raises:
        InvalidArgument: an unknown mode, or one the ``task``'s policy does not run in (one
            line naming ``mode``).
    """
    match = MODE_PATTERN.fullmatch(mode)
    if not match:
        raise InvalidArgument(
            "unknown {mode} {got!r}; use greedy, sample:K, finetune:STEPS, plan:K or search:K "
            "(K, STEPS >= 1)",
            got=mode,
        )
    if mode == "greedy":
        return "greedy", 1
    kind = mode.split(":")[0]
    if kind == "plan" and task is not None and task != "placement":
        raise InvalidArgument(
            "{mode} {got} refines placements; the policy was trained for {task}: use greedy, "
            "sample:K or finetune:STEPS",
            got=mode,
            task=task,
        )
    simulated_edit = task in SIMULATED_MOVE_TASKS
    one_shot = task is not None and get_task(task).one_shot
    if (
        kind == "search"
        and task is not None
        and task != "placement-edit"
        and not (simulated_edit or one_shot)
    ):
        raise InvalidArgument(
            "{mode} {got} is the learned search of an edit policy or of a decoder run; the "
            "policy was trained for {task}: use greedy, sample:K or finetune:STEPS",
            got=mode,
            task=task,
        )
    if simulated_edit and kind != "search":
        raise InvalidArgument(
            "{mode} {got} does not apply to a {task} policy, whose every step is a simulator "
            "call: use greedy or search:K (K calls)",
            got=mode,
            task=task,
        )
    return kind, int(mode.split(":")[1])
