"""``graphopt/Scheduling-v0``: Operation scheduling: the priority of each op among the ready ops of its device."""

from __future__ import annotations

from envs.base import GraphOptEnv


class SchedulingEnv(GraphOptEnv):
    """Operation scheduling: the priority of each op among the ready ops of its device.

    ## Description

    The placement is fixed to the per-graph reference placement (the best placement heuristic);
    the agent sets a priority level for every op. Among ready ops on a device the lowest level runs
    first, ties by topological index.

    ## Action Space

    ``MultiDiscrete([P] * max_ops)`` with ``P = num_priorities``; padding entries are ignored.

    ## Observation Space

    A ``Dict`` of fixed-shape arrays padded to ``max_ops`` op slots and ``max_edges`` edge slots
    (``obs_mode="full"``, the default); every feature, its scaling and its padding value is listed in
    :mod:`envs.encoding`:

    | key | shape | content |
    |-----|-------|---------|
    | op_features | (max_ops, 13) float32 | scaled costs, degrees, position; padding -1 |
    | op_type | (max_ops,) int64 | op-type id >= 1; padding 0 |
    | op_mask | (max_ops,) int8 | 1 for real ops |
    | edge_index | (2, max_edges) int64 | producer, consumer; padding -1 |
    | edge_features | (max_edges, 1) float32 | scaled tensor bytes; padding -1 |
    | device_features | (16, 5) float32 | device figures; padding -1 |
    | device_mask | (16,) int8 | 1 for real devices |
    | graph_features | (8,) float32 | cluster and graph totals |
    | counts | (2,) int64 | number of ops, number of edges |
    | hint | (len(action),) int64 | the reference (best heuristic) decision laid out as an action; -1 in padding slots, everywhere with ``hint=False`` |

    The hint lets a policy start from the best heuristic and learn to improve on it; an agent may
    ignore it, and ``hint=False`` removes the information.

    With ``obs_mode="id"`` the observation is ``{"graph_id": (1,) int64}``, the graph's index in
    ``env.encoded_graphs()``: rollout memory then no longer grows with graph size.

    ## Rewards

    One reward per episode, from the step time ``t`` of the decision and ``t_ref`` of the
    reference decision (the best heuristic by default; see :mod:`envs.rewards`): ``speedup``
    (default) ``1 - sqrt(t / t_ref)``, ``neg_sqrt_time`` ``-sqrt(t)``, ``log_speedup``
    ``log(t_ref / t)``. Valid times are capped at 9 ``t_ref``; an invalid decision (out of memory,
    illegal fusion) is scored as a step of 16 ``t_ref``. ``info`` always carries ``step_time``,
    ``valid``, ``reason``, ``reference_time``, ``reference``, ``speedup`` and ``graph``.

    ## Starting State

    ``reset`` draws one of the graphs uniformly with ``self.np_random`` (``options={"graph": i}``
    picks graph ``i``) and returns its observation.

    ## Episode End

    Every episode is one step: ``terminated`` is always True after ``step``, ``truncated`` False;
    the observation ``step`` returns is an all-zero placeholder (``counts == [0, 0]``).
    ``env.save_episode(path)`` writes the decision with graph, cluster and seed; replay it with
    ``graphopt simulate GRAPH --cluster CLUSTER --decision path``.

    ## Arguments

    - ``graphs``: a graph name, ``suite:NAME``, a graph file, a ``CompGraph``, or a list of those
      (default ``"suite:tiny"``).
    - ``cluster``: a preset name, a cluster file or a ``Cluster`` (default ``v100-nvlink-4``).
    - ``cost_model``: any ``graphopt.typing.CostModel`` (default: the simulator).
    - ``reward_mode``: ``"speedup"``, ``"neg_sqrt_time"`` or ``"log_speedup"``.
    - ``max_ops`` / ``max_edges``: padding sizes (default: the largest graph; ``4 * max_ops``).
    - ``num_priorities``: scheduling levels ``P`` (default 8).
    - ``reference``: ``"best"`` or a placer name (``"single"``, ...), see :mod:`envs.reference`.
    - ``obs_mode``: ``"full"`` or ``"id"``.
    - ``hint``: include the reference decision in the observation (default True).
    - ``seed``: seeds the first ``reset``.

    ## Version History

    - v0: initial version.
    """

    task = "scheduling"
