"""The layering: every module imports only from its own layer or below.

The order, lowest first (:data:`LAYERS`; ``docs/architecture.md`` draws it, and
:func:`test_the_architecture_diagram_lists_every_module_at_its_layer` holds the drawing to it):

1. ``graphopt.graph``, ``graphopt.shapes``, ``graphopt.op_classes``, ``graphopt.hardware``,
   ``graphopt.typing``, ``graphopt.tasks``, ``graphopt.configs``, ``graphopt.errors``,
   ``graphopt.accelerator``, ``graphopt.blocks``, ``graphopt.constraints``, ``graphopt.modes``,
   ``graphopt.signals``, ``graphopt.file_set``, ``graphopt.strict_json``,
   ``graphopt.weights``, ``graphopt.compiled``
2. ``graphopt.sim`` (engine, simulator, bounds, estimate, links), ``graphopt.op_model`` (with
   ``booster_text``), ``graphopt.workloads``, ``graphopt.importers``, ``graphopt.measure``, ``graphopt.decisions``
   (io, format, files, diff), ``graphopt.distributed``
3. ``graphopt.baselines``, ``graphopt.decoders`` (beside the heuristics they generalise),
   ``graphopt.optimizer`` (``graphopt optimize``: the heuristics, then the decoder search)
4. ``graphopt.encoding``, ``graphopt.nn``, ``graphopt.rundir``
5. ``envs``, ``graphopt.costmodel``
6. ``policies``
7. ``graphopt.train``
8. ``graphopt.eval``
9. ``graphopt.cli``, ``graphopt.demo``, ``graphopt.warmup``, ``graphopt.__main__``

Imports inside functions and under ``TYPE_CHECKING`` count as much as those at the top of a
module. No module imports itself through others either: an import cycle between modules (within
one layer too) fails :func:`test_no_import_cycle`, even where it works at run time.
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("graphopt", "envs", "policies")
LAYERS: dict[str, int] = {
    "graphopt": 1,
    "graphopt.graph": 1,
    "graphopt.accelerator": 1,
    "graphopt.errors": 1,
    "graphopt.hardware": 1,
    "graphopt.typing": 1,
    "graphopt.tasks": 1,
    "graphopt.modes": 1,
    "graphopt.op_classes": 1,
    "graphopt.shapes": 1,
    "graphopt.configs": 1,
    "graphopt.constraints": 1,
    "graphopt.blocks": 1,
    "graphopt.signals": 1,
    "graphopt.file_set": 1,
    "graphopt.strict_json": 1,
    "graphopt.weights": 1,
    "graphopt.compiled": 1,
    "graphopt.sim": 2,
    "graphopt.op_model": 2,
    "graphopt.booster_text": 2,
    "graphopt.workloads": 2,
    "graphopt.importers": 2,
    "graphopt.measure": 2,
    "graphopt.decisions": 2,
    "graphopt.distributed": 2,
    "graphopt.baselines": 3,
    "graphopt.decoders": 3,
    "graphopt.optimizer": 3,
    "graphopt.encoding": 4,
    "graphopt.nn": 4,
    "graphopt.rundir": 4,
    "envs": 5,
    "graphopt.costmodel": 5,
    "policies": 6,
    "graphopt.train": 7,
    "graphopt.eval": 8,
    "graphopt.cli": 9,
    "graphopt.demo": 9,
    "graphopt.warmup": 9,
    "graphopt.__main__": 9,
}


FRONT_DOOR = {"graphopt": ("graphopt.optimizer", "graphopt.nn.move_search")}
"""The imports against the order: the package's namespace offers ``graphopt.optimize``, whose
body imports :mod:`graphopt.optimizer` (and, with a learned move model,
:mod:`graphopt.nn.move_search`) when it is called (the package module itself is imported by
nothing, so no cycle can form through it; :func:`test_no_import_cycle` still checks)."""


def layer_of(module: str) -> int:
    """The layer of ``module``: that of its longest prefix in :data:`LAYERS`."""
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in LAYERS:
            return LAYERS[prefix]
    raise KeyError(f"module {module} has no layer: add it to LAYERS in {__file__}")


def modules() -> dict[str, Path]:
    """Every module of the three packages by dotted name."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


@functools.cache
def import_nodes(text: str, filename: str) -> tuple[ast.Import | ast.ImportFrom, ...]:
    """Every import statement of a module's source ``text``, at any depth. Cached by the text:
    parsing the three packages is most of the time of each test below that reads them all."""
    tree = ast.parse(text, filename)
    return tuple(n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom))


