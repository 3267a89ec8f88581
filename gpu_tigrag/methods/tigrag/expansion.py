"""The vectors of the expanded queries μ ⊕ e (eq. 3.15) that rerank an expanded hop's pool.

A hop's max-cosine rerank (`rerank.masked_max_cosine`) takes, per question, the best of its vectors.
`tigrag.fusion.expansion_vectors` says how they are made:

* ``"text"`` (the paper): each text "question entity" is embedded in its own encoder pass, so a
  question with n bridging entities costs n passes over the whole question (8-11 per 2Wiki question).
* ``"sum"``: normalize(vec(question) + w·vec(entity)) with w = `fusion.expansion_weight`. The question's
  vector is the hop-1 query vector (passed in, or embedded again: the same text, so a caching encoder
  answers it), and each distinct entity of the batch is embedded alone, once: short texts, and an entity
  that several questions expand is paid once.
* ``"joint"``: one vector per question, of the text "question entity1 entity2 …" (its entities in the
  order given): one encoder pass per question instead of one per entity, and the max over one vector.

bench/results/expansion.md measures the recall and speed of each; `best` keeps "text" unless one stays
within 0.5 point of its recall on 2Wiki and MuSiQue-100.

`tigrag.fusion.named_expansions="question"` (under "text"): an entity the question already names
(`names_entity`: its title tokens a run of the question's) gets the question's own hop-1 vector instead of
an encoder pass over "question entity", a text that only repeats a name the question holds.
`"unlinked"` goes further: an entity that names no passage beyond the hop's own (a NER entity with no title
in the corpus) gets the question's vector too, so only the entities that lead to a passage are embedded. Its
seed tokens still widen the hop's pool. Recall holds on 2Wiki, not on MuSiQue-100's compositional questions
(bench/results/named_expansions.md).

`"repeats"` is "question" and more: an entity whose graph tokens (text/tokens.py: stopwords and short tokens
dropped) repeat the question's gets the question's vector too, when all of them are the question's, or all but
one and at least two are (`repeats_question`: "Jonathan Douglass Reid" or "Peter Phillip Bonetti" beside a
question naming "Jonathan Reid" or "Peter Bonetti"; a NER duplicate "Harris W. Fawell Fawell"). Such a text only
says the question's subject again; "Henry Ford" beside "Edsel Ford" shares one token and keeps its pass. Recall is
identical on the e5 indexes of MuSiQue-100 and 2Wiki with 0.30-0.47 fewer texts per question uncapped; under
`expansion_passes` the passes they free go to the next entities of the bridging order. `best` takes it
(bench/results/repeated_expansions.md).

`tigrag.fusion.contained_expansions="question"` (under "text"): an entity contained in another entity of the same
question (`contained_entities`: its title tokens a run of the other's, "Begum" beside "Ameena Begum", or the same
tokens as an earlier one) gets the question's hop-1 vector: the max-cosine rerank takes the best of a question's
vectors, and the longer entity's pass already holds the name. `best` takes it
(bench/results/contained_expansions.md).

`tigrag.fusion.expansion_passes=n` (under "text"): of a question's pairs still to embed after those, only the
first n in the bridging order (the retriever's `entity_ranks`: an earlier hop first, then `rank_bridges`' order)
get an encoder pass; the others take the question's hop-1 vector, their tokens still seeding the hop. `best`
took 5 (bench/results/expansion_passes.md) until the answer-type order below.

`tigrag.fusion.expansion_order="typed"`: the passes go first to entities that name a passage, then to entities
whose NER label is a type the question names (text/answer_types.py: "the city where …" asks through a place,
"the composer of …" through a person), then in the bridging order (`typed_ranks`). The pair a compositional
question needs is mostly the answer of its inner clause, of the type that clause names, where the PPR mass of
its tokens says little (bench/results/expansion_value.md). `best` takes it with 3 passes: ≤ 3.94 texts per
question against 5.2-5.4, recall within 0.5 point on 2Wiki and MuSiQue-100 (bench/results/typed_expansions.md).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

#: the values of `tigrag.fusion.expansion_vectors`
EXPANSION_VECTORS = ("text", "sum", "joint")


def expansion_texts(questions: Sequence[str], entity_texts: Sequence[Sequence[str]]) -> list[str]:
    """The paper's expanded-query texts "question entity", question by question (eq. 3.15)."""
    return [f"{question} {entity}" for question, entities in zip(questions, entity_texts) for entity in entities]


def names_entity(question: str | tuple[str, ...], entity: str) -> bool:
    """Whether `question` names `entity`: the entity's normalised title tokens (text/titles.py: accents
    folded, lower-cased, punctuation dropped) occur as a run of the question's (`question` given as its
    text or as those tokens already)."""
    from ...text.titles import title_tokens

    words = title_tokens(entity)
    if not words:
        return False
    return _is_run(words, title_tokens(question) if isinstance(question, str) else tuple(question))


