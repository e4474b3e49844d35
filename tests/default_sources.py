"""How a dataclass's field defaults are written in its source: the tests that hold a default to its
one home (a shared constant, not a copied literal) read them here."""

from __future__ import annotations

import ast
import inspect
from types import ModuleType


def default_sources(module: ModuleType, class_name: str) -> dict[str, str]:
    """``{field: source of its default}`` of the class ``class_name`` defined in ``module``
    (fields without a default left out), e.g. ``{"clusters": "DEFAULT_CLUSTER"}``."""
    tree = ast.parse(inspect.getsource(module))
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    return {
        n.target.id: ast.unparse(n.value)
        for n in body.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value
    }
