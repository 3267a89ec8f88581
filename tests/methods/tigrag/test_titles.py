"""Title linking: normalisation, leftmost-longest mentions, the capital-letter and stopword rules."""

import numpy as np

from gpu_tigrag.text.titles import TitleIndex, normalise_title

TITLES = ["The Glass Orchard", "Glass", "Mirela Vantz", "Lloyd (film)", "Lloyd", "Mother (film)",
          "Aschenbrödel", "The", "Johnnycake, West Virginia", "Korvath (town)", "Korvath (band)"]


def test_normalisation_folds_accents_case_and_punctuation():
    assert normalise_title("Aschenbrödel") == "aschenbrodel"
    assert normalise_title("Johnnycake, West Virginia") == "johnnycake west virginia"
    assert normalise_title("Interview With A Hitman") == normalise_title("Interview with a Hitman")


def test_mentions_are_leftmost_longest_in_reading_order():
    titles = TitleIndex(TITLES)
    found = titles.mentions("Did Mirela Vantz direct The Glass Orchard or Aschenbrodel?")
    assert [TITLES[p] for p in found] == ["Mirela Vantz", "The Glass Orchard", "Aschenbrödel"]  # not "Glass"
    assert [TITLES[p] for p in titles.mentions("a county near Johnnycake, West Virginia")] == ["Johnnycake, West Virginia"]


def test_mentions_need_a_capital_and_a_content_word():
    titles = TitleIndex(TITLES)
    assert titles.mentions("Who is the mother of the director?") == []  # "Mother (film)" needs a capital
    assert titles.mentions("The film was long") == []  # "The" is a stopword-only title
    assert [TITLES[p] for p in titles.mentions("Her Mother was born in 1950")] == ["Mother (film)"]


def test_full_title_wins_over_bare_name_and_ambiguous_bare_names_link_all():
    titles = TitleIndex(TITLES)
    assert [TITLES[p] for p in titles.lookup("Lloyd")] == ["Lloyd"]  # not "Lloyd (film)"
    assert sorted(TITLES[p] for p in titles.lookup("korvath")) == ["Korvath (band)", "Korvath (town)"]
    assert titles.lookup("Nobody Here").dtype == np.int64 and titles.lookup("Nobody Here").size == 0


def test_lookup_drops_a_leading_article_only_when_the_whole_name_is_no_title():
    titles = TitleIndex(TITLES + ["Selvan Sea"])
    assert [(TITLES + ["Selvan Sea"])[p] for p in titles.lookup("the Selvan Sea")] == ["Selvan Sea"]
    assert [TITLES[p] for p in titles.lookup("The Glass Orchard")] == ["The Glass Orchard"]  # not "Glass Orchard"
    assert titles.lookup("the").size == 0