def repeats_question(entity_tokens: np.ndarray, question_tokens: np.ndarray | set[int]) -> bool:
    """Whether an entity's graph tokens (ids) repeat the question's: at least one shared, and none new, or one
    new with at least two shared (named_expansions="repeats", module doc). `question_tokens` may be a set already
    (a caller testing several entities of one question builds it once): Python sets of a few ids, not np.isin,
    which costs ~20 µs a pair on the per-hop bookkeeping."""
    mine = set(np.asarray(entity_tokens).tolist())
    question = question_tokens if isinstance(question_tokens, set) else set(np.asarray(question_tokens).tolist())
    shared = len(mine & question)
    new = len(mine) - shared
    return shared >= 1 and (new == 0 or (new == 1 and shared >= 2))


def contained_entities(entity_texts: Sequence[Sequence[str]],
                       entity_words: Sequence[Sequence[tuple[str, ...]]] | None = None) -> np.ndarray:
    """bool, one per (question, entity) pair in order: whether the entity's normalised title tokens (as
    `names_entity`; `entity_words`, shaped as `entity_texts`, when the caller has them) are a run of another
    entity's of the same question, or equal to an earlier one's."""
    from ...text.titles import title_tokens

    if entity_words is None:
        entity_words = [[title_tokens(entity) for entity in entities] for entities in entity_texts]
    out = np.zeros(sum(len(entities) for entities in entity_texts), dtype=bool)
    start = 0
    for entities, words in zip(entity_texts, entity_words):
        for i, mine in enumerate(words):
            out[start + i] = bool(mine) and any(
                (other == mine and j < i) or (len(other) > len(mine) and _is_run(mine, other))
                for j, other in enumerate(words) if j != i)
        start += len(entities)
    return out


def _is_run(part: tuple[str, ...], whole: tuple[str, ...]) -> bool:
    """Whether `part` occurs as consecutive items of `whole`."""
    n = len(part)
    return any(whole[i:i + n] == part for i in range(len(whole) - n + 1))


def expansion_owner(entity_texts: Sequence[Sequence[str]]) -> np.ndarray:
    """int64, one entry per (question, entity) pair in order: the position of the pair's question."""
    return np.repeat(np.arange(len(entity_texts), dtype=np.int64), [len(entities) for entities in entity_texts])


def expanded_query_vectors(retriever: Any, questions: Sequence[str], entity_texts: Sequence[Sequence[str]],
                           question_vectors: Any = None,
                           entity_links: Sequence[Sequence[bool]] | None = None,
                           entity_ranks: Sequence[Sequence[int]] | None = None,
                           entity_repeats: Sequence[Sequence[bool]] | None = None) -> tuple[Any, np.ndarray]:
    """(vectors on the backend, owner): one unit vector per (question, entity) ("joint": per question
    with an entity), `owner[i]` the position in `questions` of vector i's question, made as
    `retriever.settings.fusion.expansion_vectors` says (module doc).
    `question_vectors` (len(questions) × dim, host or backend) are the questions' hop-1 vectors, used by
    "sum" and `named_expansions` only; without them "sum" embeds the questions again. `entity_links`, shaped as
    `entity_texts`: whether each entity names a passage (named_expansions="unlinked"; none: every one does).
    `entity_ranks`, shaped as `entity_texts`: each entity's place in its question's bridging order (0 first), which
    `fusion.expansion_passes` keeps the first of (none: the order given). `entity_repeats`, shaped as `entity_texts`:
    whether each entity's graph tokens repeat its question's (`repeats_question`; named_expansions="repeats"; none:
    no entity does)."""
    fusion = retriever.settings.fusion
    owner = expansion_owner(entity_texts)
    if fusion.expansion_vectors == "text":
        texts = expansion_texts(questions, entity_texts)
        if ((fusion.named_expansions != "text" or fusion.contained_expansions != "text" or fusion.expansion_passes)
                and question_vectors is not None and texts):
            links = (np.fromiter((bool(x) for row in entity_links for x in row), dtype=bool, count=len(texts))
                     if entity_links is not None else None)  # read under "unlinked" (and by the passes study's order)
            ranks = (np.fromiter((r for row in entity_ranks for r in row), dtype=np.int64, count=len(texts))
                     if entity_ranks is not None else None)
            repeats = None
            if fusion.named_expansions == "repeats" and entity_repeats is not None:
                repeats = np.fromiter((bool(x) for row in entity_repeats for x in row), dtype=bool, count=len(texts))
            return _named_from_question(retriever, questions, entity_texts, texts, owner, question_vectors,
                                        links, ranks, repeats), owner
        return retriever.encode(texts), owner
    if fusion.expansion_vectors == "joint":  # questions without an entity get no vector, as under "text"
        joint = [i for i, entities in enumerate(entity_texts) if len(entities)]
        texts = [" ".join([questions[i], *entity_texts[i]]) for i in joint]
        return retriever.encode(texts), np.asarray(joint, dtype=np.int64)
    if fusion.expansion_vectors != "sum":
        raise ValueError(f"unknown tigrag.fusion.expansion_vectors {fusion.expansion_vectors!r}")
    distinct: dict[str, int] = {}
    rows = np.array([distinct.setdefault(e, len(distinct)) for entities in entity_texts for e in entities],
                    dtype=np.int64)
    entity_vectors = retriever.encode(list(distinct))
    if question_vectors is None:
        question_vectors = retriever.encode(list(questions)) if owner.size else None
    else:
        question_vectors = retriever.be.asarray(question_vectors)
    return combine(retriever.be, question_vectors, entity_vectors, owner, rows, fusion.expansion_weight), owner


