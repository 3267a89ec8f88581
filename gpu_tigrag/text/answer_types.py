"""Which kinds of entity a question asks its way through: the type nouns it names, as NER labels.

A multi-hop question names the type of each thing it passes through: "the *city* where the *performers*
of Brother were formed" goes through a person (or band) to a place. The bridging entity whose expanded
query "question entity" finds the next passage is mostly of such a type (bench/results/typed_expansions.md:
on MuSiQue-100, of the 418 expanded queries whose entity names no passage, the 229 of a type the question
names hold 21 of the 25 whose loss alone lowers their question's recall). `expected_label_mask` turns a question's type nouns
into the OntoNotes labels of spaCy's English NER (config_types.ENTITY_LABELS), as one bit mask
(`index.entities.label_mask`); `tigrag.fusion.expansion_order="typed"` embeds those entities first.

The lexicon is English common nouns of kinds of places, people, organisations, works and events: a
handful per label, no proper names, nothing learned from the evaluation sets' answers. A place noun also
admits NORP: a nationality ("Swedish") stands for its country.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..index.entities import label_mask

_PLACE = ("GPE", "LOC", "FAC", "NORP")
#: type noun -> the NER labels of the entities it describes
TYPE_NOUNS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        "state country city county town village province region area continent nation island capital district "
        "municipality borough territory location place commonwealth kingdom empire".split(), _PLACE),
    **dict.fromkeys(
        "performer singer author composer director father mother wife husband son daughter brother sister president "
        "founder creator artist player actor actress writer producer spouse lyricist conductor screenwriter child "
        "parent king queen leader owner person individual man woman character painter architect designer".split(),
        ("PERSON",)),
    **dict.fromkeys(
        "company party team band university school college association organization organisation network label "
        "league club corporation group agency airline publisher manufacturer firm".split(), ("ORG",)),
    **dict.fromkeys("film movie album song book novel series opera painting".split(), ("WORK_OF_ART",)),
    **dict.fromkeys("event war battle".split(), ("EVENT",)),
    **dict.fromkeys("building stadium airport bridge museum church river mountain lake sea ocean".split(),
                    ("FAC", "LOC")),
}
_WORD = re.compile(r"[a-z]+")


def _singular(word: str) -> str:
    """`word` as the lexicon spells it: "countries" -> "country", "churches" -> "church", "bands" -> "band"."""
    if word in TYPE_NOUNS:
        return word
    for ending, replacement in (("ies", "y"), ("es", ""), ("s", "")):
        if word.endswith(ending) and word[: -len(ending)] + replacement in TYPE_NOUNS:
            return word[: -len(ending)] + replacement
    return word


@lru_cache(maxsize=1 << 16)
def expected_label_mask(question: str) -> int:
    """Bit mask of the NER labels of the entity types `question` names (0: it names none)."""
    labels: set[str] = set()
    for word in _WORD.findall(question.lower()):
        labels.update(TYPE_NOUNS.get(_singular(word), ()))
    return label_mask(sorted(labels))
