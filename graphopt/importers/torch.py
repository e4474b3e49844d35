"""Import a ``torch.nn.Module`` as a :class:`~graphopt.graph.CompGraph`, through ``torch.export``.

:func:`from_torch` captures the model with ``torch.export`` and lowers it to core ATen ops; every
remaining kernel becomes one op of the graph. No weight memory is used and nothing is run: the
parameters, buffers and example inputs are replaced by *fake* tensors (shapes and dtypes only), so a
model built under ``with torch.device("meta"):`` imports as well as a real one.

Graphs:

* **forward** (``training=False``): ``torch.export.export(model.eval(), ...).run_decompositions()``
  (the core ATen opset).
* **training** (``training=True``): forward + backward as one joint graph, traced by torch itself:
  the exported program of ``loss_fn(model(*inputs), *loss_inputs)`` in train mode goes through
  AOTAutograd's ``aot_export_joint_with_descriptors`` with the core ATen decompositions. Every
  backward op is the one autograd would run; none is made up by a rule. The optimizer step is not
  part of the graph.

Per op (see :mod:`graphopt.graph` for the columns):

* ``flops``: torch's own formulas (``torch.utils.flop_counter.flop_registry``, the table behind
  ``FlopCounterMode``) applied to the op's fake tensors. They cover matmuls, convolutions (forward
  and backward) and fused attention; every other op counts 0 FLOPs and is costed by its bytes,
  which bound it in the roofline anyway. ``torch.cond`` counts its dearer branch. The sum over the
  graph equals ``FlopCounterMode`` on the same model (forward, or forward + ``loss.backward()``):
  :func:`reference_flops` computes that figure, and the tests assert equality for every model of
  the zoo, forward and training. (``torch.export`` drops dead code, which ``FlopCounterMode``
  would count: a model computing a result nothing uses differs by that result's FLOPs.)
* ``bytes_accessed``: bytes of the distinct tensors read (activations, parameters, inputs) plus
  the bytes of all outputs written. A tensor read through a view counts ``min(view, base)`` bytes
  (a slice reads its part, a broadcast reads its base once); gather-like ops (``embedding``,
  ``index``, ``gather``, ``index_select``) read at most their output's size from the table they
  index.
* ``output_bytes``: all tensor outputs of the kernel (``native_layer_norm`` writes its mean and
  rstd too).
* ``output_shapes``, ``output_dtypes``, ``input_shapes`` (:mod:`graphopt.shapes`): the shape and
  dtype of every tensor output, and the shape of every tensor argument in the kernel's argument
  order (activations, parameters and inputs; a view's own shape), from the FX nodes' fake tensors
  (``node.meta["val"]``).
* ``param_bytes``: parameters, buffers and constant tensors (the state resident on the device)
  are attributed to the **first op that reads them**, in graph order, so that each is counted
  exactly once (a tied embedding / LM head is one tensor). State no op reads (e.g. batch norm's
  step counter in eval mode) is reported in ``metadata["unattributed_state_bytes"]``.
* ``layer``: the module path from ``node.meta["nn_module_stack"]`` (for backward ops, the path of
  the forward op they differentiate, ``fwd_nn_module_stack``); ops of a ``loss_fn`` are in layer
  ``"loss"``, ops in the model's own ``forward`` (outside any submodule) in layer ``""``.
* ``type``: the ATen op name, e.g. ``"addmm"``, ``"convolution_backward"`` (``"ns.op"`` outside
  aten).

Skipped nodes: placeholders (their bytes are counted where they are read), the output node, and
ops without a tensor result (``_assert_tensor_metadata``, ``sym_size``...). Folded nodes: views
(every op whose schema returns an alias of its input, such as ``view``, ``permute``, ``expand``,
``slice``, ``alias``, plus ``_unsafe_view``) launch no kernel; a consumer of a view reads from the
view's base, and the edge runs from the base's producer. ``getitem`` of a multi-output op merges
into its producer: the edge runs from the producer and carries that output's bytes.

Edges: one per (producer, consumer) pair, carrying the bytes the consumer reads from the producer's
outputs.

Devices: fake tensors live on the CPU device (the meta device lacks autograd kernels for some ops,
e.g. ``nll_loss``), with oneDNN disabled and scaled-dot-product attention on its math backend while
tracing, so that LSTMs and attention lower to the generic matmuls a GPU would also run instead of
CPU-only fused kernels (``mkldnn_rnn_layer``, ``_scaled_dot_product_flash_attention_for_cpu``) that
have no FLOP formula.

Metadata: ``source``, ``importer_version``, ``torch_version``, ``training``, ``forward_ops`` (ops
of the forward part), ``state_bytes`` (all state, ties counted once) and
``unattributed_state_bytes``. Op types without an op class (:mod:`graphopt.op_classes`: they are
opaque to the fusion rules) are listed in ``metadata["unknown_op_types"]``.

Requires torch >= 2.9 for training graphs (``aot_export_joint_with_descriptors``); forward graphs
need only ``torch.export``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import operator
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch._ops import HigherOrderOperator
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.export.graph_signature import InputKind
from torch.fx import Node
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._pytree import tree_leaves, tree_map
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from graphopt.graph import CompGraph
from graphopt.hardware import HOST_KIND
from graphopt.op_classes import OP_TYPE_CLASSES

IMPORTER_VERSION = 2
"""Bumped whenever the graphs :func:`from_torch` produces change (keys the zoo's cache)."""

LOSS_LAYER = "loss"
_WRAPPED = "model"  # attribute under which the training wrapper holds the user's model

CPU_ONLY_NAMESPACES = frozenset({"quantized"})
"""Op namespaces whose kernels PyTorch has for the CPU only: ``quantized::`` ops run on the
quantized engines (fbgemm, qnnpack, onednn; ``torch.backends.quantized.supported_engines``),
all CPU libraries. Their ops get ``allowed = ("CPU",)`` (:func:`allowed_kinds`); every other op
may run anywhere (the importer marks only what it knows)."""


def allowed_kinds(op_types: Sequence[str]) -> list[tuple[str, ...]]:
    """The ``allowed`` column of imported ops (:attr:`CompGraph.allowed`): the host kind for an
    op of a :data:`CPU_ONLY_NAMESPACES` namespace (its type ``"<namespace>.<op>"``), else any."""
    return [
        (HOST_KIND,) if "." in t and t.split(".")[0] in CPU_ONLY_NAMESPACES else ()
        for t in op_types
    ]


_GATHER_LIKE = frozenset({"embedding", "index", "gather", "index_select"})


# ---------------------------------------------------------------------------- public API
def from_torch(
    model: torch.nn.Module,
    example_inputs: Any = (),
    *,
    name: str,
    training: bool = False,
    example_kwargs: Mapping[str, Any] | None = None,
    loss_fn: Callable[..., Any] | None = None,
    loss_inputs: Any = (),
    metadata: Mapping[str, Any] | None = None,
) -> CompGraph:
    """Import ``model`` as a computation graph (see the module docstring for what each op holds).

    Args:
        model: a ``torch.nn.Module``, ideally built on the meta device (no weight memory). It is
            left as it was: its tensors are swapped for fake ones during the import and restored.
        example_inputs: positional inputs (a tensor or a tuple); only shapes and dtypes matter.
            Shapes are fixed: the graph is for exactly these sizes.
        name: the graph's name.
        training: ``False`` for the forward graph (model in eval mode); ``True`` for the joint
            forward + backward graph of the loss (model in train mode, dropout included).
        example_kwargs: keyword inputs of ``model``.
        loss_fn: training only: ``loss_fn(output, *loss_inputs)`` gives the scalar loss. Default:
            the output itself if it is a scalar tensor, its ``.loss`` if it has one (Hugging Face
            models given labels), else the sum of ``out.sum()`` over its floating-point tensors.
        loss_inputs: training only: extra example tensors (a tensor or a tuple) passed to
            ``loss_fn`` after the output, e.g. targets.
        metadata: merged into the graph's metadata.

    Returns:
        The graph, ops in the order torch traced them (a topological order).

    Raises:
        ValueError: the model cannot be captured by ``torch.export`` (the message names the
            failing construct and how to fix it), the loss is not a scalar, or the graph holds an
            op graphopt cannot cost (a higher-order op other than ``torch.cond``).
    """
    inputs = _as_tuple(example_inputs)
    extra = _as_tuple(loss_inputs)
    kwargs = dict(example_kwargs or {})
    if not training and (loss_fn is not None or extra):
        raise ValueError(
            f"{name!r}: loss_fn / loss_inputs only apply to training graphs; pass training=True "
            "or drop them"
        )
    with _fake_state(model, training=training) as fake:
        args = fake.inputs(inputs + extra)
        fkwargs = fake.inputs(kwargs)
        with _generic_kernels(), _quiet_torch():
            if training:
                step = _TrainStep(model, loss_fn, n_inputs=len(inputs))
                ep = _export(step, args, fkwargs, name)
                graph, sources = _joint_graph(ep, args, fkwargs, name, _state_keys(step))
                strip = f"{_WRAPPED}."
            else:
                ep = _export(model, args, fkwargs, name)
                graph, sources = _forward_graph(ep, _state_keys(model))
                strip = ""
        converted = _convert(graph, sources, name=name, strip_prefix=strip, training=training)
    return graph_from(converted, name=name, training=training, metadata=metadata)


def graph_from(
    converted: _Converted,
    *,
    name: str,
    training: bool,
    metadata: Mapping[str, Any] | None = None,
    op_names: Sequence[str] | None = None,
    measured: Mapping[str, Any] | None = None,
) -> CompGraph:
    """The :class:`CompGraph` of a converted FX graph, with the importer's metadata (``source``,
    ``importer_version``, ``torch_version``, ``training``, the conversion's own) and ``metadata``
    on top; ``op_names`` and ``measured`` replace the conversion's names and add measured times
    (:mod:`graphopt.measure.profile`)."""
    meta = {
        "source": "torch.export",
        "importer_version": IMPORTER_VERSION,
        "torch_version": torch.__version__,
        "training": training,
        **converted.metadata,
        **dict(metadata or {}),
    }
    return CompGraph.from_arrays(
        name=name,
        op_names=converted.names if op_names is None else op_names,
        op_types=converted.types,
        flops=converted.flops,
        bytes_accessed=converted.bytes_accessed,
        output_bytes=converted.output_bytes,
        param_bytes=converted.param_bytes,
        edge_src=converted.edge_src,
        edge_dst=converted.edge_dst,
        edge_bytes=converted.edge_bytes,
        layer=converted.layers,
        output_shapes=converted.output_shapes,
        output_dtypes=converted.output_dtypes,
        input_shapes=converted.input_shapes,
        allowed=allowed_kinds(converted.types),
        measured=measured,
        metadata=meta,
    )


def reference_flops(
    model: torch.nn.Module,
    example_inputs: Any = (),
    *,
    training: bool = False,
    example_kwargs: Mapping[str, Any] | None = None,
    loss_fn: Callable[..., Any] | None = None,
    loss_inputs: Any = (),
) -> int:
    """FLOPs of ``model`` by ``torch.utils.flop_counter.FlopCounterMode``, run eagerly on fakes.

    The independent check of :func:`from_torch`: ``graph.flops.sum()`` must equal this. It runs the
    forward (and ``loss.backward()`` when ``training``) under the same kernel choices as the import
    (oneDNN off, attention on the math backend), with the arguments of :func:`from_torch`.
    """
    inputs = _as_tuple(example_inputs)
    with _fake_state(model, training=training) as fake:
        args = fake.inputs(inputs + _as_tuple(loss_inputs))
        fkwargs = fake.inputs(dict(example_kwargs or {}))
        with _generic_kernels(), FlopCounterMode(display=False) as counter, fake.mode:
            if training:
                loss = _TrainStep(model, loss_fn, n_inputs=len(inputs))(*args, **fkwargs)
                loss.backward()
            else:
                model(*args, **fkwargs)
    return int(counter.get_total_flops())


# ---------------------------------------------------------------------------- fake tensors
class _FakeState:
    def __init__(self, mode: FakeTensorMode) -> None:
        self.mode = mode

    def tensor(self, t: Any) -> Any:
        """A fake CPU tensor with ``t``'s shape, strides and dtype (``t`` may be on meta)."""
        with self.mode:
            return torch.empty_strided(
                tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="cpu"
            ).requires_grad_(t.requires_grad and t.is_floating_point())

    def inputs(self, tree: Any) -> Any:
        return tree_map(lambda x: self.tensor(x) if isinstance(x, torch.Tensor) else x, tree)


@contextlib.contextmanager
def _fake_state(model: torch.nn.Module, *, training: bool) -> Iterator[_FakeState]:
    """Swap every parameter, buffer and tensor attribute of ``model`` for a fake CPU twin (tied
    tensors stay tied) and set train/eval mode; everything is restored on exit."""
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"from_torch expects a torch.nn.Module, got {type(model).__name__}")
    fake = _FakeState(FakeTensorMode(allow_non_fake_inputs=False))
    memo: dict[int, Any] = {}
    undo: list[tuple[dict[str, Any], str, Any]] = []
    modes = [(m, m.training) for m in model.modules()]

    def twin(t: Any, param: bool) -> Any:
        if id(t) not in memo:
            ft = fake.tensor(t)
            memo[id(t)] = torch.nn.Parameter(ft, requires_grad=t.requires_grad) if param else ft
        return memo[id(t)]

    try:
        for module in model.modules():
            for store, param in ((module._parameters, True), (module._buffers, False)):
                for key, t in list(store.items()):
                    if t is not None:
                        undo.append((store, key, t))
                        store[key] = twin(t, param)
            attrs = vars(module)
            for key, t in list(attrs.items()):
                if isinstance(t, torch.Tensor):
                    undo.append((attrs, key, t))
                    attrs[key] = twin(t, False)
        model.train(training)
        yield fake
    finally:
        for store, key, t in reversed(undo):
            store[key] = t
        for module, mode in modes:
            module.training = mode


