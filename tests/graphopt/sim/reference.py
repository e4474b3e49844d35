"""The readable twin of the compiled simulator: the rules of :mod:`graphopt.sim`, in plain Python.

Written for clarity, not speed: dictionaries and sets, ``heapq``, networkx for grouping and cycle
detection, and no shared code with ``graphopt.sim.engine``. The tests require the two to agree on
every result; the benchmark in ``bench/`` uses it to report the fast path's speed-up.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import networkx as nx

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.typing import Decision


@dataclass
class ReferenceResult:
    status: str  # "ok", "oom" or "illegal_fusion"
    step_time: float
    busy_time: list[float]
    peak_memory: list[float]
    bytes_moved: float
    oom_device: int = -1
    kernels: dict[int, tuple[int, float, float]] = field(default_factory=dict)
    """root op -> (device, start, end)"""
    transfers: list[tuple[int, int, int, float, float, float]] = field(default_factory=list)
    """(producer op, source device, destination device, bytes, start, end), in start order"""


@dataclass
class Send:
    """One transfer of rule 5: ``u``'s output from device ``src`` to ``dst``; ``order`` places
    it among the sends of ``u`` queued at one instant on one link (the consumer op under
    per-consumer sends); its arrival satisfies ``edges``; ``after`` is the send it waits for
    (its first hop through the host), if any."""

    u: int
    src: int
    dst: int
    nbytes: float
    order: int
    edges: list[tuple[int, int]]
    after: int | None = None


def fusion_violation(
    graph: CompGraph, placement: list[int], fusion: list[int], max_io: int = 96
) -> tuple[int, int, int]:
    """Rules 2a-2d of :mod:`graphopt.sim.fusion_rules`, plainly: ``(rule, op_a, op_b)`` of the
    first violation (rules a, b and c over the members of fused kernels in topological order, then
    a data-movement member of a contraction's kernel, rule code 5, then rule d over the kernels in
    root order), ``(0, -1, -1)`` when legal."""
    n = graph.num_ops
    fused = nx.Graph()
    fused.add_nodes_from(range(n))
    for s, d in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(), strict=True):
        if fusion[s]:
            fused.add_edge(s, d)
    root_of = {}
    for component in nx.connected_components(fused):
        for u in component:
            root_of[u] = max(component) if len(component) > 1 else None
    heroes: dict[int, int] = {}
    for v in range(n):
        r = root_of[v]
        if r is None:
            continue
        op_class = graph.op_classes[v]
        if op_class in ("opaque", "source"):
            return 1, v, -1
        if op_class in ("contraction", "reduction"):  # reductions may share, contractions not
            if r in heroes and "contraction" in (op_class, graph.op_classes[heroes[r]]):
                return 2, heroes[r], v
            heroes.setdefault(r, v)
        if placement[v] != placement[r]:
            return 3, v, r
    for v in range(n):
        r = root_of[v]
        hero = heroes.get(r) if r is not None else None
        moved = graph.op_classes[v] == "data_movement"
        if hero is not None and moved and graph.op_classes[hero] == "contraction":
            return 5, v, hero
    inputs: dict[int, set[int]] = {}
    outputs: dict[int, set[int]] = {}
    for v in range(n):
        r = root_of[v]
        if r is None:
            continue
        consumers = [
            d
            for s, d in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(), strict=True)
            if s == v
        ]
        producers = [
            s
            for s, d in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(), strict=True)
            if d == v
        ]
        inputs.setdefault(r, set()).update(p for p in producers if root_of[p] != r)
        if not consumers or any(root_of[c] != r for c in consumers):
            outputs.setdefault(r, set()).add(v)
    for r in sorted(inputs):
        count = len(inputs[r]) + len(outputs.get(r, set()))
        if count > max_io:
            return 4, r, count
    return 0, -1, -1


def simulate_reference(graph: CompGraph, cluster: Cluster, decision: Decision) -> ReferenceResult:
    n, num_dev = graph.num_ops, cluster.num_devices
    placement = [0] * n if decision.placement is None else [int(x) for x in decision.placement]
    priority = [0] * n if decision.priority is None else [int(x) for x in decision.priority]
    fusion = [0] * n if decision.fusion is None else [int(x) for x in decision.fusion]
    consumers: list[list[int]] = [[] for _ in range(n)]
    producers: list[list[int]] = [[] for _ in range(n)]
    edge_bytes: dict[tuple[int, int], float] = {}
    for s, d, b in zip(
        graph.edge_src.tolist(), graph.edge_dst.tolist(), graph.edge_bytes.tolist(), strict=True
    ):
        consumers[s].append(d)
        producers[d].append(s)
        edge_bytes[(s, d)] = b

    # Rule 1: kernels are the connected groups of fused edges; the root is the highest member.
    fused = nx.Graph()
    fused.add_nodes_from(range(n))
    for u in range(n):
        if fusion[u]:
            for v in consumers[u]:
                fused.add_edge(u, v)
    kernel_of: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    for component in nx.connected_components(fused):
        root = max(component)
        members[root] = sorted(component)
        for u in component:
            kernel_of[u] = root
    device = {k: placement[k] for k in members}
    busy = [0.0] * num_dev

    # Rules 2a-2d: what a compiler could fuse.
    if fusion_violation(graph, placement, fusion)[0] != 0:
        return ReferenceResult("illegal_fusion", math.inf, busy, [0.0] * num_dev, 0.0)

    # Rule 2e: the contracted graph must be acyclic.
    contracted = nx.DiGraph()
    contracted.add_nodes_from(members)
    for u in range(n):
        for v in consumers[u]:
            if kernel_of[u] != kernel_of[v]:
                contracted.add_edge(kernel_of[u], kernel_of[v])
    if not nx.is_directed_acyclic_graph(contracted):
        return ReferenceResult("illegal_fusion", math.inf, busy, [0.0] * num_dev, 0.0)

    # Rules 3-4: kernel durations.
    efficiency = [dev.op_efficiency(graph.op_types, graph.op_classes) for dev in cluster.devices]

    def flop_seconds(u: int, d: int) -> float:  # seconds per FLOP of op u on device d
        return 1.0 / (cluster.devices[d].peak_flops * float(efficiency[d][0][u]))

    def byte_seconds(u: int, d: int) -> float:  # seconds per byte of op u on device d
        return 1.0 / (cluster.devices[d].mem_bandwidth * float(efficiency[d][1][u]))

    def op_time(u: int, d: int) -> float:
        dev = cluster.devices[d]
        if dev.kind in graph.measured and not math.isnan(graph.measured[dev.kind][u]):
            return float(graph.measured[dev.kind][u])
        return (
            max(
                float(graph.flops[u]) * flop_seconds(u, d),
                float(graph.bytes_accessed[u]) * byte_seconds(u, d),
            )
            + dev.launch_overhead
        )

    def kernel_time(k: int) -> float:
        ops, d = members[k], device[k]
        if len(ops) == 1:
            return op_time(ops[0], d)
        dev = cluster.devices[d]
        measured = graph.measured.get(dev.kind)
        if measured is not None and all(not math.isnan(measured[u]) for u in ops):
            total = 0.0
            for u in ops:
                total += float(measured[u])
            return max(
                total - (len(ops) - 1) * dev.launch_overhead, max(float(measured[u]) for u in ops)
            )
        compute = 0.0
        memory = 0.0
        for u in ops:
            compute += float(graph.flops[u]) * flop_seconds(u, d)
            memory += float(graph.bytes_accessed[u]) * byte_seconds(u, d)
        for u in ops:
            for v in consumers[u]:
                if kernel_of[v] == k:
                    memory -= edge_bytes[(u, v)] * byte_seconds(v, d)
            if consumers[u] and all(kernel_of[v] == k for v in consumers[u]):
                memory -= float(graph.output_bytes[u]) * byte_seconds(u, d)
        memory = max(memory, 0.0)
        return max(compute, memory) + dev.launch_overhead

    duration = {k: kernel_time(k) for k in members}

    # Rule 5: the sends. Per device: one per (producer, remote device hosting a consumer kernel),
    # the largest edge into that device; per consumer: one per edge into a remote kernel. Under
    # via-host, a send between two devices that are not the host is two hops through the host;
    # per device, the producer's one send to the host is the first hop of all of them.
    host = cluster.host_index  # -1: direct
    per_consumer = cluster.send == "per-consumer"
    sends: list[Send] = []

    def relayed(s: int, t: int) -> bool:
        return host >= 0 and host not in (s, t)

    for u in range(n):
        s = device[kernel_of[u]]
        remote = [
            v for v in consumers[u] if kernel_of[v] != kernel_of[u] and device[kernel_of[v]] != s
        ]
        if per_consumer:
            for v in remote:
                t, nbytes = device[kernel_of[v]], edge_bytes[(u, v)]
                if relayed(s, t):
                    sends.append(Send(u, s, host, nbytes, order=v, edges=[]))
                    sends.append(Send(u, host, t, nbytes, order=v, edges=[(u, v)]))
                    sends[-1].after = len(sends) - 2
                else:
                    sends.append(Send(u, s, t, nbytes, order=v, edges=[(u, v)]))
            continue
        into: dict[int, list[int]] = {}
        for v in remote:
            into.setdefault(device[kernel_of[v]], []).append(v)
        hops = [t for t in into if relayed(s, t)]
        to_host = None
        if hops and host not in into:
            into[host] = []  # the first hop: u's send to the host, with no consumer there
        for t in sorted(into):
            if t in hops:
                continue
            nbytes = max((edge_bytes[(u, v)] for v in into[t]), default=0.0)
            if t == host:
                nbytes = max([nbytes] + [edge_bytes[(u, v)] for h in hops for v in into[h]])
                to_host = len(sends)
            sends.append(Send(u, s, t, nbytes, order=0, edges=[(u, v) for v in into[t]]))
        for t in sorted(hops):
            nbytes = max(edge_bytes[(u, v)] for v in into[t])
            sends.append(Send(u, host, t, nbytes, order=0, edges=[(u, v) for v in into[t]]))
            sends[-1].after = to_host

    waiting = {k: 0 for k in members}  # unmet input edges per kernel
    for u in range(n):
        for v in consumers[u]:
            if kernel_of[u] != kernel_of[v]:
                waiting[kernel_of[v]] += 1

    # Rule 8 bookkeeping: who still needs each stored output and each received copy (the
    # consumer kernels of the edges a send satisfies, and the hops after it).
    outside = {u: {kernel_of[v] for v in consumers[u]} - {kernel_of[u]} for u in range(n)}
    stored = {u for u in range(n) if not consumers[u] or outside[u]}
    still_needed = {u: set(outside[u]) for u in stored}
    readers: list[set[tuple[str, int]]] = [
        {("kernel", kernel_of[v]) for _, v in send.edges} for send in sends
    ]
    sends_of: dict[int, list[int]] = {u: [] for u in range(n)}  # u's sends
    hops_after: dict[int, list[int]] = {i: [] for i in range(len(sends))}
    copies_read_by: dict[int, list[int]] = {k: [] for k in members}  # the sends a kernel reads
    for i, send in enumerate(sends):
        sends_of[send.u].append(i)
        if send.after is not None:
            readers[send.after].add(("hop", i))
            hops_after[send.after].append(i)
        for reader, k in readers[i]:
            if reader == "kernel":
                copies_read_by[k].append(i)
    charged = cluster.copies == "charged"
    memory = [0.0] * num_dev
    peak = [0.0] * num_dev

    def read(i: int, reader: tuple[str, int]) -> None:  # a reader of send i's copy is done
        if reader in readers[i]:
            readers[i].discard(reader)
            if not readers[i] and charged:
                memory[sends[i].dst] -= sends[i].nbytes

    ready: list[list[tuple[int, int]]] = [[] for _ in range(num_dev)]
    links: dict[tuple[int, int], list[tuple[float, int, int, int]]] = {}
    running_device: dict[int, tuple[float, int]] = {}  # device -> (end, kernel)
    running_send: dict[int, float] = {}  # send -> end
    busy_links: set[tuple[int, int]] = set()
    result = ReferenceResult("ok", 0.0, busy, peak, 0.0)

    def queue(i: int, now: float) -> None:  # rule 5: order (queue time, producer, consumer)
        send = sends[i]
        heapq.heappush(links.setdefault((send.src, send.dst), []), (now, send.u, send.order, i))

    # Rule 6: a device starts its ready kernel of lowest (priority, root); under fcfs dispatch,
    # of lowest (time it became ready, root).
    fcfs = cluster.dispatch == "fcfs"
    now = 0.0

    def make_ready(k: int) -> None:
        waiting[k] -= 1
        if waiting[k] == 0:
            heapq.heappush(ready[device[k]], (now if fcfs else priority[k], k))

    for k in sorted(members):
        if waiting[k] == 0:
            heapq.heappush(ready[device[k]], (0.0 if fcfs else priority[k], k))

    while True:
        # Rule 6 / 7: every idle device and link starts its best queued job.
        for d in range(num_dev):
            if d not in running_device and ready[d]:
                _, k = heapq.heappop(ready[d])
                end = now + duration[k]
                running_device[d] = (end, k)
                result.kernels[k] = (d, now, end)
                busy[d] += duration[k]
                for u in members[k]:
                    if u in stored:
                        memory[d] += float(graph.output_bytes[u])
                peak[d] = max(peak[d], memory[d])
        for link in sorted(links):
            # with contention one transfer at a time per link; without, all that are queued
            while link not in busy_links and links[link]:
                *_, i = heapq.heappop(links[link])
                s, t = link
                send = sends[i]
                end = now + (cluster.latency[s, t] + send.nbytes / cluster.bandwidth[s, t])
                running_send[i] = end
                if cluster.contention == "link":
                    busy_links.add(link)
                result.transfers.append((send.u, s, t, send.nbytes, now, end))
                if charged:
                    memory[t] += send.nbytes
                    peak[t] = max(peak[t], memory[t])
                result.bytes_moved += send.nbytes
        if not running_device and not running_send:
            break
        now = min([end for end, _ in running_device.values()] + list(running_send.values()))
        for d in sorted(running_device):
            end, k = running_device[d]
            if end != now:
                continue
            del running_device[d]
            for u in members[k]:
                for w in sorted(set(producers[u])):
                    g = kernel_of[w]
                    if g == k or k not in still_needed[w]:
                        continue
                    still_needed[w].discard(k)
                    if not still_needed[w]:
                        memory[device[g]] -= float(graph.output_bytes[w])
                if u in stored and not outside[u]:
                    memory[d] -= float(graph.output_bytes[u])
                for v in consumers[u]:
                    h = kernel_of[v]
                    if h != k and device[h] == d:
                        make_ready(h)
            for i in copies_read_by[k]:  # the copies this kernel was the last to read
                read(i, ("kernel", k))
            for u in members[k]:
                for i in sends_of[u]:
                    if sends[i].after is None:
                        queue(i, now)
        for i in sorted(running_send):
            if running_send[i] != now:
                continue
            del running_send[i]
            send = sends[i]
            busy_links.discard((send.src, send.dst))
            for _, v in send.edges:
                make_ready(kernel_of[v])
            if send.after is not None:  # the host's copy has been passed on
                read(send.after, ("hop", i))
            for j in hops_after[i]:
                queue(j, now)

    for u in range(n):
        peak[device[kernel_of[u]]] += float(graph.param_bytes[u])
    result.step_time = max((end for _, _, end in result.kernels.values()), default=0.0)
    for d in range(num_dev):
        if peak[d] > cluster.devices[d].memory:
            result.status = "oom"
            result.oom_device = d
            break
    return result
