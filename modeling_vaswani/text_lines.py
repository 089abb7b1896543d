"""Reading text one line at a time (not from the paper): for training data and for files to translate alike."""

from __future__ import annotations


def strip_line_end(line: str) -> str:
    """`line` without its "\\n" or "\\r\\n". A lone "\\r", "\\u2028" and the other breaks of `str.splitlines`
    stay inside the line: splitting on them would pair every later line with the wrong translation."""
    if line.endswith("\r\n"):
        return line[:-2]
    return line[:-1] if line.endswith("\n") else line
