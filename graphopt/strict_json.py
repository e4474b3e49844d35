"""Strict JSON for results: what ``json`` writes as ``Infinity`` or ``NaN`` (not JSON) is ``null``.

An invalid decision's step time is ``inf`` (illegal fusion) and an unmeasured figure ``nan``;
written as ``null``, the files stay readable by any JSON parser. The ``valid`` and ``reason``
fields beside such a number say why it is missing.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite_or_none(value: Any) -> Any:
    """``value`` with every non-finite float, in any nesting of dicts, lists and tuples, as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite_or_none` (``allow_nan=False``: anything left is an error);
    numpy scalars become floats."""
    return json.dumps(finite_or_none(value), allow_nan=False, default=float, **kwargs)
