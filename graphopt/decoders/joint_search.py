"""The joint decoder search: placement, priorities and fusion searched together through the
decoders, from the best joint heuristic (``graphopt optimize --task joint``).

The state is the joint task's per-op outputs ``(C, N)`` (:func:`graphopt.decoders.decision.channels`:
``shift``, ``gate``, ``affinity:0..D-1``, ``priority``, ``fusion``), all zero at the start, and
:class:`JointDecoder` turns them into a decision, anchored on the reference (the best joint
heuristic, e.g. ``heft+critical-path+greedy``):

1. **Placement**: the placement decoder (:func:`~graphopt.decoders.placement.decode_placement`,
   ``heft-lc`` timing, memory-aware) with the reference's placement as the anchor and ``gate``
   releasing ops from it, as in :func:`~graphopt.decoders.search.search_placements`. A released
   op of one of the reference's fused kernels (its fusion bits, less the vetoed ones) goes where
   the kernel's first placed op went, so a window moves whole kernels and does not split them.
2. **Priorities**: the reference's priorities while the placement is the reference's, else the
   reference's scheduler (``critical-path``, ``heft-rank``...) run on the new placement; then
   shifted by ``priority`` (:func:`~graphopt.decoders.scheduling.decode_priorities`; a positive
   shift runs the op earlier).
3. **Fusion**: the reference's bits projected onto the placement (a bit whose op has a consumer
   on another device is unset: fusion never crosses devices), then the fusion decoder's moves:
   a ``fusion`` score below :data:`~graphopt.decoders.fusion.VETO` vetoes the op's fusion, one
   above :data:`~graphopt.decoders.fusion.ADD` adds it (where the fusion mask allows it and every
   consumer is on the op's device). Bits that break a rule (:mod:`graphopt.sim.fusion_rules`,
   acyclicity included) fall back to the projection without additions, then to the XLA pass on
   the placement: every decoded decision is legal.

With zero outputs the decision is the reference exactly.

Moves (:func:`joint_move`), one per cost-model call, accepted as in
:func:`~graphopt.decoders.search.decoder_search` (Metropolis on log step time, the best seen kept):

- placement (probability :data:`P_PLACEMENT`): the placement search's moves
  (:func:`~graphopt.decoders.search.window_move`: a window released towards a device, one op
  released, one op anchored again);
- priorities (:data:`P_PRIORITY`): a window of the topological order (length up to
  ``WINDOW * N``), or one op, has its ``priority`` shift moved by ``N(0, 1)``;
- fusion (the rest): one op of the fusion mask (or a window of them) toggled between 0 and a veto
  (reference bit set) or an addition (bit unset).

:func:`search_joint` runs the search for a budget of calls or seconds.

Performance: a decode is dominated by the placement decoder's list scheduler (on torch:lstm,
5,348 ops, about 15 ms of a 27 ms decode; a simulator call is 2 ms). The list inputs are computed
once per search; the last two placements are kept, so a priority or fusion move that leaves the
placement channels and the kernels as they were skips the list scheduler; the scheduler's
priorities of the last new placement are kept likewise.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from graphopt.baselines.fusion import xla_fusion
from graphopt.baselines.heft import list_inputs
from graphopt.baselines.scheduling import SCHEDULERS
from graphopt.decoders.decision import channels, clean_outputs, scheduler_of
from graphopt.decoders.fusion import ADD, VETO, is_acyclic
from graphopt.decoders.placement import PlacementInputs, decode_placement
from graphopt.decoders.scheduling import decode_priorities
from graphopt.decoders.search import WINDOW, DecoderSearchResult, decoder_search, window_move
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import Simulator
from graphopt.sim.engine import build_kernels
from graphopt.sim.fusion_rules import RULE_OK, FusionRules, fusion_mask
from graphopt.typing import CostModel, Decision, FloatArray, IntArray, Measurement

P_PLACEMENT = 0.6
"""Share of the moves that change the placement channels."""
P_PRIORITY = 0.2
"""Share of the moves that shift priorities (fusion moves have the rest)."""
FUSION_WINDOW = 0.5
"""Share of the fusion moves that toggle a window of fusible ops rather than one."""
STRENGTH = 2.0
"""The ``fusion`` score of a toggled op: ``-STRENGTH`` vetoes, ``+STRENGTH`` adds."""


class JointDecoder:
    """Decodes joint outputs ``(C, N)`` into a legal decision anchored on ``reference``
    (module docstring).

    Args:
        graph, cluster: what is decided.
        reference: the anchor, every array set (the best joint heuristic's).
        reference_name: its chain's name (``heft+critical-path+xla``): names the scheduler rerun
            on a new placement (``critical-path`` when it names none).

    Raises:
        ValueError: a reference that does not fit the graph or the cluster.
    """

    def __init__(
        self, graph: CompGraph, cluster: Cluster, reference: Decision, reference_name: str = ""
    ) -> None:
        n = graph.num_ops
        ref = reference.filled(n)
        assert ref.placement is not None and ref.priority is not None and ref.fusion is not None
        if ref.placement.shape != (n,) or ref.priority.shape != (n,) or ref.fusion.shape != (n,):
            raise ValueError(
                f"the reference decision does not have one entry per op of {graph.name!r}"
            )
        self.graph, self.cluster, self.reference = graph, cluster, ref
        self.names = channels("joint", cluster.num_devices)
        self.scheduler = SCHEDULERS[scheduler_of(reference_name)]
        self.prologue = list_inputs(graph, cluster)  # computed once, not per decode
        self.rules = FusionRules(graph)
        self.mask = fusion_mask(graph).astype(bool)
        self.fusible = np.flatnonzero(self.mask)
        self.ref_placement: IntArray = ref.placement
        self.ref_priority: IntArray = ref.priority
        self.ref_bits = np.asarray(ref.fusion, dtype=np.int64)
        self._priority_of: tuple[IntArray, IntArray] | None = None  # last (placement, priorities)
        self._placements: list[tuple[FloatArray, IntArray, IntArray]] = []  # the last two decoded

    @property
    def num_channels(self) -> int:
        return len(self.names)

    def channel(self, name: str) -> int:
        """The row of channel ``name`` in the outputs."""
        return self.names.index(name)

    def decode(self, outputs: object) -> Decision:
        """The decision ``outputs`` steer (module docstring): legal, every array set.

        Raises:
            ValueError: outputs of the wrong shape or with a NaN (naming the op).
        """
        out = clean_outputs(outputs, self.graph, self.num_channels)
        score = out[self.channel("fusion")]
        kept = self.ref_bits * (score >= VETO)
        placement = self._placement(out[: 2 + self.cluster.num_devices], kept)
        priority = decode_priorities(self._priorities(placement), out[self.channel("priority")])
        fusion = self._fusion(placement, priority, kept, score > ADD)
        return Decision(placement=placement, priority=priority, fusion=fusion)

    def _placement(self, rows: FloatArray, kept: IntArray) -> IntArray:
        """The placement the placement channels ``rows`` steer, the kernels of ``kept`` moving
        whole. The last two are kept: a priority or fusion move that leaves the placement channels
        and the kernels as they were reuses the placement (the list scheduler is most of a
        decode's time)."""
        for seen_rows, seen_kept, placement in self._placements:
            if np.array_equal(seen_rows, rows) and np.array_equal(seen_kept, kept):
                return placement
        d = self.cluster.num_devices
        placement = decode_placement(
            self.graph,
            self.cluster,
            PlacementInputs(
                shift=rows[0], gate=rows[1], affinity=rows[2 : 2 + d].T, anchor=self.ref_placement
            ),
            contention=True,
            memory=True,
            prologue=self.prologue,
            groups=self._kernels(kept),
        )
        self._placements = [(rows.copy(), kept.copy(), placement), *self._placements[:1]]
        return placement

    def _kernels(self, bits: IntArray) -> tuple[IntArray, int]:
        """Kernel index of each op of two or more (``-1`` for an op alone) and their count."""
        n = self.graph.num_ops
        succ_ptr, succ_dst = self.graph.successors_csr
        op_int = np.zeros((6, n + 1), dtype=np.int32)
        # the simulator's types (int32 CSR, writable int64 bits): build_kernels compiled once
        csr = succ_ptr.astype(np.int32), succ_dst.astype(np.int32)
        kernel_of, _, _, _ = build_kernels(*csr, np.array(bits, dtype=np.int64), op_int)
        kernel_of = np.asarray(kernel_of, dtype=np.int64)
        size = np.bincount(kernel_of, minlength=n)
        shared = size >= 2
        ids = np.cumsum(shared) - 1
        group = np.where(shared[kernel_of], ids[kernel_of], -1)
        return group.astype(np.int64), int(shared.sum())

    def _priorities(self, placement: IntArray) -> IntArray:
        """The reference's priorities for its own placement, else its scheduler's for this one
        (the last placement's kept: a priority or fusion move reuses it)."""
        if np.array_equal(placement, self.ref_placement):
            return self.ref_priority
        last = self._priority_of
        if last is not None and np.array_equal(last[0], placement):
            return last[1]
        priority = np.asarray(self.scheduler(self.graph, self.cluster, placement), dtype=np.int64)
        self._priority_of = (placement, priority)
        return priority

    def _fusion(
        self, placement: IntArray, priority: IntArray, kept: IntArray, add: np.ndarray
    ) -> IntArray:
        """The kept reference bits projected onto ``placement``, plus the additions; legal."""
        src, dst = self.graph.edge_src, self.graph.edge_dst
        crossing = np.zeros(self.graph.num_ops, dtype=bool)
        crossing[src[placement[src] != placement[dst]]] = True
        projected = np.where(crossing, 0, kept)
        bits = np.where(add & self.mask & ~crossing, 1, projected)
        if np.array_equal(bits, self.ref_bits) and np.array_equal(placement, self.ref_placement):
            return bits  # the reference's own bits and placement: legal
        for candidate in (bits, projected):
            if self._legal(placement, candidate):
                return candidate
        return xla_fusion(self.graph, self.cluster, Decision(placement, priority))

    def _legal(self, placement: IntArray, bits: IntArray) -> bool:
        ok = self.rules.violation(placement, bits)[0] == RULE_OK
        return ok and is_acyclic(self.graph, bits)


def joint_move(decoder: JointDecoder) -> Callable[[FloatArray, np.random.Generator], FloatArray]:
    """The joint search's moves (module docstring) for ``decoder``'s channels."""
    n = decoder.graph.num_ops
    gate = decoder.channel("gate")
    devices = [c for c, name in enumerate(decoder.names) if name.startswith("affinity:")]
    prio, fuse = decoder.channel("priority"), decoder.channel("fusion")
    longest = max(1, int(WINDOW * n))
    fusible = decoder.fusible
    ref_bits = decoder.ref_bits

    def move(current: FloatArray, rng: np.random.Generator) -> FloatArray:
        r = rng.random()
        if r < P_PLACEMENT or (r >= P_PLACEMENT + P_PRIORITY and not len(fusible)):
            return window_move(current, rng, gate, devices, [], longest, 1.0)
        cand = current.copy()
        if r < P_PLACEMENT + P_PRIORITY:
            first = int(rng.integers(0, n))
            length = int(rng.integers(1, longest + 1)) if rng.random() < 0.5 else 1
            ops = np.arange(first, min(n, first + length))
            cand[prio, ops] += rng.normal(0.0, 1.0)
            return cand
        first = int(rng.integers(0, len(fusible)))
        length = int(rng.integers(1, max(1, int(WINDOW * len(fusible))) + 1))
        ops = fusible[first : first + (length if rng.random() < FUSION_WINDOW else 1)]
        on = cand[fuse, ops] != 0
        cand[fuse, ops] = np.where(on, 0.0, np.where(ref_bits[ops] == 1, -STRENGTH, STRENGTH))
        return cand

    return move


def search_joint(
    graph: CompGraph,
    cluster: Cluster,
    reference: Decision,
    reference_name: str = "",
    budget: int | None = None,
    *,
    seed: int = 0,
    seconds: float | None = None,
    t_start: float = 0.003,
    t_end: float = 1e-5,
    on_step: Callable[[int, Decision, Measurement], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    cost_model: CostModel | None = None,
) -> DecoderSearchResult:
    """The joint decoder search from zero outputs anchored on ``reference`` (module docstring);
    the first call measures the reference itself.

    Args:
        graph, cluster: what is decided.
        reference: the anchor (the best joint heuristic's decision); arrays left out take their
            defaults.
        reference_name: its chain's name (its scheduler is rerun on new placements).
        budget, seed, seconds, t_start, t_end, on_step, clock: as
            :func:`~graphopt.decoders.search.decoder_search`.
        cost_model: prices each decision (default: a new :class:`~graphopt.sim.Simulator`).

    Raises:
        ValueError: as :func:`~graphopt.decoders.search.decoder_search`; a reference that does
            not fit the graph or cluster.
    """
    model: CostModel = cost_model if cost_model is not None else Simulator()
    decoder = JointDecoder(graph, cluster, reference, reference_name)

    def evaluate(outputs: FloatArray) -> tuple[Decision, Measurement]:
        decision = decoder.decode(outputs)
        return decision, model.evaluate(graph, cluster, decision)

    return decoder_search(
        evaluate,
        np.zeros((decoder.num_channels, graph.num_ops)),
        budget,
        seed=seed,
        t_start=t_start,
        t_end=t_end,
        seconds=seconds,
        on_step=on_step,
        clock=clock,
        move=joint_move(decoder),
    )