def imported(module: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """``(imported module, line)`` for every import of the three packages in ``path``."""
    is_package = path.name == "__init__.py"
    out = []
    for node in import_nodes(path.read_text(), str(path)):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for a in node.names:
                full = f"{prefix}.{a.name}"
                out.append((full if full in known else prefix, node.lineno))
    return [(m, line) for m, line in out if m.split(".")[0] in PACKAGES]


def resolve(target: str, known: dict[str, Path]) -> str:
    """The module that an import of ``target`` names: itself, or its longest prefix that is a
    module (``from graphopt.sim import Simulator`` imports the package ``graphopt.sim``)."""
    parts = target.split(".")
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in known:
            return ".".join(parts[:k])
    return target


def import_graph(known: dict[str, Path]) -> dict[str, dict[str, str]]:
    """``{module: {imported module: "path:line"}}`` over the modules ``known``, each import's
    first line (imports of a module by itself left out)."""
    graph: dict[str, dict[str, str]] = {}
    for module, path in known.items():
        edges = graph.setdefault(module, {})
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        for target, line in imported(module, path, known):
            found = resolve(target, known)
            if found in known and found != module:
                edges.setdefault(found, f"{where}:{line}")
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """One cycle ``[a, b, ..., a]`` per strongly connected component of ``graph`` with more than
    one module (Tarjan's algorithm, then the shortest way back to the component's first module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for component in components:
        start, members = component[0], set(component)
        paths = {start: [start]}
        frontier = [start]
        while frontier:
            v = frontier.pop(0)
            for w in sorted(graph[v]):
                if w == start:
                    out.append([*paths[v], start])
                    frontier = []
                    break
                if w in members and w not in paths:
                    paths[w] = [*paths[v], w]
                    frontier.append(w)
    return out


def violations() -> list[str]:
    known = modules()
    out = []
    for module, path in known.items():
        own = layer_of(module)
        for target, line in imported(module, path, known):
            if target in FRONT_DOOR.get(module, ()):
                continue
            if layer_of(target) > own:
                out.append(
                    f"{path.relative_to(ROOT)}:{line}: {module} (layer {own}) imports {target} "
                    f"(layer {layer_of(target)})"
                )
    return out


def test_every_module_has_a_layer() -> None:
    for module in modules():
        layer_of(module)


def test_no_import_against_the_layer_order() -> None:
    found = violations()
    assert not found, "imports against the layer order:\n" + "\n".join(found)


def test_no_import_cycle() -> None:
    graph = import_graph(modules())
    found = [
        " -> ".join(cycle)
        + " ("
        + ", ".join(graph[a][b] for a, b in itertools.pairwise(cycle))
        + ")"
        for cycle in cycles(graph)
    ]
    assert not found, "import cycles (move what both sides need to a module below them):\n" + (
        "\n".join(found)
    )


def test_a_cycle_is_caught(tmp_path: Path) -> None:
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import envs.second\n"
    )
    second.write_text("def f():\n    from envs import first\n")
    known = {"envs.first": first, "envs.second": second, "envs": ROOT / "envs" / "__init__.py"}
    graph = import_graph(known)
    assert graph["envs.first"] == {"envs.second": f"{first}:3"}
    assert cycles({k: graph[k] for k in ("envs.first", "envs.second")}) == [
        ["envs.first", "envs.second", "envs.first"]
    ]
    assert cycles({"a": {"b": ""}, "b": {"c": ""}, "c": {}}) == []


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    path.write_text("def f():\n    from graphopt.eval.compare import compare_on_graph\n")
    found = imported("graphopt.sim.bad", path, modules())
    assert found == [("graphopt.eval.compare", 2)]
    assert layer_of(found[0][0]) > layer_of("graphopt.sim.bad")


@pytest.mark.parametrize("module", ["graphopt.sim.estimate", "envs.one_shot", "graphopt.eval"])
def test_layer_of_known_modules(module: str) -> None:
    assert 1 <= layer_of(module) <= 9


def diagram_layers() -> dict[str, int]:
    """``{module: layer}`` of every dotted module name (and ``envs``, ``policies``) in the layer
    diagram of ``docs/architecture.md`` (the first code block under ``## Layers``; a line that
    starts with a layer number opens that layer)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    found: dict[str, int] = {}
    layer = 0
    for line in block.splitlines():
        number = re.match(r"\s+(\d)\s", line)
        if number:
            layer = int(number.group(1))
        line = re.sub(r"layers? [\d-]+\s*$", "", line)  # the "may import from" column
        for name in re.findall(r"\b(?:graphopt(?:\.\w+)+|envs|policies)\b", line):
            found.setdefault(name, layer)
    return found


def test_the_architecture_diagram_lists_every_module_at_its_layer() -> None:
    drawn = diagram_layers()
    missing = sorted(m for m in LAYERS if m != "graphopt" and m not in drawn)
    assert not missing, f"docs/architecture.md's layer diagram misses {missing}"
    wrong = {m: (layer, layer_of(m)) for m, layer in drawn.items() if layer != layer_of(m)}
    assert not wrong, f"drawn at the wrong layer (drawn, actual): {wrong}"
