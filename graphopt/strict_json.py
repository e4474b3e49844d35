"""Strict JSON for output: what ``json`` writes as ``Infinity`` or ``NaN`` (not JSON) is ``null``.

An invalid decision's step time is ``inf`` (illegal fusion) and an unmeasured figure ``nan``;
written as ``null``, the files stay readable by any JSON parser. Where the format has room, a
field beside such a number says why it is missing (``valid`` and ``reason`` of a result, a
``note`` of a row). Every JSON that graphopt writes or prints goes through :func:`dumps`
(``allow_nan=False``: a non-finite number that is left is an error, never ``NaN`` in a file).
Standard library only (any layer may use it).
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


def _plain(value: Any) -> Any:
    """A numpy scalar or array (anything with ``tolist``) as Python numbers, else ``float``."""
    if hasattr(value, "tolist"):
        return finite_or_none(value.tolist())
    return float(value)


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite_or_none` (``allow_nan=False``: anything left is an error);
    numpy scalars and arrays become Python numbers (their non-finite ones ``null`` too)."""
    return json.dumps(finite_or_none(value), allow_nan=False, default=_plain, **kwargs)
