"""Reading text one line at a time (not from the paper): for training data and for files to translate
alike.
"""

from __future__ import annotations


def strip_line_end(line: str) -> str:
    """`line` without its terminator, "\\n" or "\\r\\n" (a line without one is returned as it is).

    Lines end at "\\n" only. A lone "\\r", a form feed, "\\u2028" and the other characters that
    `str.splitlines` (and Python's text mode) also treat as line breaks stay inside the line:
    splitting on them would add lines, and every later line would then be paired with the wrong
    translation.
    """
    if line.endswith("\r\n"):
        return line[:-2]
    return line[:-1] if line.endswith("\n") else line
