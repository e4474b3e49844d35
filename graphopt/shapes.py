"""Tensor shapes and dtypes of a graph's ops: the names, their sizes, and the checks.

An op of a :class:`~graphopt.graph.CompGraph` may carry the tensors it reads and writes:

- ``output_shapes[u]``: one shape per output tensor (a tuple of dims, each an int ``>= 0``; ``()``
  is a scalar), or ``None``: unknown (a PipeDream layer, a hand-made graph);
- ``output_dtypes[u]``: one dtype name per output (:data:`DTYPE_BYTES`), ``None`` when unknown;
- ``input_shapes[u]``: one shape per tensor argument, in the kernel's argument order (activations,
  parameters and inputs alike), or ``None``.

Known outputs must agree with the op's ``output_bytes``: the sum over the outputs of
``prod(shape) * itemsize(dtype)`` equals it exactly (:func:`check_op_tensors`), so a shape can
never silently disagree with the costs the simulator reads.

Dtype names are torch's (``float32``, ``bfloat16``, ``int64``, ``bool``...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

Shape = tuple[int, ...]
"""One tensor's dims."""

DTYPE_BYTES: dict[str, int] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "complex128": 16,
    "complex64": 8,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint64": 8,
    "uint32": 4,
    "uint16": 2,
    "uint8": 1,
    "bool": 1,
}
"""Every dtype a graph may name, with its bytes per element."""

SHORT_NAMES: dict[str, str] = {
    "float64": "f64",
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint8": "u8",
    "bool": "b1",
}
"""Short names for display (:func:`format_tensors`), as HLO text writes them."""


def parse_shapes(value: Any, where: str) -> tuple[Shape, ...] | None:
    """A list of shapes (each a list of ints ``>= 0``) as a tuple of tuples; ``None`` stays
    ``None`` (unknown).

    Raises:
        ValueError: not a list of lists of ints, or a negative dim (``where`` names the op).
    """
    if value is None:
        return None
    if type(value) is tuple and all(_is_shape(s) for s in value):
        return value  # already parsed (a graph built in memory): the fast path
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{where}: shapes must be a list of shapes (lists of ints), got {value!r}")
    shapes = []
    for shape in value:
        if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
            raise ValueError(f"{where}: shape {shape!r} is not a list of dims")
        dims = []
        for dim in shape:
            if isinstance(dim, bool) or not isinstance(dim, int):
                raise ValueError(f"{where}: shape {list(shape)!r} has dim {dim!r}; dims are ints")
            if dim < 0:
                raise ValueError(
                    f"{where}: shape {list(shape)!r} has the negative dim {dim}; dims are >= 0"
                )
            dims.append(int(dim))
        shapes.append(tuple(dims))
    return tuple(shapes)


def _is_shape(shape: Any) -> bool:
    return type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape)


def parse_dtypes(value: Any, where: str) -> tuple[str, ...] | None:
    """A list of dtype names as a tuple; ``None`` stays ``None`` (unknown).

    Raises:
        ValueError: not a list of strings, or a name not in :data:`DTYPE_BYTES`.
    """
    if value is None:
        return None
    if type(value) is tuple and all(isinstance(n, str) and n in DTYPE_BYTES for n in value):
        return value  # the fast path
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{where}: dtypes must be a list of dtype names, got {value!r}")
    for name in value:
        if not isinstance(name, str):
            raise ValueError(f"{where}: dtypes must be a list of dtype names, got {name!r} in it")
        if name not in DTYPE_BYTES:
            raise ValueError(
                f"{where}: unknown dtype {name!r}; choose one of: {', '.join(DTYPE_BYTES)}"
            )
    return tuple(str(name) for name in value)


def nbytes(shape: Shape, dtype: str) -> int:
    """Bytes of one tensor."""
    return math.prod(shape) * DTYPE_BYTES[dtype]


def check_op_tensors(
    shapes: tuple[Shape, ...] | None,
    dtypes: tuple[str, ...] | None,
    output_bytes: float,
    where: str,
) -> None:
    """Refuse outputs whose shapes and dtypes disagree with each other or with ``output_bytes``.

    Either may be ``None`` (unknown); a dtype without its shape (or the reverse) says nothing
    about the bytes and is accepted.

    Raises:
        ValueError: a different number of shapes and dtypes, or bytes that differ.
    """
    if shapes is None or dtypes is None:
        return
    if len(shapes) != len(dtypes):
        raise ValueError(
            f"{where}: {len(shapes)} output shape(s) but {len(dtypes)} dtype(s); give one dtype "
            "per output"
        )
    total = sum(nbytes(s, d) for s, d in zip(shapes, dtypes, strict=True))
    if total != output_bytes:
        raise ValueError(
            f"{where}: its outputs {format_tensors(shapes, dtypes)} hold {total:,} bytes but "
            f"output_bytes is {output_bytes:,.0f}; fix the shapes, the dtypes or output_bytes"
        )


def format_tensors(shapes: tuple[Shape, ...] | None, dtypes: tuple[str, ...] | None) -> str:
    """``f32[8,64,56,56]``, several outputs comma-separated; ``?`` for what is unknown."""
    if shapes is None:
        return "?" if dtypes is None else ", ".join(f"{SHORT_NAMES.get(d, d)}[?]" for d in dtypes)
    names = dtypes if dtypes is not None else ("?",) * len(shapes)
    return ", ".join(
        f"{SHORT_NAMES.get(d, d)}[{','.join(map(str, s))}]"
        for s, d in zip(shapes, names, strict=True)
    )
