"""Opening a data file (not from the paper): the one way the package reads training, validation and
evaluation text.

A file is read as a stream of UTF-8 lines, decompressed as it is read when it ends in .gz, .bz2 or
.xz, and no line longer than `MAX_LINE_BYTES`: memory stays bounded whatever the file holds. A line
that is not UTF-8 or too long, and a compressed file that is cut short or corrupt, is a one-line
DataError naming the file and the line number.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import zlib
from typing import BinaryIO, Iterator, Union

from ..text_lines import strip_line_end
from .pair_rows import DataError

# A sentence pair takes a few hundred bytes; a line of a mebibyte is no sentence but a file without
# line breaks (or the wrong file), and reading it whole could take any amount of memory.
MAX_LINE_BYTES = 2**20
COMPRESSION = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
# What a cut-short or corrupt archive raises while it is read.
_BROKEN = (OSError, EOFError, lzma.LZMAError, zlib.error)


def data_lines(path: Union[str, os.PathLike]) -> Iterator[tuple[int, str]]:
    """(line number, line without its terminator) for each line of the file at `path`, from 1."""
    name = os.fspath(path)
    opener = COMPRESSION.get(os.path.splitext(name)[1].lower(), open)
    try:
        handle = opener(name, "rb")
    except OSError as err:  # not there, a folder, not readable
        raise DataError(f"Could not open the data file {name}: {err.strerror or err}. Check the path.") from None
    with handle:
        yield from numbered_lines(handle, name)


def numbered_lines(handle: BinaryIO, name: str) -> Iterator[tuple[int, str]]:
    """`data_lines` of a binary file object already open (a file opened with "rb", ``sys.stdin.buffer``)."""
    line_number = 0
    while True:
        line_number += 1
        try:
            raw = handle.readline(MAX_LINE_BYTES + 1)
        except _BROKEN as err:
            reason = " ".join(str(err).split()) or type(err).__name__
            raise DataError(f"{name}, line {line_number}: the file cannot be read from here on ({reason}); "
                            "a compressed file may be cut short: copy or download it again.") from None
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            raise DataError(f"{name}, line {line_number}: longer than {MAX_LINE_BYTES} bytes; a data file holds "
                            "one sentence (or one row) per line.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(f"{name}, line {line_number}: not valid UTF-8 ({err.reason} at byte {err.start}). "
                            "Re-encode the file as UTF-8.") from None
        yield line_number, strip_line_end(text)