@contextlib.contextmanager
def _generic_kernels() -> Iterator[None]:
    """oneDNN off and attention on the math backend: see the module docstring (Devices)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # flags() warns about TF32 on Intel GPUs
        mkldnn_off = torch.backends.mkldnn.flags(enabled=False)
        mkldnn_off.__enter__()
    try:
        with sdpa_kernel(SDPBackend.MATH):
            yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mkldnn_off.__exit__(None, None, None)


@contextlib.contextmanager
def math_attention() -> Iterator[None]:
    """Scaled-dot-product attention on its math backend (the ops the imported graph holds);
    every other kernel as PyTorch chooses by default (oneDNN on)."""
    with sdpa_kernel(SDPBackend.MATH):
        yield


@contextlib.contextmanager
def _quiet_torch() -> Iterator[None]:
    """Silence torch's warnings and logs while tracing (a failed capture raises its own error)."""
    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _as_tuple(example_inputs: Any) -> tuple[Any, ...]:
    if isinstance(example_inputs, tuple):
        return example_inputs
    if isinstance(example_inputs, list):
        return tuple(example_inputs)
    return (example_inputs,)


# ---------------------------------------------------------------------------- capture
class _TrainStep(torch.nn.Module):
    """``loss_fn(model(*inputs), *loss_inputs)``: the scalar the joint graph differentiates."""

    def __init__(
        self, model: torch.nn.Module, loss_fn: Callable[..., Any] | None, n_inputs: int
    ) -> None:
        super().__init__()
        setattr(self, _WRAPPED, model)
        self.loss_fn = loss_fn
        self.n_inputs = n_inputs

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        output = getattr(self, _WRAPPED)(*args[: self.n_inputs], **kwargs)
        extra = args[self.n_inputs :]
        loss = self.loss_fn(output, *extra) if self.loss_fn else _default_loss(output)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            got = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise ValueError(f"the training loss must be a scalar tensor, got {got}")
        return loss.reshape(())


