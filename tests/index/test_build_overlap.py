"""Named-entity recognition runs beside the encoder in every build path (index.assemble.EntityThread,
index.stream.PartitionEntities): at the same time, with the same result as in line, and an error of
either side reaches the caller."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from helpers import EXAMPLES, string_entities
from gpu_tigrag.config import EncoderConfig, IndexConfig
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.index import assemble
from gpu_tigrag.index.add import add_passages
from gpu_tigrag.index.build import build_index
from gpu_tigrag.index.stream import build_index_streaming

CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"))
WAIT_S = 20.0


class MeetingEncoder:
    """The stand-in encoder, whose `encode` waits until the extractor has been entered: a build that ran
    NER only after the encoder would make it wait in vain (`met` stays False)."""

    def __init__(self, ner_started: threading.Event):
        self.inner = load_encoder(CONFIG.encoder)
        self.name, self.fingerprint, self.backend, self.dim = (self.inner.name, self.inner.fingerprint,
                                                               self.inner.backend, self.inner.dim)
        self.ner_started = ner_started
        self.met: list[bool] = []

    def encode(self, texts, show_progress=False, kind="passage"):
        self.met.append(self.ner_started.wait(WAIT_S))
        return self.inner.encode(texts, show_progress=show_progress, kind=kind)


def meeting_pair():
    started = threading.Event()

    def extractor(texts):
        started.set()
        return string_entities(texts)

    return MeetingEncoder(started), extractor


def assert_same_index(a, b):
    np.testing.assert_array_equal(a.embeddings, b.embeddings)
    np.testing.assert_array_equal(a.entities.chunk_ids, b.entities.chunk_ids)
    assert a.entities.texts == b.entities.texts and a.chunk_texts == b.chunk_texts


def test_ner_runs_while_the_encoder_runs_and_gives_the_in_line_index(monkeypatch):
    passages = load_corpus(EXAMPLES / "corpus.json")
    encoder, extractor = meeting_pair()
    overlapped = build_index(passages, CONFIG, encoder=encoder, entity_extractor=extractor)
    assert encoder.met == [True]
    assert {"embed", "ner", "ner_wait"} <= set(overlapped.timings)
    monkeypatch.setattr(assemble, "OVERLAP_NER", False)
    in_line = build_index(passages, CONFIG, encoder=load_encoder(CONFIG.encoder), entity_extractor=string_entities)
    assert_same_index(overlapped, in_line)


def test_add_runs_ner_beside_the_encoder():
    passages = load_corpus(EXAMPLES / "corpus.json")
    base = build_index(passages[:10], CONFIG, entity_extractor=string_entities)
    encoder, extractor = meeting_pair()
    grown = add_passages(base, passages[10:], encoder=encoder, entity_extractor=extractor)
    assert encoder.met == [True]
    assert_same_index(grown, build_index(passages, CONFIG, entity_extractor=string_entities))


def test_streamed_build_runs_ner_beside_the_encoder(tmp_path, monkeypatch):
    encoder, extractor = meeting_pair()
    streamed = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "a", CONFIG, partition_size=7, workers=1,
                                     encoder=encoder, entity_extractor=extractor)
    assert encoder.met and encoder.met[0]  # the first partition's NER started while it was being embedded
    monkeypatch.setattr(assemble, "OVERLAP_NER", False)
    in_line = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "b", CONFIG, partition_size=7, workers=1,
                                    encoder=load_encoder(CONFIG.encoder), entity_extractor=string_entities)
    assert_same_index(streamed, in_line)


class Broken(RuntimeError):
    pass


def broken_extractor(texts):
    raise Broken("the extractor failed")


@pytest.mark.parametrize("overlap", [True, False])
def test_an_extractor_error_reaches_the_caller(tmp_path, monkeypatch, overlap):
    monkeypatch.setattr(assemble, "OVERLAP_NER", overlap)
    passages = load_corpus(EXAMPLES / "corpus.json")
    with pytest.raises(Broken):
        build_index(passages, CONFIG, entity_extractor=broken_extractor)
    with pytest.raises(Broken):
        build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "s", CONFIG, partition_size=7, workers=1,
                              entity_extractor=broken_extractor)
    assert not (tmp_path / "s" / "manifest.json").exists()


def test_a_failed_streamed_build_leaves_no_recognition_running(tmp_path):
    """The encoder fails on the second partition while NER is busy: the build raises only once the NER
    thread has stopped, so nothing writes into the work folder after the build let go of it."""
    import time

    class FailingEncoder(MeetingEncoder):
        def encode(self, texts, show_progress=False, kind="passage"):
            self.met.append(True)
            if len(self.met) == 2:
                raise Broken("the encoder failed")
            return self.inner.encode(texts, show_progress=show_progress, kind=kind)

    def slow_extractor(texts):
        time.sleep(0.3)
        return string_entities(texts)

    with pytest.raises(Broken):
        build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "s", CONFIG, partition_size=5, workers=1,
                              encoder=FailingEncoder(threading.Event()), entity_extractor=slow_extractor)
    assert not [t for t in threading.enumerate() if t.name == "tigrag-ner" and t.is_alive()]


class FakeNer:
    """A spaCy pipeline stand-in with no entities, recording the thread that loaded it."""

    max_length = 1_000_000

    def pipe(self, texts, batch_size=1):
        return (type("Doc", (), {"ents": []})() for _ in texts)


def test_every_build_imports_its_models_in_the_calling_thread(tmp_path, monkeypatch):
    """Imports in two threads at once broke a CI run on CPython 3.11.7 ("AST constructor recursion depth
    mismatch" while spaCy loaded in the NER thread beside the encoder's import): the NER model is loaded,
    and an in-memory build's encoder too, before the NER thread starts."""
    from dataclasses import replace

    from gpu_tigrag.index import build as build_module
    from gpu_tigrag.index import entities as entities_module

    events: list[tuple[str, str]] = []
    loaded: dict[str, FakeNer] = {}

    def fake_load_ner(model):  # cached, as load_ner is: an event is a real load
        if model not in loaded:
            events.append(("ner", threading.current_thread().name))
            loaded[model] = FakeNer()
        return loaded[model]

    def recording_load_encoder(config, first_kind="query"):
        events.append(("encoder", threading.current_thread().name))
        return load_encoder(config, first_kind=first_kind)

    monkeypatch.setattr(entities_module, "load_ner", fake_load_ner)
    monkeypatch.setattr(build_module, "load_encoder", recording_load_encoder)
    config = replace(CONFIG, entities=replace(CONFIG.entities, model="fake-spacy-model"))
    main = threading.current_thread().name
    passages = load_corpus(EXAMPLES / "corpus.json")

    build_index(passages, config)
    assert events == [("encoder", main), ("ner", main)], events
    base = build_index(passages[:10], config)
    events.clear()
    loaded.clear()
    add_passages(base, passages[10:], encoder=load_encoder(CONFIG.encoder))
    assert events == [("ner", main)], events
    events.clear()
    loaded.clear()
    build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "s", config, partition_size=7, workers=1,
                          encoder=load_encoder(CONFIG.encoder))
    assert events == [("ner", main)], events
