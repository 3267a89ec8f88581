"""Shared fixtures and helpers: paths to the bundled example and to ../shared/data, backends under
test, the example's questions, a spaCy-free entity tagger for it, and its index built once per session.

Test modules import the helpers with `from conftest import ...`, never from one another, and never a
bench script (tests of bench/ run `python -m bench ...` in a subprocess).

Markers (declared in pyproject.toml): `slow` (real transformer/spaCy builds or otherwise long: not in
`make test`), `data` (reads ../shared/data), `gpu` (needs a CUDA device: the `backend` fixture's CuPy
case carries it, so `pytest -m gpu` selects every CuPy case), `reliability` (the reliability suite)."""

from __future__ import annotations

import contextlib
import http.server
import json
import logging
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpu_tigrag.backend import cuda_available, get_backend

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SHARED_DATA = Path(os.environ.get("TIGRAG_DATA", ROOT.parent / "shared" / "data"))

#: the questions of the bundled example (examples/questions.json), in file order
QUESTIONS = [q["question"] for q in json.loads((EXAMPLES / "questions.json").read_text())]

#: the named entities of the bundled example corpus with their spaCy labels
ENTITIES = {"Mirela Vantz": "PERSON", "Korvath": "GPE", "Oskar Helm": "PERSON", "Tamsin Orrey": "PERSON",
            "Ansel Brightwater": "PERSON", "Gideon Marsh": "PERSON", "Clara Weskin": "PERSON", "Port Elsin": "GPE",
            "Northern Ledger": "ORG", "Mount Varn": "LOC", "Piet Anholt": "PERSON", "Marta Quell": "PERSON",
            "Lena Sorvik": "PERSON", "Elsin Medal": "WORK_OF_ART", "Royal Conservatory of Halden": "ORG"}


def string_entities(texts):
    """An entity extractor for the example corpus without spaCy: the `ENTITIES` each text contains."""
    return [[(name, label) for name, label in ENTITIES.items() if name in text] for text in texts]


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


#: the settings of the shared example index: the stand-in encoder `hashing:128`, everything else default
EXAMPLE_ENCODER = "hashing:128"


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


def require_data(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is absent: put ../shared/data beside the checkout (or set TIGRAG_DATA) to run this test")
    return path


class ChatHandler(http.server.BaseHTTPRequestHandler):
    """A chat-completions endpoint for model "toy" that answers "The answer to QUESTION"; the first
    `fail_first` calls get HTTP 503 (set `calls` and `fail_first` before each use)."""

    fail_first = 0
    calls = 0
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with ChatHandler.lock:
            ChatHandler.calls += 1
            failing = ChatHandler.calls <= ChatHandler.fail_first
        if failing:
            self.send_error(503, "busy")
            return
        if self.path != "/v1/chat/completions" or body["model"] != "toy":
            self.send_error(404)
            return
        question = body["messages"][0]["content"].split("Question: ")[-1].split("\n")[0]
        reply = {"choices": [{"message": {"role": "assistant",
                                          "content": f"Thought: easy.\nAnswer: The answer to {question}"}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextlib.contextmanager
def logged_messages(logger: str = "gpu_tigrag"):
    """Collect the messages logged under `logger` (INFO and above) during the block into a list."""
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    target = logging.getLogger(logger)
    handler, level = Collect(logging.INFO), target.level
    target.addHandler(handler)
    target.setLevel(logging.INFO)
    try:
        yield messages
    finally:
        target.removeHandler(handler)
        target.setLevel(level)
