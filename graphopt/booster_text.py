"""LightGBM's text model, read field by field before LightGBM sees it.

LightGBM parses its own text model in C++ and trusts it: a damaged file ends the process
(``terminate called``, a floating-point exception on ``num_tree_per_iteration=0``), loops forever
on a tree whose children form a cycle, or prints ``[LightGBM] [Fatal]`` on stderr before raising
an error that names neither file nor field. :func:`read_booster` checks every field a regression
model of graphopt's op model uses and writes the model again in a canonical form holding only
those fields (no ``tree_sizes``, by which LightGBM cuts the text, no statistics), which is what
LightGBM is given.

What is read (LightGBM's ``gbdt`` text model, versions ``v3`` and ``v4``)::

    tree
    version=v4
    num_class=1                         one output: regression
    num_tree_per_iteration=1
    label_index=0
    max_feature_idx=F-1                 F: the features the caller names, in order:
    objective=regression                feature_names must be exactly those
    feature_names=NAME ...
    feature_infos=INFO ...              one per feature: none, [low:high] or categories a:b:...

    Tree=0
    num_leaves=N                        1..MAX_LEAVES
    num_cat=C                           categorical splits
    split_feature=...                   N-1 features, each < F
    threshold=...                       N-1 numbers, not NaN (a categorical split: its index < C)
    decision_type=...                   N-1 flags: categorical (1), default left (2), missing (4, 8)
    left_child=... right_child=...      N-1 each: node k >= 0, or leaf ~k; one tree from node 0
    leaf_value=...                      N finite numbers
    cat_boundaries=... cat_threshold=... with C > 0: C+1 offsets from 0, then the bitsets
    is_linear=0                         (absent: 0)
    shrinkage=S

    end of trees

Standard library only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import NamedTuple

MAX_TREES = 100_000
"""The most trees a model may hold (``graphopt costmodel ops train --rounds`` stays below)."""
MAX_LEAVES = 131_072
"""The most leaves a tree may have (LightGBM's own limit)."""
_INFO = re.compile(r"none|\[[^\[\]:]+:[^\[\]:]+\]|-?\d+(:-?\d+)*")


class Booster(NamedTuple):
    """A checked model: its canonical text, for LightGBM, and the sum over its trees of their
    largest leaf magnitude (a bound on any prediction)."""

    text: str
    largest_sum: float


def _fields(block: str) -> dict[str, str]:
    """The ``key=value`` lines of a block."""
    return dict(line.split("=", 1) for line in block.split("\n") if "=" in line)


def _numbers(
    tree: dict[str, str], key: str, count: int, where: str, infinite: bool = False
) -> list[float]:
    """``count`` numbers, finite (``infinite``: or infinite, as LightGBM writes a split above
    every value), never NaN."""
    try:
        values = [float(v) for v in tree[key].split()]
    except KeyError:
        raise ValueError(f"{where} has no {key}") from None
    except ValueError:
        raise ValueError(f"{where}: {key} holds something that is not a number") from None
    if len(values) != count:
        raise ValueError(f"{where}: {key} has {len(values)} entries, not {count}")
    if not all(math.isfinite(v) or (infinite and not math.isnan(v)) for v in values):
        kind = "a number" if infinite else "a finite number"
        raise ValueError(f"{where}: {key} holds a value that is not {kind}")
    return values


def _integers(
    tree: dict[str, str], key: str, count: int, low: int, high: int, where: str
) -> list[int]:
    try:
        values = [int(v) for v in tree[key].split()]
    except KeyError:
        raise ValueError(f"{where} has no {key}") from None
    except ValueError:
        raise ValueError(f"{where}: {key} holds something that is not an integer") from None
    if len(values) != count:
        raise ValueError(f"{where}: {key} has {len(values)} entries, not {count}")
    bad = [v for v in values if not low <= v <= high]
    if bad:
        raise ValueError(f"{where}: {key} holds {bad[0]}, outside {low}..{high}")
    return values


def _check_shape(left: list[int], right: list[int], leaves: int, where: str) -> None:
    """Every node reached once from node 0, and every leaf: a tree, no cycle."""
    seen_nodes, seen_leaves = {0}, set()
    stack = [0]
    while stack:
        node = stack.pop()
        for child in (left[node], right[node]):
            if child < 0:
                if ~child in seen_leaves:
                    raise ValueError(f"{where}: leaf {~child} is reached twice (not a tree)")
                seen_leaves.add(~child)
            elif child in seen_nodes:
                raise ValueError(f"{where}: node {child} is reached twice (not a tree)")
            else:
                seen_nodes.add(child)
                stack.append(child)
    if len(seen_nodes) != leaves - 1 or len(seen_leaves) != leaves:
        raise ValueError(f"{where}: some nodes or leaves are not reached from node 0 (not a tree)")


def _tree(block: str, k: int, num_features: int) -> tuple[str, float]:
    """The canonical text of tree ``k`` and its largest leaf magnitude."""
    where = f"tree {k}"
    tree = _fields(block)
    (leaves,) = _integers(tree, "num_leaves", 1, 1, MAX_LEAVES, where)
    (cats,) = _integers(tree, "num_cat", 1, 0, MAX_LEAVES, where) if "num_cat" in tree else (0,)
    values = _numbers(tree, "leaf_value", leaves, where)
    if tree.get("is_linear", "0") != "0":
        raise ValueError(f"{where}: linear trees are not read")
    (shrinkage,) = _numbers(tree, "shrinkage", 1, where) if "shrinkage" in tree else (1.0,)
    lines = [f"Tree={k}", f"num_leaves={leaves}", f"num_cat={cats}"]
    if leaves > 1:
        n = leaves - 1
        features = _integers(tree, "split_feature", n, 0, num_features - 1, where)
        thresholds = _numbers(tree, "threshold", n, where, infinite=True)
        kinds = _integers(tree, "decision_type", n, 0, 11, where)
        left = _integers(tree, "left_child", n, -leaves, n - 1, where)
        right = _integers(tree, "right_child", n, -leaves, n - 1, where)
        _check_shape(left, right, leaves, where)
        for kind, threshold in zip(kinds, thresholds, strict=True):
            if kind & 1 and not (threshold == int(threshold) and 0 <= threshold < cats):
                raise ValueError(f"{where}: a categorical split names category set {threshold}")
        lines += [
            "split_feature=" + " ".join(map(str, features)),
            "threshold=" + " ".join(map(repr, thresholds)),
            "decision_type=" + " ".join(map(str, kinds)),
            "left_child=" + " ".join(map(str, left)),
            "right_child=" + " ".join(map(str, right)),
        ]
    lines.append("leaf_value=" + " ".join(map(repr, values)))
    if cats:
        bounds = _integers(tree, "cat_boundaries", cats + 1, 0, 2**31 - 1, where)
        if bounds[0] != 0 or any(b > a for a, b in zip(bounds[1:], bounds, strict=False)):
            raise ValueError(f"{where}: cat_boundaries must rise from 0")
        bits = _integers(tree, "cat_threshold", bounds[-1], 0, 2**32 - 1, where)
        lines += [
            "cat_boundaries=" + " ".join(map(str, bounds)),
            "cat_threshold=" + " ".join(map(str, bits)),
        ]
    lines += ["is_linear=0", f"shrinkage={shrinkage!r}"]
    return "\n".join(lines) + "\n\n", max(abs(v) for v in values)


def read_booster(text: str, features: Sequence[str]) -> Booster:
    """Check LightGBM text model ``text`` of a regression over ``features`` (module docstring).

    Raises:
        ValueError: one line naming the field (and the tree) that is missing or wrong.
    """
    head, _, body = text.partition("\nTree=")
    if not text.startswith("tree\n") or not body:
        raise ValueError("not LightGBM's text model (a 'tree' header, then trees)")
    header = _fields(head)
    expected = {
        "num_class": "1",
        "num_tree_per_iteration": "1",
        "label_index": "0",
        "max_feature_idx": str(len(features) - 1),
    }
    for key, value in {"version": None, "objective": None, **expected}.items():
        if key not in header:
            raise ValueError(f"LightGBM's header has no {key}")
        if value is not None and header[key].strip() != value:
            raise ValueError(f"{key} is {header[key].strip()!r}, not {value}")
    if header["version"].strip() not in ("v3", "v4"):
        raise ValueError(f"version {header['version'].strip()!r} is not v3 or v4")
    if header["objective"].split()[0] != "regression":
        raise ValueError(f"objective {header['objective']!r} is not regression")
    if header.get("feature_names", "").split() != list(features):
        raise ValueError(f"feature_names are not this graphopt's {len(features)} op features")
    infos = header.get("feature_infos", "").split()
    if len(infos) != len(features) or not all(_INFO.fullmatch(i) for i in infos):
        raise ValueError(f"feature_infos must give {len(features)} ranges or category lists")
    trees, end, _ = body.partition("\nend of trees")
    if not end:
        raise ValueError("it is cut short (no 'end of trees')")
    blocks = trees.split("\nTree=")
    if len(blocks) > MAX_TREES:
        raise ValueError(f"it has {len(blocks):,} trees; at most {MAX_TREES:,} are read")
    out = [
        "tree\nversion=v4\nnum_class=1\nnum_tree_per_iteration=1\nlabel_index=0\n"
        f"max_feature_idx={len(features) - 1}\nobjective=regression\n"
        f"feature_names={' '.join(features)}\nfeature_infos={' '.join(infos)}\n\n"
    ]
    total = 0.0
    for k, block in enumerate(blocks):
        tree_text, largest = _tree(block, k, len(features))
        out.append(tree_text)
        total += largest
    out.append("end of trees\n")
    return Booster("".join(out), total)
