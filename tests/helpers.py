"""Helpers the tests share, imported as `from helpers import ...` (fixtures are in conftest.py): the
paths to the bundled example and to ../shared/data, the example's questions, a spaCy-free entity tagger
for it, an encoder's vectors against the torch runtime's, a skip for absent data, a toy chat endpoint and a log collector. Test modules never import one
another, nor a bench script (tests of bench/ run `python -m bench ...` in a subprocess)."""

from __future__ import annotations

import contextlib
import http.server
import json
import logging
import os
import threading
from pathlib import Path

import pytest

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


#: the settings of the shared example index: the stand-in encoder `hashing:128`, everything else default
EXAMPLE_ENCODER = "hashing:128"


#: texts of several lengths for the encoder runtimes' tests (passages, questions, single words)
ENCODER_TEXTS = ["The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named "
                 "after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889.",
                 "who directed the film Titanic?",
                 "Gaby: A True Story is a 1987 American biographical drama film directed by Luis Mandoki.",
                 "cats",
                 "Mount Varn is the highest peak of the northern range; its summit was first reached in 1921 by a party "
                 "led by Piet Anholt, who later wrote about the climb in the Northern Ledger. The route they took is still "
                 "used.",
                 "Paris"]


def assert_close_to_torch(encoder, texts: list[str], model: str, least: float) -> None:
    """`encoder`'s vectors of `texts`, both kinds, are unit float32 rows within cosine `least` of the torch fp32
    runtime's for `model`."""
    import numpy as np

    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.encoders.sentence import SentenceTransformerEncoder

    torch_encoder = SentenceTransformerEncoder(EncoderConfig(model=model, backend="torch", device="cpu"))
    for kind in ("passage", "query"):
        ours, theirs = encoder.encode(texts, kind=kind), torch_encoder.encode(texts, kind=kind)
        assert ours.dtype == np.float32 and ours.shape == (len(texts), torch_encoder.dim)
        np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
        cosine = (ours * theirs).sum(axis=1)
        assert cosine.min() >= least, cosine


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