def _named_from_question(retriever: Any, questions: Sequence[str], entity_texts: Sequence[Sequence[str]],
                         texts: list[str], owner: np.ndarray, question_vectors: Any,
                         links: np.ndarray | None = None, ranks: np.ndarray | None = None,
                         repeats: np.ndarray | None = None) -> Any:
    """The "text" vectors with the question's own vector for each entity it names (named_expansions "question",
    "repeats" and "unlinked"), for each entity that names no passage ("unlinked", given `links`: one bool per pair),
    for each entity whose graph tokens repeat the question's ("repeats", given `repeats`: one bool per pair), for each
    entity contained in another of its question (contained_expansions "question"), and for each pair past the
    question's first `expansion_passes` still to embed (by `ranks`; module doc)."""
    from ...text.titles import title_tokens

    fusion = retriever.settings.fusion
    xp = retriever.be.xp
    named = np.zeros(len(texts), dtype=bool)
    # each entity's normalised title tokens, once for both tests below
    words = [[title_tokens(entity) for entity in entities] for entities in entity_texts]
    if fusion.named_expansions != "text":
        tokens = [title_tokens(q) for q in questions]  # once per question, not per entity
        named = np.array([bool(w) and _is_run(w, tokens[q]) for q, entity_words in enumerate(words) for w in entity_words],
                         dtype=bool)  # names_entity's test
    if fusion.named_expansions == "unlinked" and links is not None:
        named |= ~links
    if fusion.named_expansions == "repeats" and repeats is not None:
        named |= repeats
    if fusion.contained_expansions == "question":
        named |= contained_entities(entity_texts, words)
    if fusion.expansion_passes:
        named |= ~first_passes(owner, ~named, ranks, fusion.expansion_passes)
    question_vectors = retriever.be.asarray(question_vectors)
    vectors = xp.empty((len(texts), question_vectors.shape[1]), dtype=xp.float32)
    rest = np.flatnonzero(~named)
    if rest.size:
        vectors[xp.asarray(rest)] = retriever.encode([texts[i] for i in rest]).astype(xp.float32)
    if named.any():
        where = np.flatnonzero(named)
        vectors[xp.asarray(where)] = question_vectors[xp.asarray(owner[where])].astype(xp.float32)
    return vectors


def typed_ranks(question: str, bridges: Sequence[Any], ranks: Sequence[int]) -> list[int]:
    """Each bridge's place in the answer-type order of `question`'s pairs (expansion_order="typed", module doc):
    bridges naming a passage first, then those carrying a label of a type the question names
    (`answer_types.expected_label_mask`), each group in its bridging order `ranks`."""
    from ...text.answer_types import expected_label_mask

    expected = expected_label_mask(question)
    keys = [(not b.passages, not (b.labels & expected), rank) for b, rank in zip(bridges, ranks)]
    places = [0] * len(keys)
    for place, i in enumerate(sorted(range(len(keys)), key=keys.__getitem__)):
        places[i] = place
    return places


def first_passes(owner: np.ndarray, candidates: np.ndarray, ranks: np.ndarray | None, passes: int) -> np.ndarray:
    """bool per pair: among each question's `candidates`, the `passes` first by bridging rank (`ranks`, none: the
    order given)."""
    n = owner.size
    rank = ranks.astype(np.int64) if ranks is not None else np.arange(n, dtype=np.int64)
    order = np.lexsort((rank, ~candidates, owner))  # per question: candidates first, then by rank
    starts = np.searchsorted(owner[order], owner[order], side="left")
    place = np.empty(n, dtype=np.int64)
    place[order] = np.arange(n) - starts
    return candidates & (place < passes)


def combine(be: Any, question_vectors: Any, entity_vectors: Any, owner: np.ndarray, rows: np.ndarray,
            weight: float) -> Any:
    """float32 unit rows normalize(question_vectors[owner] + weight · entity_vectors[rows]), on the
    backend of `be` (host index arrays `owner`, `rows`); a zero sum stays zero."""
    xp = be.xp
    if owner.size == 0:
        return xp.zeros((0, entity_vectors.shape[1]), dtype=xp.float32)
    summed = (question_vectors[xp.asarray(owner)].astype(xp.float32)
              + xp.float32(weight) * entity_vectors[xp.asarray(rows)].astype(xp.float32))
    norms = xp.linalg.norm(summed, axis=1, keepdims=True)
    return (summed / xp.maximum(norms, xp.float32(1e-12))).astype(xp.float32)
