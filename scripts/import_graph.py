"""The package's import graph, read from the source (nothing is imported): every `import` and
`from ... import`, at module level or inside a function, as an edge from one module of jaxdev to
another. tests/test_layering.py holds the package to its rules with it; run alone it prints the
counts (`python scripts/import_graph.py [--edges]`): modules, edges, the edges made inside
functions, and each import circle.

An edge goes to the most specific module named: `from jaxdev.ops import kit` is an edge to
jaxdev.ops.kit, `from jaxdev.ops.registry import register` to jaxdev.ops.registry. The packages a
module passes through on the way (`jaxdev.ops/__init__` when importing jaxdev.ops.registry) are
not edges: Python runs them, but only once and before the module itself, so they close no circle
of their own making."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "jaxdev"


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    is_package: bool
    # (target module, line, inside a function, names taken by `from`)
    imports: list[tuple[str, int, bool, tuple[str, ...]]] = field(default_factory=list)


def modules(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Module]:
    """Every module of the package by its dotted name, with its imports resolved to modules."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        found[name] = Module(name, path, ast.parse(path.read_text(), str(path)), is_package)
    for module in found.values():
        module.imports = list(_imports(module, found))
    return found


def _imports(module: Module, known: dict[str, Module]):
    for node, in_function in _walk(module.tree, False):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _known_prefix(alias.name, known)
                if target:
                    yield target, node.lineno, in_function, ()
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            if not base or not _known_prefix(base, known):
                continue
            submodules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            for target in submodules:
                yield target, node.lineno, in_function, ()
            names = tuple(a.name for a in node.names if f"{base}.{a.name}" not in known)
            if names:
                yield _known_prefix(base, known), node.lineno, in_function, names


def _walk(node, in_function: bool):
    for child in ast.iter_child_nodes(node):
        yield child, in_function
        inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from _walk(child, inner)


def _absolute(module: Module, node: ast.ImportFrom) -> str | None:
    if not node.level:
        return node.module
    parts = module.name.split(".")
    if not module.is_package:
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _known_prefix(name: str, known) -> str | None:
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return None


def edges(found: dict[str, Module]) -> dict[str, set[str]]:
    """module -> the modules it imports (itself left out)."""
    return {m.name: {t for t, *_ in m.imports if t != m.name} for m in found.values()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(out)


def private_uses(found: dict[str, Module]) -> list[tuple[str, int, str]]:
    """(module, line, what) for each use of another module's private name: `from x import _y`, or
    `x._y` where x names a module of the package (dunder names are not private)."""
    out = []
    for module in found.values():
        aliases = {}
        for node, _ in _walk(module.tree, False):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _known_prefix(alias.name, found)
                    if target and alias.asname:
                        aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, node)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in found:
                        aliases[alias.asname or alias.name] = full
                    elif _private(alias.name) and base and _known_prefix(base, found) and base != module.name:
                        out.append((module.name, node.lineno, f"from {base} import {alias.name}"))
        for node, _ in _walk(module.tree, False):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                owner = _dotted(node.value)
                target = aliases.get(owner) or (owner if owner in found else None)
                if target and target != module.name:
                    out.append((module.name, node.lineno, f"{owner}.{node.attr}"))
    return sorted(set(out))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dotted(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return inner and f"{inner}.{node.attr}"
    return None


def main(argv: list[str]) -> int:
    found = modules()
    graph = edges(found)
    inside = {(m.name, t) for m in found.values() for t, _, f, _ in m.imports if f and t != m.name}
    top = {(m.name, t) for m in found.values() for t, _, f, _ in m.imports if not f and t != m.name}
    count = sum(len(v) for v in graph.values())
    print(f"modules {len(found)}  edges {count}  only inside functions {len(inside - top)}")
    for circle in circles(graph):
        print(f"circle of {len(circle)}: {' '.join(circle)}")
    private = private_uses(found)
    print(f"uses of other modules' private names {len(private)}")
    if "--private" in argv:
        for where in private:
            print(*where)
    if "--edges" in argv:
        for source in sorted(graph):
            for target in sorted(graph[source]):
                print(f"{source} -> {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