def _default_loss(output: Any) -> Any:
    if isinstance(output, torch.Tensor) and output.numel() == 1:
        return output
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    terms = [
        t.sum()
        for t in tree_leaves(output)
        if isinstance(t, torch.Tensor) and t.is_floating_point()
    ]
    if not terms:
        raise ValueError(
            "the model's output holds no floating-point tensor to build a loss from; "
            "pass loss_fn=... (and loss_inputs=...) to from_torch"
        )
    return sum(terms[1:], terms[0])


def _export(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
    # torch.export prints the partial graph of a failed capture to stderr; keep it out of the way
    # (the ValueError says what failed) and pass through whatever a successful capture printed.
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            ep = torch.export.export(module, args, kwargs, strict=False)
    except Exception as e:  # torch raises many types; all mean "cannot capture"
        raise ValueError(_capture_error(name, e)) from e
    sys.stderr.write(printed.getvalue())
    return ep


def _capture_error(name: str, e: BaseException) -> str:
    text = str(e)
    headline = _headline(e)
    where = _user_frames(e)
    data_dependent = "data-dependent" in text or "data dependent" in text
    if data_dependent:
        fix = (
            "the model branches on tensor values, which a graph of fixed ops cannot hold. Fix: "
            "make the condition depend only on shapes or Python constants, remove the "
            "data-dependent branch, or express it with torch.cond (graphopt costs its dearer "
            "branch)"
        )
    else:
        fix = (
            "fix the construct above, or check the example inputs (fixed shapes, tensors of the "
            "right dtypes); torch.export.draft_export(model, args) lists every problem"
        )
    return (
        f"torch.export cannot capture {name!r}: {type(e).__name__}: {headline}"
        + (f"\n  failing construct: {where}" if where else "")
        + f"\n  {fix}"
    )


def _headline(e: BaseException) -> str:
    return next((line.strip() for line in str(e).splitlines() if line.strip()), "")


def _user_frames(e: BaseException, limit: int = 3) -> str:
    """The innermost traceback frames outside torch's tracing machinery (user code, torch.nn,
    transformers...), as ``file:line in fn: `code` <- ...``."""
    internal = os.path.dirname(torch.__file__) + os.sep
    layers = os.path.join(internal, "nn") + os.sep
    dispatch = os.path.join(internal, "nn", "modules", "module.py")  # Module.__call__ plumbing

    def shown_frame(f: traceback.FrameSummary) -> bool:
        user = not f.filename.startswith(internal) or f.filename.startswith(layers)
        return user and f.filename not in (dispatch, __file__) and bool(f.line)

    frames = [f for f in traceback.extract_tb(e.__traceback__) if shown_frame(f)]
    shown = [
        f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}: `{f.line}`"
        for f in reversed(frames[-limit:])
    ]
    return " <- ".join(shown)


