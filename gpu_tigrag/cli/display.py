"""Text from a corpus or a query as the command line prints it: one line per field, every control
character escaped, so that a title holding a newline cannot forge a result line and one holding a
terminal escape sequence cannot drive the terminal."""

from __future__ import annotations

import re

#: C0 and C1 control characters, DEL, and the Unicode line and paragraph separators
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: the line breaks (and tabs) that `one_line(..., breaks=" ")` turns into the given text instead
_BREAKS = re.compile("\r\n|[\n\r\t\v\f\x85\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def one_line(text: str, breaks: str | None = None) -> str:
    """`text` on one line: each control character written as its escape (`\\n`, `\\x1b`, `\\u2028`);
    with `breaks`, line breaks and tabs become `breaks` instead (a chunk's text read as prose)."""
    if breaks is not None:
        text = _BREAKS.sub(breaks, text)
    return _CONTROL.sub(_escape, text)
