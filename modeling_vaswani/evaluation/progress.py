"""The scripts' progress bar (not from the paper): tqdm on stderr, only when it is a terminal."""

from __future__ import annotations

import sys
from typing import Callable, TextIO


def count_lines(path) -> int:
    """The number of lines in the file at `path` (a last line without "\\n" counts), read in chunks."""
    lines, last = 0, b"\n"
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")


def progress_bar(total: int | Callable[[], int] | None, description: str = "translating", quiet: bool = False,
                 stream: TextIO | None = None):
    """A tqdm bar counting sentences on `stream` (stderr), or None when `quiet` or `stream` is not a terminal.

    `total` is the number of sentences (None if unknown), or a function that counts them, called only
    when the bar is shown. Use the bar's `update(n)` as the `progress` callable of `translate` and
    `translate_batches`; close it after.
    """
    stream = sys.stderr if stream is None else stream
    if quiet or not _is_terminal(stream):
        return None
    from tqdm import tqdm

    return tqdm(total=total() if callable(total) else total, desc=description, unit=" sentences", file=stream,
                dynamic_ncols=True)


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