def _state_keys(module: torch.nn.Module) -> dict[str, str]:
    """Fully qualified name -> a key shared by tied tensors (``torch.export`` lifts a tied
    embedding / LM head as two placeholders, and uses one of them)."""
    keys: dict[str, str] = {}
    named = (
        *module.named_parameters(remove_duplicate=False),
        *module.named_buffers(remove_duplicate=False),
    )
    for fqn, t in named:
        keys[fqn] = f"tensor-{id(t)}"
    return keys


def _forward_graph(
    ep: torch.export.ExportedProgram, state_keys: Mapping[str, str]
) -> tuple[Any, dict[str, str]]:
    """Core-ATen forward graph and its placeholders' sources: ``"input"`` or a state key."""
    ep = ep.run_decompositions()
    state = {InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR}
    sources = {}
    for spec in ep.graph_signature.input_specs:
        if hasattr(spec.arg, "name"):
            is_state = spec.kind in state
            key = state_keys.get(spec.target or "", f"state-{spec.target}") if is_state else "input"
            sources[spec.arg.name] = key
    return ep.graph_module, sources


def _joint_graph(
    ep: torch.export.ExportedProgram,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str,
    state_keys: Mapping[str, str],
) -> tuple[Any, dict[str, str]]:
    """Forward + backward graph traced by AOTAutograd from the exported program."""
    try:
        from torch._decomp import core_aten_decompositions
        from torch._functorch.aot_autograd import aot_export_joint_with_descriptors
    except ImportError as e:  # pragma: no cover - older torch
        raise ValueError(
            f"{name!r}: training graphs need torch >= 2.9 (aot_export_joint_with_descriptors); "
            "upgrade torch or import the forward graph (training=False)"
        ) from e
    decompositions: Any = core_aten_decompositions()
    try:
        with contextlib.ExitStack() as stack:
            joint = aot_export_joint_with_descriptors(
                stack, ep.module(), args, kwargs, decompositions=decompositions
            )
            gm = joint.graph_module
    except Exception as e:
        where = _user_frames(e)
        raise ValueError(
            f"{name!r}: torch could not build the training (joint) graph: "
            f"{type(e).__name__}: {_headline(e)}"
            + (f"\n  failing construct: {where}" if where else "")
            + "\n  check that the loss depends on the parameters and is differentiable, or "
            "import the forward graph (training=False)"
        ) from e
    sources = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            desc = node.meta.get("desc")
            if type(desc).__name__ in ("ParamAOTInput", "BufferAOTInput"):
                target = str(desc.target)
                sources[node.name] = state_keys.get(target, f"state-{target}")
            else:
                sources[node.name] = "input"
    return gm, sources


