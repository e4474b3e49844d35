"""Op classes: what kind of kernel an op is, the vocabulary of the fusion rules.

Every op of a :class:`~graphopt.graph.CompGraph` has one class (``graph.op_classes``), stored in
the graph file or derived from its op type by :func:`classify`:

=================  ===============================================================================
class              ops
=================  ===============================================================================
``elementwise``    one output element from the same element of each input: arithmetic,
                   activations, casts, comparisons, broadcasts, their gradients, random masks
``reduction``      many input elements to one output element: sum/mean/max/min, argmax, the
                   statistics of normalisations (batch/layer/group norm) and softmax, pooling
``contraction``    matmul, batched matmul, linear, convolution and their gradients
``data_movement``  elements moved, not computed: transpose/permute, concat, slice, split, gather,
                   scatter, reshape/view, pad, tile/expand
``opaque``         anything a fusing compiler treats as a black box: send/recv, collectives, custom
                   calls, control flow, sort/top-k, nonzero, RNG state, and every unknown op type
``source``         parameters, inputs and constants (nothing to compute)
=================  ===============================================================================

The tables cover the op types of every source of graphs: the built-in workloads (TensorFlow
names), ``torch.export``'s core ATen op set (every op tagged ``core`` in the installed torch, a
test keeps it complete) plus the backward ops of the joint graph, and PipeDream profiles (a
profiled layer is already a sequence of kernels: ``opaque`` unless it is plainly elementwise or
data movement). ATen overload suffixes (``add.Tensor``) and a namespace (``aten.``) are ignored.
"""

from __future__ import annotations

import hashlib
import json

ELEMENTWISE = "elementwise"
REDUCTION = "reduction"
CONTRACTION = "contraction"
DATA_MOVEMENT = "data_movement"
OPAQUE = "opaque"
SOURCE = "source"

OP_CLASSES: tuple[str, ...] = (ELEMENTWISE, REDUCTION, CONTRACTION, DATA_MOVEMENT, OPAQUE, SOURCE)
"""Every class, in the order of their integer codes (:func:`class_codes`)."""
HEROES: frozenset[str] = frozenset((REDUCTION, CONTRACTION))
"""The classes that make a kernel's hero: at most one per fused kernel."""
NEVER_FUSED: frozenset[str] = frozenset((OPAQUE, SOURCE))
"""The classes that never join a fused kernel."""

_TENSORFLOW = {
    ELEMENTWISE: """Abs Add AddN AddV2 ApplyGradientDescent ApplyAdam BiasAdd Cast Ceil Cos
        Div Elu EluGrad Equal Erf Exp Expm1 Fill Floor Greater GreaterEqual Identity LeakyRelu
        Less LessEqual Log Log1p LogicalAnd LogicalNot LogicalOr Maximum Minimum Mul Neg NotEqual
        OneHot OnesLike Pow RealDiv Reciprocal Relu Relu6 Relu6Grad ReluGrad Round Rsqrt RsqrtGrad
        Select SelectV2 Selu Sigmoid SigmoidGrad Sign Sin Softplus Sqrt SqrtGrad Square
        SquaredDifference StopGradient Sub Tanh TanhGrad ZerosLike""",
    REDUCTION: """All Any ArgMax ArgMin AvgPool AvgPoolGrad BiasAddGrad FusedBatchNorm
        FusedBatchNormGrad FusedBatchNormGradV3 FusedBatchNormV3 LayerNorm LogSoftmax Max MaxPool
        Mean Min Prod Softmax SoftmaxCrossEntropyWithLogits SparseSoftmaxCrossEntropyWithLogits
        Sum""",
    CONTRACTION: """BatchMatMul BatchMatMulV2 Conv2D Conv2DBackpropFilter Conv2DBackpropInput
        Conv3D DepthwiseConv2dNative DepthwiseConv2dNativeBackpropFilter
        DepthwiseConv2dNativeBackpropInput Einsum MatMul""",
    DATA_MOVEMENT: """BroadcastTo Concat ConcatV2 ExpandDims Gather GatherV2 Pack Pad Reshape
        ResourceGather ScatterAdd ScatterSub ScatterUpdate Slice Split SplitV Squeeze
        StridedSlice StridedSliceGrad Tile Transpose Unpack UnsortedSegmentSum""",
    OPAQUE: """MaxPoolGrad Send Recv _Send _Recv NcclAllReduce AllReduce AllGather
        CollectivePermute While If Case TopKV2 Where Unique RandomUniform RandomStandardNormal""",
    SOURCE: """Placeholder Const VariableV2 VarHandleOp Variable Input""",
}
"""TensorFlow op types (the built-in workloads are built from these)."""

_PIPEDREAM = {
    ELEMENTWISE: """ReLU ReLUBackward Dropout DropoutBackward AddBackward""",
    DATA_MOVEMENT: """View ViewBackward GetItem GetItemBackward Concat ConcatBackward Size
        SizeBackward""",
    SOURCE: """InputBackward""",
}
"""PipeDream layer types that are plainly elementwise or data movement (every other measured
layer, ``Conv2d`` or ``LSTM`` included, is opaque: it is several kernels already)."""

