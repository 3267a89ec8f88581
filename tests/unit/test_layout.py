"""The design card's top level holds kernels/, and it is installed only as gpu_tigrag.kernels: the import
name stays gpu_tigrag.kernels (from the checkout and from a wheel installed elsewhere), the wheel and the
editable install ship no top-level `kernels` (a PyPI distribution of that name comes with transformers), and
from the repository root `import kernels` never finds the project's folder (it holds no __init__.py)."""

from __future__ import annotations

import ast
import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT


def run_python(code: str, cwd: Path, **env: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_kernels_are_the_top_level_folder_imported_as_gpu_tigrag_kernels():
    import gpu_tigrag.kernels.ppr as ppr

    assert Path(ppr.__file__).resolve().parent == ROOT / "kernels"
    assert not (ROOT / "kernels" / "__init__.py").exists() and not (ROOT / "gpu_tigrag" / "kernels").exists()
    listed = subprocess.run(["git", "ls-files", "kernels"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert listed and {Path(name).name for name in listed} >= {"ppr.py", "push_ppr.py", "lazy_cuda.py"}


def test_import_kernels_from_the_root_never_finds_the_projects_folder():
    found = json.loads(run_python(
        "import importlib.util, json; s = importlib.util.find_spec('kernels'); "
        "print(json.dumps(None if s is None else [s.origin, list(s.submodule_search_locations or [])]))", ROOT))
    if found is not None:  # another distribution's `kernels` (transformers brings one), or nothing
        origin, locations = found
        assert origin is not None and not Path(origin).resolve().is_relative_to(ROOT / "kernels"), found
        assert str(ROOT / "kernels") not in locations


def test_every_package_folder_is_listed_for_the_wheel():
    import tomllib

    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    folders = {p.parent.relative_to(ROOT).as_posix().replace("/", ".")
               for p in (ROOT / "gpu_tigrag").rglob("__init__.py")}
    assert set(listed) == folders | {"gpu_tigrag.kernels"}


def test_the_wheel_ships_gpu_tigrag_kernels_and_no_top_level_kernels(tmp_path):
    """Built from a copy of the checkout (nothing is written into it), installed into a folder of its own and
    imported from outside the checkout."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("gpu_tigrag", "kernels"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(source),
                            "-w", str(tmp_path / "wheel")], capture_output=True, text=True, timeout=300)
    if built.returncode != 0 and "No module named" in built.stderr:
        pytest.skip(f"no build backend here: {built.stderr[-200:]}")
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"gpu_tigrag"}
    assert "gpu_tigrag/kernels/ppr.py" in names and not any(n.startswith("kernels/") for n in names)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    where = run_python("import gpu_tigrag.kernels.ppr as k; print(k.__file__)", tmp_path, PYTHONPATH=str(target))
    assert Path(where) == target / "gpu_tigrag" / "kernels" / "ppr.py"


def test_the_editable_install_maps_no_top_level_kernels():
    finders = [p for p in map(Path, sys.path) if p.is_dir() for p in p.glob("__editable__*gpu_tigrag*finder.py")]
    if not finders:
        pytest.skip("gpu_tigrag is not installed in editable mode here")
    for finder in finders:
        tree = ast.parse(finder.read_text())
        mapping = next(ast.literal_eval(node.value) for node in ast.walk(tree)
                       if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "MAPPING")
        assert "kernels" not in mapping and set(mapping) <= {"gpu_tigrag", "gpu_tigrag.kernels"}, mapping


def test_spec_of_the_package_from_outside_the_checkout(tmp_path):
    assert importlib.util.find_spec("gpu_tigrag") is not None
    where = run_python("import gpu_tigrag.kernels.dense_dot as k; print(k.__file__)", tmp_path)
    assert Path(where).name == "dense_dot.py"