# ---------------------------------------------------------------------------- conversion
class _Root(NamedTuple):
    """The storage a value lives in: an op's output, a state tensor or a graph input."""

    key: tuple[str, int]  # (fx node name, output index): identifies the tensor
    op: int  # producing op, -1 for placeholders
    state: int  # state tensor id, -1 if not state
    nbytes: int


class _Converted(NamedTuple):
    names: list[str]
    types: list[str]
    flops: list[float]
    bytes_accessed: list[float]
    output_bytes: list[float]
    param_bytes: list[float]
    layers: list[str]
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_bytes: np.ndarray
    metadata: dict[str, Any]
    output_shapes: list[list[tuple[int, ...]]]
    output_dtypes: list[list[str]]
    input_shapes: list[list[tuple[int, ...]]]


def _nbytes(t: torch.Tensor) -> int:
    return int(t.numel()) * int(t.element_size())


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _tensors(value: Any) -> list[Any]:
    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


_VIEW_CACHE: dict[Any, bool] = {}


def _is_view(target: Any) -> bool:
    """True for ops that only alias their first input (no kernel)."""
    hit = _VIEW_CACHE.get(target)
    if hit is None:
        schema = getattr(target, "_schema", None)
        if schema is None:
            hit = False
        elif schema.name in ("aten::_unsafe_view",):
            hit = True
        else:
            returns = schema.returns
            alias = returns[0].alias_info if returns else None
            hit = alias is not None and not alias.is_write
        _VIEW_CACHE[target] = hit
    return hit


