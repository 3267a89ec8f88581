"""The settings table of docs/settings.md is the one the code generates (`tigrag settings --markdown`)."""

from pathlib import Path

from gpu_tigrag.config import describe_settings, settings_markdown

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_settings_table_in_the_docs_is_current():
    text = (DOCS / "settings.md").read_text()
    table = text[text.index("<!-- settings:begin -->"):text.index("<!-- settings:end -->")]
    assert settings_markdown() in table, ("docs/settings.md is stale: regenerate the part between the settings "
                                         "markers with `tigrag settings --markdown`")


def test_every_setting_has_help():
    rows = [row for side in describe_settings().values() for row in side]
    assert len(rows) > 80 and not [row.path for row in rows if not row.help.strip()]
    assert {"tigrag.ppr.damping", "spectrag.alpha", "litesemrag.level_weights", "spectrag.weights"} <= {r.path for r in rows}
