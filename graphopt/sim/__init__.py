"""Discrete-event simulator: how long does this graph take on this cluster under this decision?

Every rule the simulator applies, in order. ``N`` ops in topological order, ``D`` devices,
decision arrays ``placement`` (device per op), ``priority`` (level per op), ``fusion`` (bit per op);
missing arrays default to all zeros (everything on device 0, topological order, no fusion).
The cluster's model options (``contention``, ``route``, ``send``, ``copies``, ``dispatch``:
:mod:`graphopt.hardware`) choose among the variants of rules 5, 6 and 8, the default first.

0. **Placement constraints** (:mod:`graphopt.constraints`; none by default). An op may run only
   on a device whose kind its graph's ``allowed`` column lists (an empty list: any), and under
   the cluster's ``colocation: enforce`` the ops of one colocation group on one device. A
   placement that breaks either is invalid, ``step_time = inf``, the reason naming the op (or
   the group and two of its ops); it is checked before anything else and never simulated.
   Constraints that no placement can meet are refused when the graph is prepared for the
   cluster (``ValueError``).
1. **Kernels (fusion).** An op whose fusion bit is 1 is merged with *every* one of its consumers
   (union-find over those edges; the bit of an op without consumers is ignored). Each connected group
   is one kernel. Its *root* is its member with the highest topological index; the kernel runs on
   the root's device with the root's priority, and ties are broken by the root's index. The
   priorities of the other members are ignored.
2. **Legality** (:mod:`graphopt.sim.fusion_rules`, modelled on XLA's GPU fusion and PyTorch
   Inductor's scheduler). A kernel of two or more ops is legal when
   a. no member is ``opaque`` or a ``source`` (op classes, :mod:`graphopt.op_classes`);
   b. a contraction shares its kernel only with elementwise ops; reductions may share a kernel
      with each other and with elementwise and data-movement ops;
   c. every member is placed on the root's device: fusion never crosses devices;
   d. its distinct inputs plus outputs number at most 96;
   e. contracting each kernel to a node leaves the graph acyclic.
   Otherwise the fusion is illegal: the measurement is invalid with ``step_time = inf`` and the
   reason names the rule and the ops (for e, a kernel on the cycle).
3. **Op time.** On device ``d`` of kind ``k``: the op's measured time for kind ``k`` if it has one
   (the measurement includes the launch), else the roofline
   ``max(flops / (peak_flops[d] * c), bytes / (mem_bandwidth[d] * m)) + launch_overhead[d]``, with
   ``c`` and ``m`` the op's compute and memory efficiency on ``d`` (the device's ``efficiency``
   entry for the op's type, else for its class, else 1: :class:`~graphopt.hardware.Device`).
   Under a cluster's ``op_times: learned``, the learned per-op model (:mod:`graphopt.op_model`)
   gives the time of every op it can price that has no measured time, and that time counts as
   measured below.
4. **Kernel time.** A kernel of one op takes the op time. A fused kernel of ``m`` ops, if every member
   is measured for the kind: ``max(sum(measured) - (m - 1) * launch_overhead, max(measured))`` (one
   launch instead of ``m``); else the roofline over the group: the larger of its compute time, the
   sum of every member's ``flops / (peak_flops * c)``, and its memory time, the members' summed
   ``bytes / (mem_bandwidth * m)`` less what no longer crosses the kernel's border: every internal
   edge's bytes at its consumer's rate (reads that stay on chip) and the output bytes of every
   member whose consumers are all inside the kernel at that member's rate (writes never stored),
   floored at 0; plus one launch overhead. With no efficiency entries this is summed FLOPs over
   ``peak_flops`` and the border bytes over ``mem_bandwidth``.
5. **Dependencies and transfers.** A kernel is ready when every input edge from another kernel is
   satisfied: by the producer kernel's end when both are on the same device, else by the arrival
   of the send that carries it.

   a. *Sends* (``send``). ``per-device``: the output of op ``u`` is sent once to each remote
      device that hosts a consumer kernel; its size is the largest byte count among the edges
      from ``u`` to that device, and its arrival satisfies all of them. ``per-consumer``: it is
      sent once for every edge into a kernel on another device, with that edge's bytes, and the
      arrival satisfies that edge alone.
   b. *Routes* (``route``). ``direct``: a send is one transfer over the directed link
      ``(src, dst)``. ``via-host``: a send between two devices of which neither is the host
      ``h`` is two transfers, the first hop ``src -> h`` and the second ``h -> dst``, queued when
      the first arrives; sends to or from ``h`` stay one transfer. Per device, ``u``'s first hop
      is its one send to ``h`` (sized by the largest of its edges into ``h`` and into every
      device it relays to), shared by all of ``u``'s relayed sends; per consumer, each send has
      a first hop of its own.
   c. A transfer is queued when ``u``'s kernel ends (a second hop: when its first hop arrives)
      and takes ``latency + bytes / bandwidth`` of its link.
   d. *Contention* (``contention``). ``link``: transfers on one link run one at a time, in order
      of ``(queue time, producer index, consumer index)`` (the consumer index only orders the
      several sends of one producer that ``per-consumer`` puts on one link). ``none``: every
      transfer starts as soon as it is queued, any number at once on one link.

   Transfers overlap with compute and with other links.
6. **Devices.** A device runs one kernel at a time, without preemption. Whenever it is idle, it
   starts a ready kernel (``dispatch``): ``priority``, the one with the lowest
   ``(priority, root index)``; ``fcfs``, the one with the lowest ``(ready time, root index)``,
   its ready time the instant its last input edge was satisfied (0 for a kernel with none), the
   priorities ignored.
7. **Event order.** Time advances to the earliest end of a running kernel or transfer; *all* jobs
   ending at that instant complete (releasing memory, readying consumers, queueing transfers) before
   any idle device or link starts new work at that instant.
8. **Memory.** Parameters are resident on the device of the kernel holding their op for the whole
   step. An op's output (unless all its consumers are in its own kernel: inner tensors of a fused
   kernel are never stored) occupies its device from the kernel's start until the last consumer
   kernel, local or remote, has finished; an output with no consumer is freed when its kernel ends.
   A transferred copy occupies the destination from the transfer's start until the last consumer
   kernel whose edge it satisfies has finished (a first hop's copy on the host: and until every
   second hop it feeds has arrived); with ``copies: free`` a copy occupies no memory. Releases at
   an instant happen before allocations at that instant (rule 7). Peak memory per device =
   parameters + the peak of live activations; a peak above the device's capacity makes the
   decision invalid (OOM), naming the first such device. The step time is still reported.
9. **Results.** Step time = the latest kernel end (0 for an empty graph); busy time per device = the
   sum of its kernels' times; bytes moved = the sum over transfers (both hops of a routed send).
   A step time that is not finite (costs that overflow) makes the decision invalid.

Lower bounds (:mod:`graphopt.sim.bounds`), valid for every placement and schedule with the same
fusion: the critical path with every kernel at its fastest device time and no communication; and the
total work (each kernel at its fastest time) divided by the number of devices.
"""

from graphopt.sim.bounds import LowerBounds, lower_bounds
from graphopt.sim.simulator import BatchResult, PreparedGraph, Simulator, Timeline, simulate

__all__ = [
    "BatchResult",
    "LowerBounds",
    "PreparedGraph",
    "Simulator",
    "Timeline",
    "lower_bounds",
    "simulate",
]
