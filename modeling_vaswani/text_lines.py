"""Reading text one line at a time (not from the paper): training data, files to translate and references alike.

`data_lines` is the package's one way to read a text file: UTF-8, decompressed as it is read, lines ending at
"\\n" only and no longer than `MAX_LINE_BYTES` (memory stays bounded); a line it cannot read is a one-line
`DataError` naming the file and line.
"""

from __future__ import annotations

import bz2
import gzip
import itertools
import lzma
import os
import zlib
from pathlib import Path
from typing import BinaryIO, Iterator, Union

from .cli import one_line

PathLike = Union[str, os.PathLike]

# A sentence pair takes a few hundred bytes; a mebibyte on one line is a file without line breaks.
MAX_LINE_BYTES = 2**20
COMPRESSION = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_BROKEN = (OSError, EOFError, lzma.LZMAError, zlib.error)  # what a cut-short or corrupt archive raises


class DataError(ValueError):
    """A problem with the data that the user can fix (missing file, bad encoding, ...)."""


def strip_line_end(line: str) -> str:
    """`line` without its "\\n" or "\\r\\n". A lone "\\r", "\\u2028" and the other breaks of `str.splitlines`
    stay inside the line: splitting on them would pair every later line with the wrong translation."""
    if line.endswith("\r\n"):
        return line[:-2]
    return line[:-1] if line.endswith("\n") else line


def data_lines(path: PathLike) -> Iterator[tuple[int, str]]:
    """(line number from 1, line without its terminator) for each line of the file at `path`."""
    name = os.fspath(path)
    try:
        handle = COMPRESSION.get(os.path.splitext(name)[1].lower(), open)(name, "rb")
    except OSError as err:  # not there, a folder, not readable
        raise DataError(f"Could not open the data file {name}: {err.strerror or err}. Check the path.") from None
    with handle:
        yield from numbered_lines(handle, name)


def numbered_lines(handle: BinaryIO, name: str) -> Iterator[tuple[int, str]]:
    for number in itertools.count(1):
        try:
            raw = handle.readline(MAX_LINE_BYTES + 1)
        except _BROKEN as err:
            raise DataError(f"{name}, line {number}: the file cannot be read from here on ({one_line(err)}); a "
                            "compressed file may be cut short: copy or download it again.") from None
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            raise DataError(f"{name}, line {number}: longer than {MAX_LINE_BYTES} bytes; a data file holds one "
                            "sentence (or one row) per line.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(f"{name}, line {number}: not valid UTF-8 ({err.reason} at byte {err.start}). Re-encode "
                            "the file as UTF-8.") from None
        yield number, strip_line_end(text)


def iter_lines(handle: BinaryIO, name: str) -> Iterator[str]:
    """The lines of a binary file object (``sys.stdin.buffer``, say), read as `data_lines` reads a file."""
    return (line for _, line in numbered_lines(handle, name))


def require_file(path: PathLike) -> None:
    if not Path(path).is_file():
        raise DataError(f"Data file not found: {path}. Check the path (or set VASWANI_DATA_DIR).")


def read_lines(path: PathLike) -> list[str]:
    """A UTF-8 text file, plain or compressed, one item per line; only "\\n" or "\\r\\n" is removed."""
    require_file(path)
    return [line for _, line in data_lines(path)]
