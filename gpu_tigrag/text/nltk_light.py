"""NLTK's Punkt and Treebank tokenizer modules without NLTK's package initialiser.

`import nltk.tokenize.punkt` runs `nltk/__init__.py`, which imports most of NLTK and through it
SciPy's statistics and scikit-learn: about 1.2 s of a one-question process, for two modules that
need none of it. Here, when NLTK is not imported yet, the packages `nltk` and `nltk.tokenize` are
entered in `sys.modules` as bare packages (their folders, no initialiser run) for the time of the
import, so only the modules the tokenizers import are loaded. Every module so loaded then leaves
`sys.modules` again (the caller holds the one it asked for), so a later `import nltk` by anyone
loads NLTK whole, as if this had not run. Where NLTK's layout does not allow this
(a module of another version needs its initialiser), the full import is used: slower, the same
tokens.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import threading
import types

log = logging.getLogger(__name__)

_lock = threading.Lock()
#: the packages entered bare while the tokenizer modules import
_BARE_PACKAGES = ("nltk", "nltk.tokenize")


def _bare_package(name: str) -> types.ModuleType | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    module = types.ModuleType(name)
    module.__path__ = list(spec.submodule_search_locations)
    module.__package__ = name
    module.__file__ = spec.origin
    return module


def _nltk_names() -> set[str]:
    return {name for name in sys.modules if name == "nltk" or name.startswith("nltk.")}


def nltk_module(name: str) -> types.ModuleType:
    """The NLTK module `name` (e.g. "nltk.tokenize.punkt"), imported without NLTK's initialiser
    where NLTK is not imported yet (module doc)."""
    with _lock:
        if "nltk" in sys.modules:
            return importlib.import_module(name)
        before = _nltk_names()
        try:
            for package in _BARE_PACKAGES:
                bare = _bare_package(package)
                if bare is None:
                    return importlib.import_module(name)  # not installed: the import's own error
                sys.modules[package] = bare
            try:
                return importlib.import_module(name)
            except (ImportError, AttributeError) as exc:
                log.debug("NLTK's %s needs its package initialiser (%s): importing NLTK whole", name, exc)
                for loaded in _nltk_names() - before:
                    del sys.modules[loaded]
                module = importlib.import_module(name)
                before = _nltk_names()  # the whole import stays
                return module
        finally:
            for loaded in _nltk_names() - before:  # the caller holds the module; sys.modules is as it was
                del sys.modules[loaded]