def _op_type(target: Any) -> str:
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        ns = getattr(packet, "_qualified_op_name", "").split("::")[0]
        base = packet.__name__.split(".")[-1]
        return base if ns in ("", "aten") else f"{ns}.{base}"
    return getattr(target, "__name__", str(target))


def _layer(node: Node, strip_prefix: str, training: bool) -> str:
    stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack") or {}
    if not stack:
        return ""
    path = str(list(stack.values())[-1][0])
    if not strip_prefix:
        return path
    if path == strip_prefix[:-1]:
        return ""
    if path.startswith(strip_prefix):
        return path[len(strip_prefix) :]
    return LOSS_LAYER if training else path


def _flops(node: Node, args: Any, kwargs: Any) -> int:
    target = node.target
    formula = flop_registry.get(getattr(target, "overloadpacket", target))
    if formula is not None:
        return int(formula(*args, **kwargs, out_val=node.meta.get("val")))
    if isinstance(target, HigherOrderOperator):
        return _hop_flops(node)
    return 0


def _hop_flops(node: Node) -> int:
    """``torch.cond``: the dearer branch, as ``FlopCounterMode`` counts it."""
    if node.target is not torch.ops.higher_order.cond:
        raise ValueError(
            f"op {node.name!r} is the higher-order op {getattr(node.target, '__name__', node.target)!r}, which graphopt "
            "cannot cost; only torch.cond is supported (unroll loops, inline the rest)"
        )
    owner = node.graph.owning_module
    branches = [
        getattr(owner, str(branch.target)) for branch in node.args[1:3] if isinstance(branch, Node)
    ]
    return max(_subgraph_flops(b.graph) for b in branches)


