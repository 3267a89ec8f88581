"""Named retrieval configurations: `paper` is TIGRAG as published (the dataclass defaults),
`best` the best configuration measured on the shared data (bench/results/quality.md)."""

from __future__ import annotations

from typing import Any, Mapping

from .config import RetrievalConfig, replace_path
from .errors import TigragError
from .methods.tigrag.config import FusionConfig

PRESETS: dict[str, RetrievalConfig] = {
    "paper": RetrievalConfig(),
    "best": RetrievalConfig.of("tigrag", fusion=FusionConfig(
        first_hop="hybrid", title_links=True, question_link_bonus=5.0, bridge_link_bonus=2.0,
        bridge_entities=8, dedup_passages=True, named_expansions="repeats", contained_expansions="question",
        expansion_passes=3, expansion_order="typed")),
}
DEFAULT_PRESET = "best"


def preset(name: str = DEFAULT_PRESET) -> RetrievalConfig:
    """The configuration of preset `name` (`paper` or `best`)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise TigragError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}") from None


def preset_with(name: str, overrides: Mapping[str, Any]) -> RetrievalConfig:
    """Preset `name` with `overrides` ({"tigrag.fusion.title_links": False, ...}) applied, as `--set` does."""
    config = preset(name)
    for path, value in overrides.items():
        config = replace_path(config, path, value)
    return config
