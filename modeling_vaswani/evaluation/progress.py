"""The scripts' progress bar (not from the paper): tqdm on stderr, only when it is a terminal."""

from __future__ import annotations

import sys
from typing import Callable, TextIO


def count_lines(path) -> int:
    """The number of lines in the file at `path` (a last line without "\\n" counts)."""
    with open(path, "rb") as handle:  # binary: only b"\n" ends a line, as when translating
        return sum(1 for _ in handle)


def progress_bar(total: int | Callable[[], int] | None, description: str = "translating", quiet: bool = False,
                 stream: TextIO | None = None):
    """A tqdm bar counting sentences on `stream` (stderr), or None when `quiet` or `stream` is not a terminal;
    `total` may be a function, called only when the bar is shown. Its `update` is `translate`'s `progress`."""
    stream = sys.stderr if stream is None else stream
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        terminal = False
    if quiet or not terminal:
        return None
    from tqdm import tqdm

    return tqdm(total=total() if callable(total) else total, desc=description, unit=" sentences", file=stream,
                dynamic_ncols=True)

