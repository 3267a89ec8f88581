"""Shared fixtures: the backends under test, ../shared/data, and the bundled example's index built once per
session; the plain helpers (paths, questions, the example's entity tagger, ...) are in helpers.py. Tests are
laid out by layer: unit/, index/, methods/<name>/ (and methods/ for the registry and plug-ins, with the
contract every method keeps, methods/contract.py), reliability/, interface/ (CLI, API, evaluation, runs,
bench) and data/ (quality on ../shared/data).

Markers (declared in pyproject.toml): `slow` (real transformer/spaCy builds or otherwise long: not in
`make test`), `data` (reads ../shared/data), `gpu` (needs a CUDA device: the `backend` fixture's CuPy
case carries it, so `pytest -m gpu` selects every CuPy case), `reliability` (the reliability suite)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpu_tigrag.backend import cuda_available, get_backend
from helpers import EXAMPLE_ENCODER, EXAMPLES, SHARED_DATA, string_entities

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

def _backend_params():
    yield pytest.param("numpy", id="numpy")
    yield pytest.param(
        "cupy", id="cupy",
        marks=[pytest.mark.gpu,
               pytest.mark.skipif(not cuda_available(), reason="no CUDA device (CuPy backend not testable here)")],
    )


@pytest.fixture(params=list(_backend_params()))
def backend(request):
    """Each test using this runs once per backend; the CuPy case is marked `gpu` and skipped without a GPU."""
    return get_backend(request.param)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return SHARED_DATA


@dataclass(frozen=True)
class ExampleIndex:
    """The bundled example corpus (examples/corpus.json) indexed once: `index` in memory and the same
    index saved at `path`, with the stand-in encoder `hashing:128`, the entities of `string_entities` and
    the TIGRAG stage only. Shared by every test that requests it: read it, never change it (a test that
    writes to an index takes `copy_to` or builds its own)."""

    index: Any
    path: Path

    def copy_to(self, folder: Path) -> Path:
        """A private copy of the saved index at `folder` (for a test that writes into it)."""
        shutil.copytree(self.path, folder)
        return folder


@pytest.fixture(scope="session")
def example_index(tmp_path_factory) -> ExampleIndex:
    from gpu_tigrag.config import EncoderConfig, IndexConfig
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.encoders import load_encoder
    from gpu_tigrag.index.build import build_index
    from gpu_tigrag.index.store import save_index

    config = IndexConfig(encoder=EncoderConfig(model=EXAMPLE_ENCODER))
    index = build_index(load_corpus(EXAMPLES / "corpus.json"), config, encoder=load_encoder(config.encoder),
                        entity_extractor=string_entities)
    path = tmp_path_factory.mktemp("example") / "index"
    save_index(index, path)
    return ExampleIndex(index, path)