def _subgraph_flops(graph: torch.fx.Graph) -> int:
    total = 0
    for node in graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem:
            total += _flops(node, tree_map(_val, node.args), tree_map(_val, node.kwargs))
    return total


def _val(a: Any) -> Any:
    return a.meta.get("val") if isinstance(a, Node) else a


def _reads(
    node: Node, root: Mapping[Node, _Root | list[_Root | None]], cap_first: int | None
) -> list[tuple[_Root, int]]:
    """The distinct tensors ``node`` reads and how many bytes of each: ``min(view, base)`` per
    argument, summed over the arguments aliasing one tensor but never above its size;
    ``cap_first`` bounds the first argument (the table a gather-like op indexes)."""
    reads: dict[tuple[str, int], int] = {}
    roots: dict[tuple[str, int], _Root] = {}
    for position, a in enumerate(tree_leaves((node.args, node.kwargs))):
        r = root.get(a) if isinstance(a, Node) else None
        if not isinstance(r, _Root):
            continue
        view = a.meta.get("val")
        nbytes = min(_nbytes(view), r.nbytes) if isinstance(view, torch.Tensor) else r.nbytes
        if position == 0 and cap_first is not None:
            nbytes = min(nbytes, cap_first)
        reads[r.key] = min(reads.get(r.key, 0) + nbytes, r.nbytes)
        roots[r.key] = r
    return [(roots[key], nbytes) for key, nbytes in reads.items()]


