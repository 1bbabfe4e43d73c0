r"""Conversation text quoted as data, for every note the library writes.

The summary prompt and the notes the guard puts in a user-role message (the
digest of trimmed turns, its pointers to archived results) quote conversation
text the same way, so that nothing a tool or a prompt injection wrote can forge
their structure. The text is first normalised as a model might read it (NFKC
folds the fullwidth U+FF1C and U+FF3B into ``<`` and ``[``; invisible format
characters such as U+200B-U+200D, U+2060 and U+FEFF are dropped; every kind of
line break becomes ``\n``), then escaped: a look-alike of a data-section or role
tag loses its ``<`` (``&lt;``), and a line that starts with a bracket is quoted
with ``\``, so the only lines that start with ``[`` are the headers the library
writes (``[user]``, ``[Context note ...]``).
"""

from __future__ import annotations

import re
import unicodedata

_LESS_THAN = "<\u2039\u2329\u27e8\u276e\u3008\u02c2\u1438"
"""``<`` and the angle brackets NFKC leaves alone (U+2039, U+27E8, U+3008, ...)."""
DELIMITER = re.compile(
    rf"[{_LESS_THAN}](?=\s*/?\s*(?:conversation|previous_summary|earlier_calls"
    r"|user|assistant|system|developer|human|ai|tool|function|message)(?![\w-])"
    r"|\|)",
    re.IGNORECASE,
)
"""The start of anything a model could read as a data-section or role tag.

Any case, any spacing, opening or closing: ``</Conversation >``, ``< /USER>``,
``<|im_start|>``, ``</earlier_calls>``.
"""
_BREAKS = re.compile(r"\r\n?|[\v\f\x1c-\x1e\x85\u2028\u2029]")
_OPENERS = frozenset("[\u2045\u2e22\u3010\u3014\u3016\u3018\u301a\u27e6\u27ec")
"""Brackets a role header could be written with: ``[`` and U+3010, U+27E6, ..."""
_QUOTED = _OPENERS | {"\\"}


def normalize(text: str) -> str:
    """``text`` as a model reads it: NFKC, no format characters, one line break."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return _BREAKS.sub("\n", text)


def escape_delimiters(text: str) -> str:
    """``text`` with every look-alike of a data-section tag defused (``&lt;``)."""
    return DELIMITER.sub("&lt;", text)


def quote(text: str) -> str:
    r"""Message text that cannot forge a role header or a data-section tag.

    Normalised, tags defused, and a ``\\`` put before the bracket (or
    backslash) that starts a line, after its blanks.
    """
    lines = escape_delimiters(normalize(text)).split("\n")
    return "\n".join(_quote_line(line) for line in lines)


def _quote_line(line: str) -> str:
    body = line.lstrip()
    if body[:1] not in _QUOTED:
        return line
    return f"{line[: len(line) - len(body)]}\\{body}"
