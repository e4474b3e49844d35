"""A recorder of TensorFlow-style training graphs: forward ops in, a :class:`CompGraph` out.

:class:`GraphBuilder` records forward ops one at a time (each with its input tensors, output shapes,
FLOPs, layer and colocation group), then :func:`graphopt.workloads.backward.add_backward` appends the
backward pass and one parameter-update op per trainable weight (:mod:`graphopt.workloads.backward`, with
the per-op rules of :mod:`graphopt.workloads.gradients`), and :meth:`GraphBuilder.build` returns
the immutable graph.
Shapes and costs of the common ops are computed by the helpers in :mod:`graphopt.workloads.ops`.

Cost conventions (every number is derived from tensor shapes; fp32, so 4 bytes per element):

=====================  ===========================================================================
``flops``              given by the caller (:mod:`~graphopt.workloads.ops` computes them)
``output_bytes``       sum of the op's output tensors' bytes; ``0`` for a variable (its tensor is
                       the resident parameter, counted once in ``param_bytes``)
``bytes_accessed``     bytes of the distinct input tensors read + ``output_bytes`` (+
                       ``extra_bytes``), unless the caller overrides it (a gather reads only the
                       gathered rows)
``param_bytes``        a variable op carries its weight's bytes, so that a weight shared by many ops
                       (the time steps of an unrolled RNN) is counted exactly once; update ops
                       carry the optimizer's slot variables (momentum, Adam moments)
edge bytes             bytes of the tensor(s) the consumer reads from the producer (for a
                       multi-output producer such as ``Split``, only the outputs it reads); an edge
                       from a variable carries the weight's bytes
shapes, dtypes         every op's output shapes and input shapes (:mod:`graphopt.shapes`), as
                       recorded; dtype ``float32`` per output (the 4 bytes of the convention),
                       unknown for sources (data may be int32 ids) and variables (their output
                       bytes are 0: the weight is counted in ``param_bytes``)
=====================  ===========================================================================

Ops are recorded in topological order (an op's inputs must exist), so the built graph keeps the
recording order. Op names are ``scope/name``, made unique TensorFlow-style (``MatMul``,
``MatMul_1``, ...). The colocation group of an op is, in order: the ``colocation`` argument, the
innermost enclosing :meth:`GraphBuilder.scope` that set one, else the op's own name. A variable
created without a group joins the group of the first op that reads it, so that a weight, the first
op reading it and their gradient and update ops are colocated (TensorFlow's
``colocate_gradients_with_ops`` plus variable/update colocation).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from graphopt.graph import CompGraph

BYTES_PER_ELEMENT = 4
"""Every tensor is fp32 (or int32 for ids and labels): 4 bytes per element."""

VIEW_TYPES = frozenset(("Reshape", "ExpandDims", "Squeeze"))
"""Op types that access no bytes: TensorFlow's reshape aliases its input's buffer (XLA's
bitcast), so such an op costs only its launch."""


class Tensor(NamedTuple):
    """One output of a recorded op.

    Attributes:
        op: index of the producing op in the builder.
        shape: the tensor's shape (a tuple of ints; ``()`` for a scalar).
        output: which output of the producing op (0 for single-output ops).
    """

    op: int
    shape: tuple[int, ...]
    output: int = 0

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor (``size * 4``)."""
        return BYTES_PER_ELEMENT * math.prod(self.shape)


