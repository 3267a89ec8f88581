"""The rules the package's folders keep (their __init__ docstrings), checked over every import, those inside
functions included: `kernels/` imports only kernels; `ops/` only the backend, kernels and ops, never a
method, an index or a configuration; a method's package no other method's."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gpu_tigrag"


def project_imports(path: Path) -> set[str]:
    """The gpu_tigrag modules `path` imports anywhere in its body, as dotted names under gpu_tigrag."""
    module = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = module[:-1] if module[-1] != "__init__" else module[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            if name.startswith("gpu_tigrag"):
                found.add(name)
                found.update(f"{name}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("gpu_tigrag"))
    return found


def offending(folder: str, allowed: tuple[str, ...]) -> dict[str, list[str]]:
    """{file: the modules outside `allowed` it imports} for every file under gpu_tigrag/`folder`."""
    bad = {}
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        modules = sorted(n for n in project_imports(path) if _is_module(n) and not n.startswith(allowed))
        if modules:
            bad[str(path.relative_to(PACKAGE))] = modules
    return bad


def _is_module(name: str) -> bool:
    """Whether a dotted name is a gpu_tigrag module or package (not a name imported from one)."""
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def test_kernels_import_only_kernels():
    assert offending("kernels", ("gpu_tigrag.kernels",)) == {}


def test_ops_import_no_method_index_or_configuration():
    assert offending("ops", ("gpu_tigrag.ops", "gpu_tigrag.kernels", "gpu_tigrag.backend")) == {}


def test_a_method_imports_no_other_method():
    methods = [p.name for p in (PACKAGE / "methods").iterdir() if (p / "__init__.py").is_file()]
    for method in methods:
        others = tuple(f"gpu_tigrag.methods.{m}" for m in methods if m != method)
        for path in sorted((PACKAGE / "methods" / method).rglob("*.py")):
            assert not [n for n in project_imports(path) if n.startswith(others)], path


def test_the_check_sees_imports_inside_functions():
    """ops/ does import kernels (at module level) and the backend: the check finds both when they are not
    allowed, and an import inside a function too."""
    found = offending("ops", ("gpu_tigrag.ops",))
    assert "gpu_tigrag.kernels.dense_dot" in found["ops/dense_dot.py"] and "gpu_tigrag.backend" in found["ops/dense_dot.py"]
    inside = {n for p in (PACKAGE / "cli").glob("*.py") for n in project_imports(p)}
    assert "gpu_tigrag.index.stream" in inside  # imported inside cmd_index's helper only
