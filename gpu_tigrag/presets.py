"""Named retrieval configurations: `paper` is TIGRAG as published (the dataclass defaults),
`best` the best configuration measured on the shared data (bench/results/quality.md)."""

from __future__ import annotations

from .config import FusionConfig, RetrievalConfig
from .errors import TigragError

PRESETS: dict[str, RetrievalConfig] = {
    "paper": RetrievalConfig(),
    "best": RetrievalConfig(fusion=FusionConfig(
        first_hop="hybrid", title_links=True, question_link_bonus=0.5, bridge_link_bonus=0.2,
        bridge_entities=8, dedup_passages=True)),
}
DEFAULT_PRESET = "best"


def preset(name: str = DEFAULT_PRESET) -> RetrievalConfig:
    """The configuration of preset `name` (`paper` or `best`)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise TigragError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}") from None
