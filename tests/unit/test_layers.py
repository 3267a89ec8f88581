"""The rules the package's folders keep (their __init__ docstrings), checked over every import, those inside
functions included: `kernels/` imports only kernels; `ops/` only the backend, kernels and ops, never a
method, an index or a configuration; a method's package no other method's."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gpu_tigrag"
#: the top-level kernels/ folder is the package gpu_tigrag.kernels
KERNELS = ROOT / "kernels"


def module_parts(path: Path) -> tuple[str, ...]:
    """The dotted name of the module at `path` as parts (`kernels/ppr.py` is gpu_tigrag.kernels.ppr)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ("gpu_tigrag", *parts) if parts[0] == "kernels" else parts


def source_files(folder: str) -> list[Path]:
    """The .py files of gpu_tigrag/`folder` (`kernels`: the top-level folder)."""
    return sorted((KERNELS if folder == "kernels" else PACKAGE / folder).rglob("*.py"))


def project_imports(path: Path) -> set[str]:
    """The gpu_tigrag modules `path` imports anywhere in its body (inside functions too, not under
    `if TYPE_CHECKING:`), as dotted names, with each imported name appended (`pkg.mod.name`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_parts(path)[:-1]
    typing_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
                   for statement in node.body for inner in ast.walk(statement)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
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


def module_graph() -> dict[str, set[str]]:
    """{module: the package's modules it imports} over every file of the package."""
    modules = {}
    for path in [*PACKAGE.rglob("*.py"), *KERNELS.glob("*.py")]:
        parts = module_parts(path)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def resolve(name: str) -> str:
        parts = name.split(".")
        while parts and ".".join(parts) not in modules and ".".join(parts) != "gpu_tigrag.kernels":
            parts.pop()
        return ".".join(parts)

    # importing the package gpu_tigrag itself runs no import of the package (its API is loaded on first use)
    graph = {name: {resolve(n) for n in project_imports(path)} - {name, "", "gpu_tigrag"}
             for name, path in modules.items()}
    graph["gpu_tigrag.kernels"] = set()  # a namespace package (kernels/ holds no __init__.py): no code of its own
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of `graph` with more than one module (Tarjan, iterative)."""
    order, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for start in graph:
        if start in order:
            continue
        work = [(start, iter(sorted(graph[start])))]
        order[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in order:
                    order[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], order[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def offending(folder: str, allowed: tuple[str, ...]) -> dict[str, list[str]]:
    """{file: the modules outside `allowed` it imports} for every file under gpu_tigrag/`folder`."""
    bad = {}
    for path in source_files(folder):
        modules = sorted(n for n in project_imports(path)
                         if _is_module(n) and not n.startswith(allowed) and n != "gpu_tigrag")
        if modules:
            bad[path.relative_to(KERNELS.parent if folder == "kernels" else PACKAGE).as_posix()] = modules
    return bad


def _is_module(name: str) -> bool:
    """Whether a dotted name is a gpu_tigrag module or package (not a name imported from one)."""
    parts = name.split(".")[1:]
    base = KERNELS if parts[:1] == ["kernels"] else PACKAGE
    rel = Path(*parts[1:]) if parts[:1] == ["kernels"] else Path(*parts)
    return (base / rel).with_suffix(".py").is_file() or (base / rel / "__init__.py").is_file() or (
        parts == ["kernels"])


def test_kernels_import_only_kernels():
    """(and the module that gives numba a cache folder it can write)"""
    assert offending("kernels", ("gpu_tigrag.kernels", "gpu_tigrag.numba_cache")) == {}


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


def test_no_import_circle_runs_through_the_configuration():
    """The settings tree (config.py) stands above the registry, the leaf config types (config_types.py) and
    each method's settings below it, the factory apart from the registry: no circle of imports, functions
    included, holds any of them."""
    graph = module_graph()
    configuration = {"gpu_tigrag.config", "gpu_tigrag.config_types", "gpu_tigrag.methods.registry",
                     "gpu_tigrag.presets", "gpu_tigrag.index.index", "gpu_tigrag.retrieve.factory",
                     *(name for name in graph if name.startswith("gpu_tigrag.methods.") and name.endswith(".config"))}
    assert [sorted(c) for c in circles(graph) if c & configuration] == []
    assert "gpu_tigrag.config" not in {m for name in configuration - {"gpu_tigrag.config"} for m in graph[name]
                                       if name.endswith(".config") or name.endswith("config_types")}


def test_the_circle_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert circles({"a": {"b"}, "b": set()}) == []
