"""graphopt: the graph-level decisions of an ML compiler (placement, scheduling, fusion), learned
and searched against a simulator.

The front door is :func:`optimize`: the best decision for one graph within a budget, as
``graphopt optimize`` on the command line. Everything else lives in the subpackages (the layers
of docs/architecture.md); importing ``graphopt`` alone loads none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from graphopt.graph import CompGraph
    from graphopt.hardware import Cluster
    from graphopt.typing import Decision, Measurement


def optimize(
    graph: CompGraph | str,
    cluster: Cluster | str,
    seconds: float | None = None,
    *,
    calls: int | None = None,
    task: str = "placement",
    seed: int = 0,
    prescreen: int = 1,
    moves: str | None = None,
) -> tuple[Decision, Measurement]:
    """The best decision for ``task`` on ``graph`` and ``cluster`` within the budget, and its
    simulated measurement: the best heuristic, then the strongest search of the task
    (:func:`graphopt.optimizer.optimize_graph`, which also reports every heuristic, the calls
    and the progress).

    Example:
        >>> decision, measurement = graphopt.optimize("gnmt-tiny", "v100-nvlink-4", seconds=10)

    Args:
        graph: a :class:`~graphopt.graph.CompGraph`, or a name, file or source naming one graph.
        cluster: a :class:`~graphopt.hardware.Cluster`, a preset name or a cluster file.
        seconds: wall time to spend (default 10 when ``calls`` is not given either).
        calls: simulator calls of the search instead of seconds.
        task: placement, scheduling, fusion or joint.
        seed: seeds the search.
        prescreen: placement: window moves ranked by the analytic estimate per simulator call
            (1: none; for ``calls`` budgets, when calls are the scarce resource).
        moves: placement: ``"builtin"`` or a file of ``graphopt moves train``: the second half of
            the budget goes to single-op moves in the order that learned model ranks them, as
            ``graphopt optimize --moves`` (docs/results/moves.md).

    Raises:
        graphopt.errors.InvalidArgument: a bad budget, graph, cluster, task or move model, or a
            move model with a cluster whose link model it cannot read.
    """
    # the package's imports from above it (tests/test_layers.py FRONT_DOOR)
    from graphopt.optimizer import optimize_graph, resolve

    phase = None
    if moves is not None:
        from graphopt.nn.move_search import check_moves, load_move_phase

        graph, cluster = resolve(graph, cluster)
        check_moves(graph, cluster)  # before any work
        phase = load_move_phase(moves, seed)
    if seconds is None and calls is None:
        seconds = 10.0
    found = optimize_graph(
        graph,
        cluster,
        task=task,
        seconds=seconds,
        calls=calls,
        seed=seed,
        prescreen=prescreen,
        moves=phase,
    )
    return found.decision, found.measurement