def _convert(
    gm: torch.fx.GraphModule,
    sources: Mapping[str, str],
    *,
    name: str,
    strip_prefix: str,
    training: bool,
) -> _Converted:
    names: list[str] = []
    types: list[str] = []
    flops: list[float] = []
    accessed: list[float] = []
    out_bytes: list[float] = []
    param_bytes: list[float] = []
    layers: list[str] = []
    shapes: list[list[tuple[int, ...]]] = []
    dtypes: list[list[str]] = []
    in_shapes: list[list[tuple[int, ...]]] = []
    edges: dict[tuple[int, int], int] = {}
    root: dict[Node, _Root | list[_Root | None]] = {}  # where each fx value's data lives
    state_bytes: list[int] = []
    state_ids: dict[str, int] = {}
    attributed: set[int] = set()
    forward_ops = 0

    def new_state(t: Any, key: str) -> _Root:
        # Keyed by the tensor, so that two placeholders of one tied tensor are one state.
        if key not in state_ids:
            state_ids[key] = len(state_bytes)
            state_bytes.append(_nbytes(t))
        return _Root((key, 0), -1, state_ids[key], _nbytes(t))

    for node in gm.graph.nodes:
        # ---- values that are not kernels: inputs, state, views, getitem
        if node.op == "placeholder":
            t = node.meta.get("val")
            if isinstance(t, torch.Tensor):
                source = sources.get(node.name, "input")
                if source == "input":
                    root[node] = _Root((node.name, 0), -1, -1, _nbytes(t))
                else:
                    root[node] = new_state(t, source)
            continue
        if node.op == "get_attr":  # constants (and torch.cond's branch modules, skipped)
            attr = getattr(gm, str(node.target), None)
            if isinstance(attr, torch.Tensor):
                root[node] = new_state(attr, f"attr-{node.target}")
            continue
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            parent = root.get(node.args[0])
            if isinstance(parent, list):  # one output of a multi-output op
                item = parent[node.args[1]] if isinstance(node.args[1], int) else None
                if item is not None:
                    root[node] = item
            elif parent is not None:  # one view of a list of views (split, unbind)
                root[node] = parent
            continue
        if _is_view(node.target):
            parent = root.get(node.args[0]) if node.args else None
            if isinstance(parent, _Root):
                root[node] = parent
            continue

        # ---- a kernel
        out = node.meta.get("val")
        outputs = _tensors(out)
        op_flops = _flops(node, tree_map(_val, node.args), tree_map(_val, node.kwargs))
        if not outputs and op_flops == 0:
            continue  # asserts, symbolic sizes: no kernel
        index = len(names)
        op_type = _op_type(node.target)
        written = sum(_nbytes(t) for t in outputs)
        reads = _reads(node, root, cap_first=written if op_type in _GATHER_LIKE else None)
        pbytes = 0
        for r, nbytes in reads:
            if r.op >= 0:
                edges[(r.op, index)] = edges.get((r.op, index), 0) + nbytes
            if r.state >= 0 and r.state not in attributed:
                attributed.add(r.state)
                pbytes += r.nbytes
        names.append(node.name)
        types.append(op_type)
        flops.append(float(op_flops))
        accessed.append(float(sum(nbytes for _, nbytes in reads) + written))
        out_bytes.append(float(written))
        param_bytes.append(float(pbytes))
        layers.append(_layer(node, strip_prefix, training))
        shapes.append([_shape(t) for t in outputs])
        dtypes.append([_dtype(t) for t in outputs])
        in_shapes.append([_shape(t) for t in _tensors(tree_map(_val, (node.args, node.kwargs)))])
        forward_ops += node.meta.get("partitioner_tag") != "is_backward"
        if isinstance(out, torch.Tensor):
            root[node] = _Root((node.name, 0), index, -1, _nbytes(out))
        else:
            items = out if isinstance(out, (tuple, list)) else [out]
            root[node] = [
                _Root((node.name, i), index, -1, _nbytes(t))
                if isinstance(t, torch.Tensor)
                else None
                for i, t in enumerate(items)
            ]
    if not names:
        raise ValueError(f"{name!r}: the model has no compute op to import (an identity?)")
    pairs = sorted(edges)
    unattributed = sum(b for i, b in enumerate(state_bytes) if i not in attributed)
    return _Converted(
        names=names,
        types=types,
        flops=flops,
        bytes_accessed=accessed,
        output_bytes=out_bytes,
        param_bytes=param_bytes,
        layers=layers,
        edge_src=np.array([p[0] for p in pairs], dtype=np.int64),
        edge_dst=np.array([p[1] for p in pairs], dtype=np.int64),
        edge_bytes=np.array([edges[p] for p in pairs], dtype=np.float64),
        metadata={
            "forward_ops": int(forward_ops),
            "state_bytes": int(sum(state_bytes)),
            "unattributed_state_bytes": int(unattributed),
            "unknown_op_types": sorted({t for t in types if t not in OP_TYPE_CLASSES}),
        },
        output_shapes=shapes,
        output_dtypes=dtypes,
        input_shapes=in_shapes,
    )
