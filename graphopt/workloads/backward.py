"""The backward pass and parameter updates of a recorded forward graph.

:func:`add_backward` walks the forward ops from the loss back to the inputs (reverse recording
order, which is a reverse topological order) and applies each op's rule from
:mod:`graphopt.workloads.gradients`, as ``tf.gradients`` does. An op gets gradient ops only when it
lies on a path from a trainable variable to the loss.

When a tensor feeds several ops, its gradient contributions are summed by one ``AddN``, or, beyond
:data:`ADDN_MAX_INPUTS` contributions (a weight shared by the steps of an unrolled RNN, GNMT's
attention memory), accumulated by ``AddV2`` ops as they arrive (sparse contributions to an
embedding are concatenated instead: ``ConcatV2`` of rows and of ids; mixed
sparse and dense contributions are densified by ``UnsortedSegmentSum``). Every trainable variable
the loss depends on then gets one update op reading the variable and its summed gradient (see
:data:`OPTIMIZERS`). Aggregation and update ops of a variable inherit the variable's layer and
colocation group; update ops are named ``train/update_<variable>/<Type>``.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from graphopt.workloads.builder import GraphBuilder, Tensor
from graphopt.workloads.gradients import RULES, GradContext, Sparse

ADDN_MAX_INPUTS = 4
"""Tensors with at most this many gradient contributions are summed by one ``AddN`` once all have
arrived (what ``tf.gradients`` emits); beyond it, contributions are accumulated by a chain of
``AddV2`` as they arrive (what a while-loop RNN's gradient or ``accumulate_n`` does), so that the
``T`` per-step gradients of a weight shared by ``T`` unrolled steps are never all live at once."""


class Optimizer(NamedTuple):
    """How an optimizer's update op is costed.

    Attributes:
        dense_op: op type of the dense update.
        sparse_op: op type of the sparse (embedding rows) update.
        slots: per-weight state tensors (0 SGD, 1 momentum, 2 Adam); their bytes are the update
            op's ``param_bytes`` and each is read and written by the update.
        flops_per_element: FLOPs per updated weight element.
    """

    dense_op: str
    sparse_op: str
    slots: int
    flops_per_element: float


OPTIMIZERS: dict[str, Optimizer] = {
    "sgd": Optimizer("ApplyGradientDescent", "ScatterSub", 0, 2.0),
    "momentum": Optimizer("ApplyMomentum", "SparseApplyMomentum", 1, 4.0),
    "adam": Optimizer("ApplyAdam", "SparseApplyAdam", 2, 12.0),
}
"""Optimizers by name. An update reads the weight and the gradient and writes the weight; each
slot is read and written too."""


def add_backward(b: GraphBuilder, loss: Tensor, *, optimizer: str = "sgd") -> None:
    """Append the backward pass of ``loss`` and the update ops to ``b`` (see the module docstring).

    Args:
        b: a builder holding the forward graph.
        loss: the tensor to minimise (usually a scalar); its gradient is seeded by a ``Fill`` op.
        optimizer: a key of :data:`OPTIMIZERS`.

    Raises:
        ValueError: unknown optimizer, a second call on ``b`` or one inside a scope, or a forward
            op needing a gradient whose rule is unknown.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of: {', '.join(OPTIMIZERS)}")
    b.start_backward()
    opt = OPTIMIZERS[optimizer]
    reach = [False] * (loss.op + 1)
    reach[loss.op] = True
    for i in range(loss.op, -1, -1):
        if reach[i]:
            for t in b.op_inputs(i):
                reach[t.op] = True
    needs = [reach[i] and b.requires_grad(i) for i in range(loss.op + 1)]
    expected: dict[tuple[int, int], int] = {}  # gradient contributions each tensor will receive
    for i in range(loss.op + 1):
        if needs[i]:
            for t in b.op_inputs(i):
                if needs[t.op]:
                    expected[(t.op, t.output)] = expected.get((t.op, t.output), 0) + 1

    grads: dict[tuple[int, int], list] = {}
    seed = b.op(
        "Fill",
        "gradients/Fill",
        (),
        loss.shape,
        differentiable=False,
        layer=b.op_layer(loss.op),
        colocation=b.op_group(loss.op),
        absolute_name=True,
    )
    grads[(loss.op, loss.output)] = [seed]
    for i in range(loss.op, -1, -1):
        if not needs[i]:
            continue
        if b.is_variable(i):
            contributions = grads.pop((i, 0), None)
            if contributions:
                _update(b, i, contributions, opt)
            continue
        dys = [_aggregate(b, i, k, grads.pop((i, k), None)) for k in range(len(b.op_outputs(i)))]
        if all(dy is None for dy in dys):
            continue  # reaches the loss only through ops that stop gradients
        rule_key = b.grad_rule(i)
        rule = RULES.get(rule_key or "")
        if rule is None:
            raise ValueError(
                f"op {b.op_name(i)!r} of type {b.op_type(i)!r} has no gradient rule {rule_key!r}; "
                f"known rules: {', '.join(sorted(RULES))}; add one to RULES in "
                "graphopt/workloads/gradients.py "
                "or record the op with differentiable=False"
            )
        inputs = b.op_inputs(i)
        ctx = GradContext(b, i, dys, [needs[t.op] for t in inputs])
        for t, g in zip(inputs, rule(ctx), strict=True):
            if g is not None and needs[t.op]:
                key = (t.op, t.output)
                pending = grads.setdefault(key, [])
                if expected[key] > ADDN_MAX_INPUTS and isinstance(g, Tensor):
                    _accumulate(b, t.op, pending, g)
                else:
                    pending.append(g)


def _accumulate(b: GraphBuilder, op: int, pending: list, g: Tensor) -> None:
    """Add ``g`` to the running sum of dense contributions in ``pending`` (an ``AddV2``), so that
    each contribution is freed as soon as it arrives."""
    for k, prev in enumerate(pending):
        if isinstance(prev, Tensor):
            pending[k] = b.op(
                "AddV2",
                f"gradients/{b.op_name(op)}/accumulate",
                (prev, g),
                g.shape,
                flops=float(g.size),
                differentiable=False,
                layer=b.op_layer(op),
                colocation=b.op_group(op),
                absolute_name=True,
            )
            return
    pending.append(g)


def _aggregate(b: GraphBuilder, op: int, index: int, contributions: list | None) -> Tensor | None:
    """Sum the gradient contributions to output ``index`` of ``op`` (one ``AddN``)."""
    if not contributions:
        return None
    if len(contributions) == 1:
        return contributions[0]
    shape = b.op_outputs(op)[index].shape
    return b.op(
        "AddN",
        f"gradients/{b.op_name(op)}/AddN",
        contributions,
        shape,
        flops=(len(contributions) - 1) * math.prod(shape),
        differentiable=False,
        layer=b.op_layer(op),
        colocation=b.op_group(op),
        absolute_name=True,
    )


def _update(b: GraphBuilder, var: int, contributions: list, opt: Optimizer) -> None:
    """Sum a variable's gradient contributions and record its update op."""
    name, layer, group = b.op_name(var), b.op_layer(var), b.op_group(var)
    weight = b.op_outputs(var)[0]
    kw: dict[str, Any] = {
        "differentiable": False,
        "layer": layer,
        "colocation": group,
        "absolute_name": True,
    }
    if all(isinstance(g, Sparse) for g in contributions):
        values, ids = contributions[0]
        if len(contributions) > 1:
            rows = sum(g.values.size // weight.shape[-1] for g in contributions)
            values = b.op(
                "ConcatV2",
                f"gradients/{name}/concat_values",
                [g.values for g in contributions],
                (rows, weight.shape[-1]),
                **kw,
            )
            ids = b.op(
                "ConcatV2",
                f"gradients/{name}/concat_ids",
                [g.indices for g in contributions],
                (rows,),
                **kw,
            )
        touched = float(values.nbytes)
        b.multi_op(
            opt.sparse_op,
            f"train/update_{name}/{opt.sparse_op}",
            (weight, values, ids),
            (),
            flops=opt.flops_per_element * values.size,
            bytes_accessed=touched * (3 + 2 * opt.slots) + ids.nbytes,
            param_bytes=opt.slots * b.param_bytes_of(var),
            **kw,
        )
        return
    dense = []
    for g in contributions:
        if isinstance(g, Sparse):  # mixed sparse and dense: densify the rows
            g = b.op(
                "UnsortedSegmentSum",
                f"gradients/{name}/UnsortedSegmentSum",
                (g.values, g.indices),
                weight.shape,
                flops=float(g.values.size),
                **kw,
            )
        dense.append(g)
    grad = dense[0]
    if len(dense) > 1:
        grad = b.op(
            "AddN",
            f"gradients/{name}/AddN",
            dense,
            weight.shape,
            flops=(len(dense) - 1) * weight.size,
            **kw,
        )
    p = float(weight.nbytes)
    b.multi_op(
        opt.dense_op,
        f"train/update_{name}/{opt.dense_op}",
        (weight, grad),
        (),
        flops=opt.flops_per_element * weight.size,
        extra_bytes=p * (1 + 2 * opt.slots),
        param_bytes=opt.slots * p,
        **kw,
    )
