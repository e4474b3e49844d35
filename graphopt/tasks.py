"""The task registry: the one place that says what each graphopt task decides.

A task is a compiler decision (or a set of them) that a policy, a heuristic or a search makes for
a whole graph. Everything that depends on the task reads it from :data:`TASKS`: the decision
arrays it sets (the others come from its reference, the best heuristic), the blocks of the
one-shot action (in the environments' layout), the Gymnasium id, and the stages of the
best-heuristic chain (:mod:`graphopt.baselines.staged`).

=================  ==========================  =====================================  ==========
task               decides                     reference chain stages                 episode
=================  ==========================  =====================================  ==========
placement          placement                   placement                              one step
scheduling         priority                    placement, scheduling                  one step
fusion             fusion                      placement, scheduling, fusion          one step
joint              placement, priority, fusion placement, scheduling, fusion          one step
placement-edit     placement                   placement                              moves
scheduling-edit    priority                    placement, scheduling                  moves
fusion-edit        fusion                      placement, scheduling, fusion          moves
joint-edit         placement, priority, fusion placement, scheduling, fusion          moves
=================  ==========================  =====================================  ==========
"""

from __future__ import annotations

from dataclasses import dataclass

STAGES = ("placement", "scheduling", "fusion")
"""The stages of the best-heuristic chain, in order; each stage sets one decision array."""
ARRAYS = {"placement": "placement", "scheduling": "priority", "fusion": "fusion"}
"""The :class:`~graphopt.typing.Decision` array each stage (and action block) sets."""


@dataclass(frozen=True)
class Task:
    """What one task decides and how it is wired.

    Attributes:
        name: the task's name (``--task``).
        blocks: the action blocks of the one-shot environment, in layout order (each block one
            value per op slot: ``placement`` D classes, ``scheduling`` P levels, ``fusion`` 2);
            empty for a multi-step task.
        env_id: the Gymnasium id (registered by importing :mod:`envs`).
        stages: the stages of its reference chain (:mod:`graphopt.baselines.staged`).
        one_shot: one decision for every op in one step (GO's episodes), else a sequence of moves.
        decides_as: the one-shot task whose decision it produces (itself for one-shot tasks):
            the baselines and the search it is compared with are those of that task.
        simulated_moves: a multi-step task whose every step is one simulator call (the
            scheduling, fusion and joint edit tasks: they are run and compared at ``K`` calls).
    """

    name: str
    blocks: tuple[str, ...]
    env_id: str
    stages: tuple[str, ...]
    one_shot: bool = True
    decides_as: str = ""
    simulated_moves: bool = False

    def __post_init__(self) -> None:
        if not self.decides_as:
            object.__setattr__(self, "decides_as", self.name)

    @property
    def decides(self) -> tuple[str, ...]:
        """The :class:`~graphopt.typing.Decision` arrays the task sets (``"priority"`` for
        scheduling)."""
        return tuple(ARRAYS[b] for b in (self.blocks or ("placement",)))

    @property
    def decides_fusion(self) -> bool:
        """Whether the task's decisions include fusion (the fusion-free bounds and the exact
        solver do not cover it)."""
        return "fusion" in self.stages


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task("placement", ("placement",), "graphopt/Placement-v0", ("placement",)),
        Task("scheduling", ("scheduling",), "graphopt/Scheduling-v0", STAGES[:2]),
        Task("fusion", ("fusion",), "graphopt/Fusion-v0", STAGES),
        Task("joint", STAGES, "graphopt/Joint-v0", STAGES),
        Task(
            "placement-edit",
            (),
            "graphopt/PlacementEdit-v0",
            ("placement",),
            one_shot=False,
            decides_as="placement",
        ),
        Task(
            "scheduling-edit",
            (),
            "graphopt/SchedulingEdit-v0",
            STAGES[:2],
            False,
            "scheduling",
            True,
        ),
        Task("fusion-edit", (), "graphopt/FusionEdit-v0", STAGES, False, "fusion", True),
        Task("joint-edit", (), "graphopt/JointEdit-v0", STAGES, False, "joint", True),
    )
}
"""Every task by name."""

SIMULATED_MOVE_TASKS: tuple[str, ...] = tuple(
    name for name, t in TASKS.items() if t.simulated_moves
)
"""The edit tasks whose every step is a simulator call (:mod:`envs.decision_edit`)."""

ONE_SHOT_TASKS: tuple[str, ...] = tuple(name for name, t in TASKS.items() if t.one_shot)
"""The tasks of one decision for every op (GO's); the baselines and searches cover these."""


def get_task(name: str, allowed: tuple[str, ...] | None = None) -> Task:
    """The task ``name``; ``ValueError`` naming the choices when it is unknown or not ``allowed``."""
    choices = tuple(TASKS) if allowed is None else allowed
    if name not in choices:
        raise ValueError(f"unknown task {name!r}; choose one of: {', '.join(choices)}")
    return TASKS[name]
