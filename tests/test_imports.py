"""The package's import graph: no cycles (imports inside functions count), and the public verbs
stay functions whatever was imported first."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import perfmodel

PACKAGE = Path(perfmodel.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """perfmodel modules that ``path`` imports anywhere in its body (a package import counts as
    its ``__init__``; ``from pkg import sub`` counts as ``pkg.sub`` when that is a module)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: _imports(path, name, modules) for name, path in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_sees_function_level_imports():
    graph = import_graph()
    assert "perfmodel.calibration.measurements" in graph
    assert "perfmodel.hardware.catalog" in graph["perfmodel.profile"] or any(
        "perfmodel.hardware" in target for target in graph["perfmodel.profile"])


def test_the_package_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def _fresh(code: str) -> str:
    src = str(PACKAGE.parent)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": src, "PATH": ""}).stdout.strip()


def test_public_verbs_stay_functions_after_every_submodule_is_imported():
    for module in pkgutil.walk_packages(perfmodel.__path__, "perfmodel."):
        if not module.name.startswith("perfmodel.bench"):  # needs PyTorch
            importlib.import_module(module.name)
    from perfmodel import calibrate, estimate, rank, scaling, search, validate

    for verb in (estimate, search, rank, scaling, validate, calibrate):
        assert callable(verb) and not isinstance(verb, type(perfmodel)), verb


def test_parameters_are_known_in_a_fresh_process():
    # nothing imported but the package: the static table still knows every model's parameters
    out = _fresh("import perfmodel, sys; p = perfmodel.default_profile(); "
                 "print(p.get('gemm_tensor_core_efficiency'), p.get('dp_overlap'), 'pandas' in sys.modules)")
    efficiency, overlap, pandas_loaded = out.split()
    assert 0.3 <= float(efficiency) <= 1.0 and 0.0 <= float(overlap) <= 1.0 and pandas_loaded == "False"
