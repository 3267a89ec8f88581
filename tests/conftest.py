"""Shared fixtures: paths to the bundled example and to ../shared/data, backends under test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_tigrag.backend import cuda_available, get_backend

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SHARED_DATA = Path(os.environ.get("TIGRAG_DATA", ROOT.parent / "shared" / "data"))

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _backend_params():
    yield pytest.param("numpy", id="numpy")
    yield pytest.param(
        "cupy", id="cupy",
        marks=pytest.mark.skipif(not cuda_available(), reason="no CUDA device (CuPy backend not testable here)"),
    )


@pytest.fixture(params=list(_backend_params()))
def backend(request):
    """Each test using this runs once per backend; CuPy is reported as skipped without a GPU."""
    return get_backend(request.param)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return SHARED_DATA


def require_data(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is absent: put ../shared/data beside the checkout (or set TIGRAG_DATA) to run this test")
    return path