class GraphBuilder:
    """Records ops and edges, then builds a :class:`CompGraph` (see the module docstring).

    Args:
        name: the graph's name.

    Example:
        >>> from graphopt.workloads import ops
        >>> b = GraphBuilder("mlp")
        >>> x = b.source("Placeholder", "x", (32, 784))
        >>> w = b.variable("dense/kernel", (784, 10))
        >>> y = ops.matmul(b, x, w)
        >>> loss = ops.reduce(b, "Mean", y, axes=(0, 1))
        >>> from graphopt.workloads.backward import add_backward
        >>> add_backward(b, loss)
        >>> b.build().num_ops  # x, kernel, MatMul, Mean, Fill, Tile, MatMul (dW), update
        8
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._names: list[str] = []
        self._types: list[str] = []
        self._flops: list[float] = []
        self._bytes: list[float] = []
        self._out_bytes: list[float] = []
        self._param_bytes: list[float] = []
        self._layers: list[str] = []
        self._groups: list[str | None] = []
        self._inputs: list[tuple[Tensor, ...]] = []
        self._outputs: list[tuple[Tensor, ...]] = []
        self._rules: list[str | None] = []
        self._requires_grad: list[bool] = []
        self._variable: list[bool] = []
        self._edge_src: list[int] = []
        self._edge_dst: list[int] = []
        self._edge_bytes: list[float] = []
        self._taken: set[str] = set()
        self._counters: dict[str, int] = {}
        self._prefix = ""
        self._layer = ""
        self._group: str | None = None
        self._backward_added = False

    # ------------------------------------------------------------------ scopes
    @contextmanager
    def scope(
        self, name: str, *, layer: str | None = None, colocation: str | None = None
    ) -> Iterator[None]:
        """Nest op names under ``name``; optionally set the layer and colocation group of the ops
        recorded inside (both are inherited from the enclosing scope when not given)."""
        saved = (self._prefix, self._layer, self._group)
        self._prefix = f"{self._prefix}/{name}" if self._prefix else name
        if layer is not None:
            self._layer = layer
        if colocation is not None:
            self._group = colocation
        try:
            yield
        finally:
            self._prefix, self._layer, self._group = saved

    @property
    def current_scope(self) -> str:
        """The current name prefix (``""`` at top level)."""
        return self._prefix

    def full_name(self, name: str) -> str:
        """``name`` under the current scope (before uniquification)."""
        return f"{self._prefix}/{name}" if self._prefix else name

    # ------------------------------------------------------------------ recording
    def op(
        self,
        op_type: str,
        name: str,
        inputs: Sequence[Tensor],
        shape: Sequence[int],
        **kwargs: Any,
    ) -> Tensor:
        """Record a single-output op; see :meth:`multi_op` for the keyword arguments."""
        return self.multi_op(op_type, name, inputs, (tuple(shape),), **kwargs)[0]

    def multi_op(
        self,
        op_type: str,
        name: str,
        inputs: Sequence[Tensor],
        shapes: Sequence[Sequence[int]],
        *,
        flops: float = 0.0,
        differentiable: bool = True,
        grad_rule: str | None = None,
        bytes_accessed: float | None = None,
        extra_bytes: float = 0.0,
        param_bytes: float = 0.0,
        layer: str | None = None,
        colocation: str | None = None,
        absolute_name: bool = False,
    ) -> tuple[Tensor, ...]:
        """Record an op with any number of outputs and return its output tensors.

        Args:
            op_type: TensorFlow op type, e.g. ``"MatMul"``.
            name: local name (prefixed by the current scope unless ``absolute_name``).
            inputs: tensors read by the op (all already recorded).
            shapes: one shape per output.
            flops: floating-point operations of the op.
            differentiable: ``False`` stops gradients here (``StopGradient``, integer ops).
            grad_rule: the gradient rule's key in :mod:`~graphopt.workloads.gradients`;
                defaults to ``op_type``.
            bytes_accessed: override of the default ``reads + writes + extra_bytes`` (0 for the
                view ops of :data:`VIEW_TYPES`).
            extra_bytes: bytes accessed beyond the inputs and outputs (e.g. optimizer slots).
            param_bytes: bytes resident with the op (optimizer slots of an update op).
            layer: module path; defaults to the current scope's layer.
            colocation: colocation group; defaults to the scope's group, else the op's name.
            absolute_name: take ``name`` as the full name (used for backward ops).

        Raises:
            ValueError: an input tensor that was not produced by a recorded op.
        """
        full = name if absolute_name or not self._prefix else f"{self._prefix}/{name}"
        full = self._unique(full)
        i = len(self._names)
        group = colocation if colocation is not None else self._group
        if group is None:
            group = full
        read = 0
        per_src: dict[int, int] = {}
        seen: set[tuple[int, int]] = set()
        requires = False
        for t in inputs:
            if not 0 <= t.op < i or t.output >= len(self._outputs[t.op]):
                raise ValueError(
                    f"op {full!r}: input {t!r} is not an output of a recorded op "
                    f"(the builder has {i} ops)"
                )
            key = (t.op, t.output)
            if key in seen:
                continue
            seen.add(key)
            nb = t.nbytes
            read += nb
            per_src[t.op] = per_src.get(t.op, 0) + nb
            requires = requires or self._requires_grad[t.op]
            if self._variable[t.op] and self._groups[t.op] is None:
                self._groups[t.op] = group  # a variable joins its first reader's group
        outs = tuple(Tensor(i, tuple(s), k) for k, s in enumerate(shapes))
        out_bytes = sum(o.nbytes for o in outs)
        for src, nb in per_src.items():
            self._edge_src.append(src)
            self._edge_dst.append(i)
            self._edge_bytes.append(float(nb))
        self._names.append(full)
        self._types.append(op_type)
        self._flops.append(float(flops))
        if bytes_accessed is None:
            total = 0.0 if op_type in VIEW_TYPES else read + out_bytes + extra_bytes
        else:
            total = bytes_accessed
        self._bytes.append(float(total))
        self._out_bytes.append(float(out_bytes))
        self._param_bytes.append(float(param_bytes))
        self._layers.append(self._layer if layer is None else layer)
        self._groups.append(group)
        self._inputs.append(tuple(inputs))
        self._outputs.append(outs)
        self._rules.append((grad_rule or op_type) if differentiable else None)
        self._requires_grad.append(differentiable and requires)
        self._variable.append(False)
        return outs

    def source(self, op_type: str, name: str, shape: Sequence[int]) -> Tensor:
        """Record an op without inputs and without gradient: ``Placeholder`` (data), ``Fill``
        (zero states), ``Const`` (masks)."""
        return self.op(op_type, name, (), shape, differentiable=False)

    def variable(
        self,
        name: str,
        shape: Sequence[int],
        *,
        trainable: bool = True,
        colocation: str | None = None,
    ) -> Tensor:
        """Record a weight (op type ``VariableV2``) under the current scope.

        Its ``param_bytes`` is the weight's size in bytes; its ``output_bytes``, ``flops`` and
        ``bytes_accessed`` are 0. Without ``colocation`` (or a scope group) the variable joins the
        group of its first reader. :func:`~graphopt.workloads.backward.add_backward` adds its update op when it is trainable
        and the loss depends on it.
        """
        full = self._unique(f"{self._prefix}/{name}" if self._prefix else name)
        i = len(self._names)
        out = Tensor(i, tuple(shape), 0)
        self._names.append(full)
        self._types.append("VariableV2")
        self._flops.append(0.0)
        self._bytes.append(0.0)
        self._out_bytes.append(0.0)
        self._param_bytes.append(float(out.nbytes))
        self._layers.append(self._layer)
        self._groups.append(colocation if colocation is not None else self._group)
        self._inputs.append(())
        self._outputs.append((out,))
        self._rules.append(None)
        self._requires_grad.append(trainable)
        self._variable.append(True)
        return out

    def _unique(self, name: str) -> str:
        if name not in self._taken:
            self._taken.add(name)
            return name
        k = self._counters.get(name, 0)
        while True:
            k += 1
            candidate = f"{name}_{k}"
            if candidate not in self._taken:
                self._counters[name] = k
                self._taken.add(candidate)
                return candidate

    # ------------------------------------------------------------------ read access (for rules)
    @property
    def num_ops(self) -> int:
        """Ops recorded so far."""
        return len(self._names)

    def op_name(self, i: int) -> str:
        return self._names[i]

    def op_type(self, i: int) -> str:
        return self._types[i]

    def op_flops(self, i: int) -> float:
        return self._flops[i]

    def op_layer(self, i: int) -> str:
        return self._layers[i]

    def op_group(self, i: int) -> str:
        """The op's colocation group (its own name when none was set)."""
        group = self._groups[i]
        return self._names[i] if group is None else group

    def op_inputs(self, i: int) -> tuple[Tensor, ...]:
        return self._inputs[i]

    def op_outputs(self, i: int) -> tuple[Tensor, ...]:
        return self._outputs[i]

    def grad_rule(self, i: int) -> str | None:
        """Key of the op's gradient rule, ``None`` when gradients stop at the op."""
        return self._rules[i]

    def requires_grad(self, i: int) -> bool:
        """Whether the op's output depends on a trainable variable through differentiable ops."""
        return self._requires_grad[i]

    def is_variable(self, i: int) -> bool:
        return self._variable[i]

    def param_bytes_of(self, i: int) -> float:
        return self._param_bytes[i]

    # ------------------------------------------------------------------ backward and build
    def start_backward(self) -> None:
        """Mark the backward pass recorded (:func:`graphopt.workloads.backward.add_backward` calls
        this before it records one).

        Raises:
            ValueError: a backward pass was already recorded, or a scope is open.
        """
        if self._backward_added:
            raise ValueError(f"graph {self.name!r}: add_backward was already called")
        if self._prefix:
            raise ValueError(
                f"graph {self.name!r}: call add_backward outside of any scope "
                f"(current scope {self._prefix!r})"
            )
        self._backward_added = True

    def build(self, metadata: Mapping[str, Any] | None = None) -> CompGraph:
        """Return the recorded graph as a :class:`CompGraph` (ops keep the recording order)."""
        return CompGraph.from_arrays(
            name=self.name,
            op_names=self._names,
            op_types=self._types,
            flops=self._flops,
            bytes_accessed=self._bytes,
            output_bytes=self._out_bytes,
            param_bytes=self._param_bytes,
            edge_src=self._edge_src,
            edge_dst=self._edge_dst,
            edge_bytes=self._edge_bytes,
            colocation=[self.op_group(i) for i in range(len(self._names))],
            layer=self._layers,
            metadata=metadata,
            output_shapes=[tuple(o.shape for o in outs) for outs in self._outputs],
            output_dtypes=[
                None if self._variable[i] or not self._inputs[i] else ("float32",) * len(outs)
                for i, outs in enumerate(self._outputs)
            ],
            input_shapes=[tuple(t.shape for t in inputs) for inputs in self._inputs],
        )
