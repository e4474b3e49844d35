"""The fusion groups PyTorch Inductor chooses for a graph imported by :mod:`graphopt.importers.torch`.

A real compiler's answer to "which ops run as one kernel": :func:`inductor_groups` gives
Inductor the very FX graph :func:`~graphopt.importers.torch.from_torch` converted (same model, same
fake inputs, same capture), lets it lower and schedule that graph, and reads the scheduler's nodes
*after fusion*: each is one kernel, and each IR node's ``origins`` names the FX nodes it computes.
Those names are mapped back to the ops of the graphopt graph. The fuser built on it is
:func:`graphopt.baselines.inductor.inductor_fusion`.

Compilation (CPU, the C++ backend; nothing is run and no weight memory is used):

* **forward** graphs (``training=False``, ``mode=forward``): the core-ATen graph of
  ``torch.export`` goes to ``torch._inductor.compile_fx.compile_fx`` as one graph.
* **training** graphs: the joint forward + backward graph is split by AOTAutograd's own tag
  (``node.meta["partitioner_tag"] == "is_backward"``) into a forward graph (its outputs: the
  model's outputs, the updated buffers and every forward value the backward reads) and a backward
  graph (its inputs: those saved values and the tangents), and each is compiled on its own, as
  AOTAutograd does. The split saves every value the backward needs (AOTAutograd's
  ``default_partition``): Inductor's default min-cut partitioner would recompute some cheap
  forward ops inside backward kernels instead, ops the graphopt graph does not hold twice. No
  kernel spans forward and backward.

The decisions are those of Inductor's CPU (C++) backend, with oneDNN off and attention on the
math backend as in the import (:func:`~graphopt.importers.torch.from_torch`); its GPU (Triton)
backend decides differently in places (the CPU backend's outer-loop fusion, for one).

Stopping before code generation: ``Scheduler.codegen`` is patched, for the duration of one call,
to record the scheduler's nodes (fusion, loop merging and reordering done) and raise a private
exception, which :func:`inductor_groups` catches; no C++ is generated or compiled, so a call takes
seconds. Inductor's FX-graph and AOTAutograd caches are switched off for the call (a cache hit
would skip the scheduler), and so are its compile worker processes. This reaches into private
Inductor internals (``Scheduler.codegen``, IR ``origins``, ``ConcatKernel.realize_into``,
``ExternKernel.copy_input``), patched for the duration of a call (not thread-safe), and was
written against torch 2.13; the tests pin the behaviour.

Matching (FX node -> graphopt op): Inductor re-traces the graph it is given (its own
decompositions, functionalization, the post-grad pattern passes), so the FX nodes in ``origins``
are new nodes. Torch records where each new node came from (``node.meta["from_node"]``, a chain
of ``NodeSource`` s, one per pass); the chain is followed back to a node of the graph handed to
Inductor, whose name is the FX node name :func:`from_torch` gave the graphopt op. An origin whose
chain reaches no such node (a node made up by a pattern replacement without provenance) is
*unmatched* and listed; an origin that reaches a node that is not an op of the graphopt graph (a
view, a ``getitem``, a placeholder: folded by the importer) is ignored.

Groups: one per kernel, i.e. per scheduler node after fusion that generates code (a fused node,
an outer-loop-fused node, a single pointwise or reduction node, an extern kernel such as a matmul
or convolution; ``NopKernel`` and ``MultiOutput`` nodes are skipped), holding the graphopt ops it
computes, in topological order. What a kernel computes, from its IR nodes' ``origins``:

* an extern kernel computes its own FX node only (Inductor also lists the producers inlined
  into its inputs, which another kernel computes);
* copies made while lowering a consumer (a ``cat`` writing each input into its slice, a fallback
  kernel copying an input) are given the origins of the input they copy, not of all inputs
  (:func:`_precise_copies`);
* an FX node some kernel runs a reduction loop of is computed in that kernel only.

An op can still appear in several kernels: Inductor inlines a pointwise op into each consumer
instead of storing it, and splits one ATen op (batch norm in training) into a reduction kernel
and an epilogue inlined into its consumer. Each op is assigned to **the last kernel** (in
Inductor's schedule order) it appears in, where its computation completes: batch norm goes with
the ReLU its epilogue was inlined into, a duplicated pointwise op with its last consumer (counted
in :attr:`InductorGroups.split_ops`). An op in no kernel whose only consumer's kernel took it in
is *absorbed* there: an elementwise op (a no-op ``clone`` Inductor drops) or a contraction whose
consumer is a library call (the pattern ``mm + add -> addmm`` names the add only). Other ops in
no kernel are *unmatched* and stay unfused: a ``cat`` whose inputs are written in place into its
output, ops removed or replaced by a pattern without provenance. Match rate: the share of the
graphopt ops found in a kernel by name (absorbed ones not counted).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from unittest import mock

import torch
from torch.fx import Graph, GraphModule, Node

from graphopt.importers import torch as torch_importer
from graphopt.op_classes import CONTRACTION, ELEMENTWISE, REDUCTION, classify

BACKWARD_TAG = "is_backward"


@dataclass(frozen=True)
class InductorGroups:
    """The kernels Inductor formed, as groups of graphopt op names.

    Attributes:
        groups: one list of op names per kernel holding at least one graphopt op, in Inductor's
            schedule order (forward graph first for training graphs); within a group, the ops in
            the graphopt graph's (topological) order. Singletons included.
        reductions: per group, its ops whose reduction loop the kernel runs (a reduction IR
            node of the kernel computes an ATen reduction made from the op), e.g. the statistics
            of a layer norm; an op Inductor lowers without a reduction loop (max pooling, batch
            norm in eval mode) is in none.
        op_names: every op of the graphopt graph of the same model, in its order.
        kernels: kernels Inductor formed (scheduler nodes after fusion that generate code).
        unmatched_ops: graphopt ops found in no kernel and not absorbed.
        absorbed_ops: graphopt ops found in no kernel, put in the kernel of their only consumer.
        unmatched_origins: FX nodes of Inductor's graphs whose provenance reaches no node of the
            graph handed to Inductor (``"graph:node"``).
        split_ops: graphopt ops found in more than one kernel (assigned to the last one).
        seconds: wall time of Inductor's lowering and scheduling (all graphs).
        capture_seconds: wall time of the capture (``torch.export``, the joint graph) before.
        graphs: the graphs compiled: ``["forward"]`` or ``["forward", "backward"]``.
        positions: per group, the graph it was compiled in and the position of its kernel in
            that graph's scheduled (or, for :mod:`graphopt.measure.kernels`, launched) nodes.
    """

    groups: list[list[str]]
    reductions: list[list[str]]
    op_names: list[str]
    kernels: int
    unmatched_ops: list[str] = field(default_factory=list)
    absorbed_ops: list[str] = field(default_factory=list)
    unmatched_origins: list[str] = field(default_factory=list)
    split_ops: list[str] = field(default_factory=list)
    seconds: float = 0.0
    capture_seconds: float = 0.0
    graphs: list[str] = field(default_factory=list)
    positions: list[tuple[str, int]] = field(default_factory=list)

    @property
    def match_rate(self) -> float:
        """Fraction of the graphopt ops found in some kernel by name (absorbed ops not counted;
        1.0 for an empty graph)."""
        if not self.op_names:
            return 1.0
        missed = len(self.unmatched_ops) + len(self.absorbed_ops)
        return 1.0 - missed / len(self.op_names)

    @property
    def fused_groups(self) -> list[list[str]]:
        """The groups of two or more ops."""
        return [g for g in self.groups if len(g) > 1]

    def summary(self) -> dict[str, Any]:
        """Counts for display."""
        return {
            "ops": len(self.op_names),
            "kernels": self.kernels,
            "groups": len(self.groups),
            "fused_groups": len(self.fused_groups),
            "multi_reduction_groups": sum(len(r) > 1 for r in self.reductions),
            "ops_in_fused_groups": sum(len(g) for g in self.fused_groups),
            "match_rate": round(self.match_rate, 4),
            "unmatched_ops": len(self.unmatched_ops),
            "absorbed_ops": len(self.absorbed_ops),
            "unmatched_origins": len(self.unmatched_origins),
            "split_ops": len(self.split_ops),
            "seconds": round(self.seconds, 2),
            "capture_seconds": round(self.capture_seconds, 2),
            "graphs": list(self.graphs),
        }


# ---------------------------------------------------------------------------- public API
def inductor_groups(
    model: torch.nn.Module,
    example_inputs: Any = (),
    *,
    training: bool = False,
    example_kwargs: Mapping[str, Any] | None = None,
    loss_fn: Callable[..., Any] | None = None,
    loss_inputs: Any = (),
    name: str = "model",
) -> InductorGroups:
    """Inductor's kernels for ``model``, as groups of the op names :func:`from_torch` gives.

    The arguments are those of :func:`~graphopt.importers.torch.from_torch` (the model is
    captured the same way, on fake tensors; a model built on the meta device works); see the
    module docstring for the compilation and the matching.

    Raises:
        ValueError: the model cannot be captured (as :func:`from_torch`), or Inductor failed to
            lower or schedule the graph (the message holds Inductor's error).
    """
    inputs = torch_importer._as_tuple(example_inputs)
    extra = torch_importer._as_tuple(loss_inputs)
    kwargs = dict(example_kwargs or {})
    if not training and (loss_fn is not None or extra):
        raise ValueError(f"{name!r}: loss_fn / loss_inputs only apply to training graphs")
    start = time.perf_counter()
    with torch_importer._fake_state(model, training=training) as fake:
        args = fake.inputs(inputs + extra)
        fkwargs = fake.inputs(kwargs)
        with torch_importer._generic_kernels(), torch_importer._quiet_torch():
            if training:
                step = torch_importer._TrainStep(model, loss_fn, n_inputs=len(inputs))
                ep = torch_importer._export(step, args, fkwargs, name)
                gm, sources = torch_importer._joint_graph(
                    ep, args, fkwargs, name, torch_importer._state_keys(step)
                )
                strip = f"{torch_importer._WRAPPED}."
            else:
                ep = torch_importer._export(model, args, fkwargs, name)
                gm, sources = torch_importer._forward_graph(ep, torch_importer._state_keys(model))
                strip = ""
            converted = torch_importer._convert(
                gm, sources, name=name, strip_prefix=strip, training=training
            )
            parts = _split_joint(gm) if training else [("forward", gm)]
            capture = time.perf_counter() - start
            edges = list(zip(converted.edge_src.tolist(), converted.edge_dst.tolist(), strict=True))
            found = _groups(parts, list(converted.names), list(converted.types), edges, name)
    return dataclasses.replace(found, capture_seconds=capture)


def zoo_inductor_groups(spec: str, *, training: bool = False) -> InductorGroups:
    """:func:`inductor_groups` of the zoo model ``spec`` (``torch:NAME?ARG=INT&...``), built as
    :func:`~graphopt.importers.zoo.load_zoo` builds it (on the meta device, no weights).

    Raises:
        ValueError: a bad spec, or as :func:`inductor_groups`.
        DependencyNotInstalled: a Hugging Face model without ``transformers``.
    """
    from graphopt.importers import zoo

    work, name, _ = zoo.zoo_workload(spec, training=training)
    return inductor_groups(
        work.model,
        work.inputs,
        training=training,
        name=name,
        **work.import_arguments(training),
    )


# ---------------------------------------------------------------------------- joint graph split
def _split_joint(gm: GraphModule) -> list[tuple[str, GraphModule]]:
    """The forward and the backward graph of a joint graph, node names kept (see the module
    docstring): AOTAutograd's ``default_partition``, by the nodes' ``partitioner_tag``."""
    nodes = list(gm.graph.nodes)
    output = next(n for n in nodes if n.op == "output")
    backward = {
        n
        for n in nodes
        if n.op == "call_function" and n.meta.get("partitioner_tag") == BACKWARD_TAG
    }
    forward = [n for n in nodes if n.op in ("call_function", "get_attr") and n not in backward]
    for n in forward:
        for a in n.all_input_nodes:
            if a in backward:
                raise ValueError(f"forward node {n.name!r} reads backward node {a.name!r}")
    saved = [n for n in forward if any(u in backward or u is output for u in n.users)]
    fwd = _subgraph(gm, forward, saved)
    bwd_nodes = [n for n in nodes if n in backward]
    bwd_outputs = [n for n in bwd_nodes if output in n.users]
    parts = [("forward", fwd)]
    if bwd_nodes:
        parts.append(("backward", _subgraph(gm, bwd_nodes, bwd_outputs)))
    return parts


def _subgraph(gm: GraphModule, nodes: Sequence[Node], outputs: Sequence[Node]) -> GraphModule:
    """A graph of ``nodes`` (in order), every value they read from elsewhere a placeholder of the
    same name, returning ``outputs``."""
    graph = Graph()
    env: dict[Node, Node] = {}
    inside = set(nodes)
    for n in nodes:
        for a in n.all_input_nodes:
            if a not in inside and a not in env:
                p = graph.placeholder(a.name)
                p.meta = dict(a.meta)
                env[a] = p
    for n in nodes:
        env[n] = graph.node_copy(n, lambda a: env[a])
    graph.output(tuple(env[n] for n in outputs))
    graph.lint()
    return GraphModule(gm, graph)


# ---------------------------------------------------------------------------- running Inductor
class _Scheduled(Exception):
    """Raised from the patched ``Scheduler.codegen``: fusion is done, skip code generation."""


@contextlib.contextmanager
def _stop_before_codegen(sink: list[list[Any]]) -> Iterator[None]:
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config
    from torch._inductor.scheduler import Scheduler

    def codegen(self: Any) -> None:
        sink.append(list(self.nodes))
        raise _Scheduled

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(Scheduler, "codegen", codegen))
        stack.enter_context(
            inductor_config.patch(
                fx_graph_cache=False,
                fx_graph_remote_cache=False,
                autotune_local_cache=False,
                compile_threads=1,
            )
        )
        stack.enter_context(functorch_config.patch(enable_autograd_cache=False))
        yield


@contextlib.contextmanager
def _precise_copies() -> Iterator[None]:
    """Copies made while lowering a consumer name only what they compute.

    Inductor gives every IR node made while lowering FX node ``n`` the origins of ``n`` and of
    *all* of ``n``'s unrealized inputs. A ``cat`` copies each input into its slice of the output
    with one kernel per input, and a fallback kernel copies an input it cannot read in place;
    each such copy would name every input's producers. For the duration of one call, the copy of
    input ``x`` gets the origins of ``n`` and of the unrealized loops under ``x``'s views only
    (a copy of a realized buffer computes nothing of its producers)."""
    from torch._inductor import ir
    from torch._inductor.virtualized import V
    from torch.utils._ordered_set import OrderedSet

    realize_into = ir.ConcatKernel.__dict__["realize_into"].__func__
    copy_input = ir.ExternKernel.__dict__["copy_input"].__func__

    @contextlib.contextmanager
    def only(x: Any) -> Iterator[None]:
        inner = x
        while isinstance(inner, (ir.MutableBox, ir.BaseView)):
            inner = inner.data
        computed = OrderedSet(inner.origins) if isinstance(inner, ir.Loops) else OrderedSet()
        node = V.graph.current_node
        old = ir.IRNode._current_origins
        ir.IRNode._current_origins = (
            OrderedSet([node]) if node is not None else OrderedSet()
        ) | computed
        try:
            yield
        finally:
            ir.IRNode._current_origins = old

    def concat_realize_into(cls: Any, src: Any, dst: Any) -> Any:
        with only(src):
            return realize_into(cls, src, dst)

    def extern_copy_input(x: Any) -> Any:
        with only(x):
            return copy_input(x)

    with contextlib.ExitStack() as stack:
        stack.enter_context(
            mock.patch.object(ir.ConcatKernel, "realize_into", classmethod(concat_realize_into))
        )
        stack.enter_context(
            mock.patch.object(ir.ExternKernel, "copy_input", staticmethod(extern_copy_input))
        )
        yield


def _schedule(gm: GraphModule, name: str) -> list[Any]:
    """The scheduler nodes after fusion of Inductor's compilation of ``gm`` (fake inputs)."""
    from torch._inductor.compile_fx import compile_fx

    inputs = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    sink: list[list[Any]] = []
    try:
        with _stop_before_codegen(sink), _precise_copies(), torch.no_grad():
            compile_fx(gm, inputs)  # no grad: AOTAutograd's inference path, no second partition
    except Exception as e:  # Inductor wraps what its passes raise (InductorError)
        if not sink:
            raise ValueError(
                f"{name!r}: Inductor could not lower and schedule the graph: "
                f"{type(e).__name__}: {torch_importer._headline(e)}"
            ) from e
        if not _is_ours(e):
            raise
    if len(sink) != 1:
        raise ValueError(f"{name!r}: expected one scheduled Inductor graph, got {len(sink)}")
    return sink[0]


def _is_ours(e: BaseException | None) -> bool:
    seen = 0
    while e is not None and seen < 20:
        if isinstance(e, _Scheduled) or isinstance(getattr(e, "inner_exception", None), _Scheduled):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


class _Kernel(NamedTuple):
    extern: bool  # a library call (matmul, convolution, a fallback op)
    origins: list[Any]  # the FX nodes it computes
    reductions: list[Any]  # those of them it computes a reduction loop of
    at: int  # its scheduler node's position in the sequence given to :func:`_kernels`


def _kernels(snodes: Sequence[Any]) -> list[_Kernel]:
    """The kernels (scheduler nodes after fusion that generate code) and the FX nodes each
    computes.

    An IR node's ``origins`` hold the FX node being lowered *and* every unrealized input inlined
    into it; an input realized while lowering node ``n`` (the input of a fallback kernel, say)
    gets ``n`` among its origins too. So an extern kernel computes only its own FX node (the
    origin whose target is the kernel's op, else its ``origin_node``), and those FX nodes are
    removed from the origins of the other kernels. ``MultiOutput`` (an output of a multi-output
    extern kernel) and ``NopKernel`` nodes are no kernels. A kernel's reductions: the origins of
    its reduction IR nodes whose ATen op is a reduction (:func:`graphopt.op_classes.classify`).
    """
    from torch._inductor import ir
    from torch._inductor.scheduler import ExternKernelSchedulerNode, NopKernelSchedulerNode

    raw: list[_Kernel] = []
    for at, snode in enumerate(snodes):
        if isinstance(snode, NopKernelSchedulerNode):
            continue
        if isinstance(snode, ExternKernelSchedulerNode):
            node: Any = snode.node
            if node is None or isinstance(node, ir.MultiOutput):
                continue
            target = getattr(node, "op_overload", None)
            own = [o for o in node.origins if target is not None and o.target is target]
            origin = getattr(node, "origin_node", None)
            if not own and origin is not None:
                own = [origin]
            raw.append(_Kernel(True, own or _sorted(node.origins), [], at))
            continue
        origins: list[Any] = []
        reductions: list[Any] = []
        for inner in snode.get_nodes():
            if isinstance(inner, NopKernelSchedulerNode) or inner.node is None:
                continue
            mine = _sorted(inner.node.origins)
            origins.extend(mine)
            if inner.is_reduction():
                reductions.extend(o for o in mine if _reduces(o))
        raw.append(_Kernel(False, origins, reductions, at))
    extern = {o for k in raw if k.extern for o in k.origins}
    out = []
    for k in raw:
        keep = [o for o in dict.fromkeys(k.origins) if o.op == "call_function"]
        if not k.extern:
            keep = [o for o in keep if o not in extern]
        if keep:
            out.append(_Kernel(k.extern, keep, list(dict.fromkeys(k.reductions)), k.at))
    return out


def _sorted(nodes: Any) -> list[Any]:
    return sorted(nodes, key=lambda o: o.name)


def _reduces(node: Node) -> bool:
    return (
        node.op == "call_function" and classify(torch_importer._op_type(node.target)) == REDUCTION
    )


def _provenance(node: Node, graph_id: int) -> list[str]:
    """Names of the nodes of graph ``graph_id`` that ``node`` was made from (``from_node``)."""
    found: list[str] = []
    stack = list(node.meta.get("from_node") or [])
    seen = 0
    while stack and seen < 10_000:
        source = stack.pop()
        seen += 1
        if source.graph_id == graph_id:
            if source.name not in found:
                found.append(source.name)
            continue
        stack.extend(source.from_node or [])
    return found


def _groups(
    parts: Sequence[tuple[str, GraphModule]],
    op_names: list[str],
    op_types: list[str],
    edges: Sequence[tuple[int, int]],
    name: str,
    schedule: Callable[[GraphModule, str], list[Any]] | None = None,
) -> InductorGroups:
    """Inductor's kernels of each part as groups of op names (the module docstring's rules);
    ``schedule(gm, label)`` gives a part's scheduler nodes (default :func:`_schedule`)."""
    schedule = schedule or _schedule
    index = {n: i for i, n in enumerate(op_names)}
    kernel_of: dict[int, int] = {}  # op -> the last kernel it appears in
    seen_in: dict[int, set[int]] = {}
    reducing: dict[int, set[int]] = {}  # kernel -> ops whose reduction loop it runs
    extern: set[int] = set()  # the extern kernels
    where: list[tuple[str, int]] = []  # kernel -> its graph and position there
    unmatched_origins: list[str] = []
    kernels = 0
    start = time.perf_counter()
    for part_name, gm in parts:
        found = _kernels(schedule(gm, f"{name} [{part_name}]"))
        graph_id = id(gm.graph)
        # An FX node some kernel runs a reduction loop of is computed there only (the other
        # kernels naming it merely read its result); any other is computed wherever it is named.
        reduced = {o for kernel in found for o in kernel.reductions}
        for kernel in found:
            k = kernels
            kernels += 1
            where.append((part_name, kernel.at))
            if kernel.extern:
                extern.add(k)
            for origin in kernel.origins:
                names = _provenance(origin, graph_id)
                if not names:
                    unmatched_origins.append(f"{part_name}:{origin.name}")
                if origin in reduced and origin not in kernel.reductions:
                    continue
                ops = [index[n] for n in names if n in index]
                for op in ops:
                    kernel_of[op] = k
                    seen_in.setdefault(op, set()).add(k)
                if origin in kernel.reductions:
                    reducing.setdefault(k, set()).update(ops)
    seconds = time.perf_counter() - start
    # Ops in no kernel that Inductor folded into their only consumer join the consumer's kernel:
    # an elementwise op (a no-op clone Inductor drops), or a contraction whose consumer is a
    # library call (the pattern mm + add -> addmm names the add only). Data movement does not:
    # a cat written in place by its producers is in no kernel.
    consumers: dict[int, set[int]] = {}
    for u, v in edges:
        consumers.setdefault(u, set()).add(v)
    absorbed: list[int] = []
    for op in reversed(range(len(op_names))):  # consumers first
        if op in kernel_of or len(consumers.get(op, ())) != 1:
            continue
        (consumer,) = consumers[op]
        kind = classify(op_types[op])
        if consumer not in kernel_of or kind not in (ELEMENTWISE, CONTRACTION):
            continue
        if kind == ELEMENTWISE or kernel_of[consumer] in extern:
            kernel_of[op] = kernel_of[consumer]
            absorbed.append(op)
    by_kernel: dict[int, list[int]] = {}
    for op, k in kernel_of.items():
        by_kernel.setdefault(k, []).append(op)
    order = sorted(by_kernel)
    return InductorGroups(
        groups=[[op_names[op] for op in sorted(by_kernel[k])] for k in order],
        reductions=[
            [op_names[op] for op in sorted(reducing.get(k, set()) & set(by_kernel[k]))]
            for k in order
        ],
        op_names=list(op_names),
        kernels=kernels,
        unmatched_ops=[n for i, n in enumerate(op_names) if i not in kernel_of],
        absorbed_ops=[op_names[op] for op in sorted(absorbed)],
        unmatched_origins=unmatched_origins,
        split_ops=[op_names[op] for op in sorted(seen_in) if len(seen_in[op]) > 1],
        seconds=seconds,
        graphs=[p for p, _ in parts],
        positions=[where[k] for k in order],
    )
