"""The package's shape, held from the source (nothing is imported; scripts/import_graph.py reads it):
no import circle, counting imports made inside functions; no module using another's private names;
the layers (the device core below everything, ops below audit, cli, compiler and fused eager, the cli
on the auditor's library, op families on the registry and the kit alone); files of at most 450 lines
and functions of at most 80; op families jit through the kit's one policy, never with jax.jit."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
graph = sys.modules.setdefault("import_graph", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(graph)

MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 80
# What jaxdev/core may import besides itself: the modules below it (dtypes, the native module, the
# tracing flags, the program caches).
BELOW_CORE = ("jaxdev.dtypes", "jaxdev.native", "jaxdev.tracing", "jaxdev.programs")
ABOVE_OPS = ("jaxdev.audit", "jaxdev.cli", "jaxdev.compiler", "jaxdev.fused")
# ops modules that are not op families: the package itself, the registry, the kit, the dtype carriers
NOT_FAMILIES = ("jaxdev.ops.registry", "jaxdev.ops.kit", "jaxdev.ops.carriers")
JIT_POLICY = "jaxdev.ops.kit.jit"


@pytest.fixture(scope="module")
def modules():
    return graph.modules()


def _within(name: str, prefixes) -> bool:
    prefixes = (prefixes,) if isinstance(prefixes, str) else prefixes
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _imports(modules, source_prefix):
    for m in modules.values():
        if _within(m.name, source_prefix):
            for target, line, _, _ in m.imports:
                if target != m.name:
                    yield m, target, line


def _where(m, line) -> str:
    return f"{m.path.relative_to(ROOT)}:{line}"


def test_no_import_circle(modules):
    assert graph.circles(graph.edges(modules)) == []


def test_no_use_of_another_modules_private_names(modules):
    assert graph.private_uses(modules) == []


def test_core_imports_nothing_above_it(modules):
    bad = [f"{_where(m, line)} {t}" for m, t, line in _imports(modules, "jaxdev.core")]
    assert [b for b in bad if not _within(b.split()[-1], ("jaxdev.core", *BELOW_CORE))] == []


def test_ops_import_nothing_above_them(modules):
    bad = [f"{_where(m, line)} {t}" for m, t, line in _imports(modules, "jaxdev.ops") if _within(t, ABOVE_OPS)]
    assert bad == []


def test_cli_imports_only_the_auditor_library(modules):
    allowed = ("jaxdev.cli", "jaxdev.audit")
    bad = [f"{_where(m, line)} {t}" for m, t, line in _imports(modules, "jaxdev.cli") if not _within(t, allowed)]
    assert bad == []


def _family(name: str) -> str | None:
    """The op family `name` belongs to (a module or a package under jaxdev/ops), None for the rest."""
    parts = name.split(".")
    if len(parts) < 3 or parts[:2] != ["jaxdev", "ops"] or _within(name, NOT_FAMILIES):
        return None
    return ".".join(parts[:3])


def test_families_import_only_the_registry_and_the_kit(modules):
    bad = []
    for m, t, line in _imports(modules, "jaxdev.ops"):
        family = _family(m.name)
        if family and _within(t, "jaxdev.ops") and not _within(t, ("jaxdev.ops.registry", "jaxdev.ops.kit", family)):
            bad.append(f"{_where(m, line)} {t}")
    assert bad == []


def test_families_jit_through_the_one_policy(modules):
    """No jax.jit (nor `from jax import jit`) in jaxdev/ops outside the kit's jit policy."""
    bad = []
    for m in modules.values():
        if not _within(m.name, "jaxdev.ops") or m.name == JIT_POLICY:
            continue
        for node in ast.walk(m.tree):
            bare = isinstance(node, ast.Attribute) and node.attr == "jit" and graph._dotted(node.value) == "jax"
            taken = (
                isinstance(node, ast.ImportFrom) and node.module == "jax" and any(a.name == "jit" for a in node.names)
            )
            if bare or taken:
                bad.append(_where(m, node.lineno))
    assert bad == []


def test_files_and_functions_are_short(modules):
    long_files, long_functions = [], []
    for m in modules.values():
        lines = len(m.path.read_text().splitlines())
        if lines > MAX_FILE_LINES:
            long_files.append(f"{m.path.relative_to(ROOT)} {lines}")
        for node in ast.walk(m.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{_where(m, node.lineno)} {node.name} {length}")
    assert (long_files, long_functions) == ([], [])


def test_the_scanner_sees_function_level_imports_and_circles(tmp_path):
    """The scanner itself: an import inside a function is an edge, and two such edges close a circle;
    `from x import _y` and `x._y` are uses of x's private names."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg import b\n    return b._hidden\n")
    (package / "b.py").write_text("from pkg.a import _g\n_hidden = 1\n")
    found = graph.modules(tmp_path, "pkg")
    assert graph.edges(found)["pkg.a"] == {"pkg.b"}
    assert graph.circles(graph.edges(found)) == [["pkg.a", "pkg.b"]]
    assert [what for _, _, what in graph.private_uses(found)] == ["b._hidden", "from pkg.a import _g"]