_ATEN = {
    ELEMENTWISE: """abs acos acosh add addcdiv addcmul alias_copy asin asinh atan atan2 atanh
        bitwise_and bitwise_not bitwise_or bitwise_xor ceil clamp clamp_max clamp_min clone copy
        cos cosh div elu elu_backward eq erf exp expm1 fill floor fmod full full_like ge gelu
        gelu_backward gt hardsigmoid hardsigmoid_backward hardswish hardswish_backward hardtanh
        hardtanh_backward isinf isnan le leaky_relu leaky_relu_backward lerp log log10 log1p log2
        log_sigmoid_forward logical_and logical_not logical_or logical_xor lt masked_fill maximum
        minimum mish mul native_dropout native_dropout_backward ne neg ones_like pow reciprocal
        relu remainder round rsqrt scalar_tensor sigmoid sigmoid_backward sign silu
        silu_backward sin sinh softplus softplus_backward sqrt square sub tan tanh tanh_backward
        threshold threshold_backward trunc where zeros_like _to_copy arange lift_fresh_copy
        _native_batch_norm_legit_no_training
        bernoulli rand randn rand_like randn_like""",
    REDUCTION: """_adaptive_avg_pool2d _adaptive_avg_pool2d_backward _adaptive_avg_pool3d
        adaptive_avg_pool1d avg_pool1d
        _log_softmax _log_softmax_backward_data _native_batch_norm_legit
        _native_batch_norm_legit_functional _softmax
        _softmax_backward_data amax amin any argmax argmin avg_pool2d avg_pool2d_backward
        avg_pool3d cumsum logsumexp max max_pool2d_with_indices max_pool3d_with_indices mean min
        native_batch_norm native_batch_norm_backward native_group_norm native_group_norm_backward
        native_layer_norm native_layer_norm_backward norm nll_loss_forward nll_loss_backward prod
        std sum var var_mean _cdist_forward _pdist_forward""",
    CONTRACTION: """addmm baddbmm bmm convolution convolution_backward mm matmul linear
        _scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention
        _scaled_dot_product_flash_attention_for_cpu""",
    DATA_MOVEMENT: """alias as_strided as_strided_scatter cat col2im constant_pad_nd diagonal
        embedding embedding_dense_backward expand flip gather index index_put index_select
        masked_scatter max_pool2d_with_indices_backward permute reflection_pad1d reflection_pad2d reflection_pad3d repeat
        replication_pad2d replication_pad3d scatter scatter_add scatter_reduce select
        select_scatter slice slice_scatter split split_with_sizes squeeze t transpose unsqueeze
        unbind upsample_bilinear2d upsample_nearest2d view view_as _unsafe_view _reshape_alias
        reshape contiguous grid_sampler_2d""",
    OPAQUE: """_embedding_bag _fft_c2r _fft_r2c _local_scalar_dense empty empty_strided
        nonzero randperm sort topk sym_numel sym_size
        sym_storage_offset sym_stride sym_is_contiguous resize_ cond while_loop""",
}
"""ATen op types (``torch.export``'s core ATen set and the backward ops of joint graphs)."""


def _table() -> dict[str, str]:
    out: dict[str, str] = {}
    for source in (_TENSORFLOW, _PIPEDREAM, _ATEN):
        for op_class, names in source.items():
            for name in names.split():
                if out.get(name, op_class) != op_class:
                    raise AssertionError(f"op type {name} is listed in two classes")
                out[name] = op_class
    return out


OP_TYPE_CLASSES: dict[str, str] = _table()
"""The class of every known op type (any other type is ``opaque``)."""
TABLE_DIGEST = hashlib.sha256(json.dumps(sorted(OP_TYPE_CLASSES.items())).encode()).hexdigest()[:12]
"""A digest of :data:`OP_TYPE_CLASSES`: caches of imported graphs (which store the classes) are
keyed by it, so a change of the table rebuilds them."""


def classify(op_type: str) -> str:
    """The class of ``op_type``: its entry in :data:`OP_TYPE_CLASSES` after dropping an ATen
    namespace and overload (``aten.add.Tensor`` -> ``add``), else ``opaque``."""
    name = op_type.removeprefix("aten.")
    found = OP_TYPE_CLASSES.get(name)
    if found is None and "." in name:
        found = OP_TYPE_CLASSES.get(name.split(".")[0])
    return found or OPAQUE


def check_class(op_class: str, where: str) -> str:
    """``op_class`` if it is a class; else a ValueError naming ``where`` and the classes."""
    if op_class not in OP_CLASSES:
        raise ValueError(
            f"{where}: unknown op class {op_class!r}; choose one of: {', '.join(OP_CLASSES)}"
        )
    return op_class
