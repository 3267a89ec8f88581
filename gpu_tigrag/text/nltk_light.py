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
from pathlib import Path

log = logging.getLogger(__name__)

_lock = threading.Lock()


def _bare_packages() -> list[types.ModuleType] | None:
    """`nltk` and `nltk.tokenize` as bare packages (their folders, no initialiser run); None when NLTK
    is not installed as that layout. Found from nltk's spec alone: finding `nltk.tokenize`'s spec
    would import its parent, initialiser and all."""
    spec = importlib.util.find_spec("nltk")
    if spec is None or not spec.submodule_search_locations:
        return None
    packages = []
    folder = Path(next(iter(spec.submodule_search_locations)))
    for name, path in (("nltk", folder), ("nltk.tokenize", folder / "tokenize")):
        if not (path / "__init__.py").is_file():
            return None
        module = types.ModuleType(name)
        module.__path__ = [str(path)]
        module.__package__ = name
        module.__file__ = str(path / "__init__.py")
        packages.append(module)
    return packages


def _nltk_names() -> set[str]:
    return {name for name in sys.modules if name == "nltk" or name.startswith("nltk.")}


def nltk_module(name: str) -> types.ModuleType:
    """The NLTK module `name` (e.g. "nltk.tokenize.punkt"), imported without NLTK's initialiser
    where NLTK is not imported yet (module doc)."""
    with _lock:
        if "nltk" in sys.modules:
            return importlib.import_module(name)
        bare = _bare_packages()
        if bare is None:  # not installed (or another layout): the plain import and its own error
            return importlib.import_module(name)
        before = _nltk_names()
        try:
            sys.modules.update((module.__name__, module) for module in bare)
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
