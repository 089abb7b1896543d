"""Training data from data files (§5.1's sentence pairs, in the formats `datasets` reads).

json, jsonl, csv or tsv files (optionally .gz, .bz2 or .xz), whose rows are either a ``translation``
column of ``{source_lang: ..., target_lang: ...}`` or one column per language code. A csv/tsv file
is checked by its first line before `datasets` reads it, so a file without the right columns is
refused at once, in one line that names what it found.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import lzma
import os
from pathlib import Path
from typing import Optional, Sequence, Union

import datasets

from .pair_rows import AnyDataset, DataError, as_translation_rows, check_language_pair, pair_columns

PathLike = Union[str, os.PathLike]

# Data file suffix -> the `datasets` builder that reads it and its settings. Every column is read
# as text (a sentence "2014" stays a string), an empty cell is "" rather than NaN, and in a .tsv a
# quotation mark is an ordinary character: sentences are full of them.
_TABLE = dict(na_filter=False)
DATA_FILE_FORMATS = {
    ".json": ("json", {}),
    ".jsonl": ("json", {}),
    ".csv": ("csv", dict(_TABLE, delimiter=",")),
    ".tsv": ("csv", dict(_TABLE, delimiter="\t", quoting=csv.QUOTE_NONE)),
}
# Compressed data files, known (to `datasets` too) by their last suffix.
_COMPRESSION = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def load_data_files(
    paths: Union[PathLike, Sequence[PathLike]],
    source_lang: str,
    target_lang: str,
    streaming: bool = False,
    cache_dir: Optional[PathLike] = None,
) -> AnyDataset:
    """Sentence pairs from json, jsonl, csv or tsv files (optionally .gz, .bz2 or .xz), as ``translation`` rows.

    A file holds either a ``translation`` column of ``{source_lang: ..., target_lang: ...}`` rows
    (as Hub translation datasets) or one column per language, named by its code; a .csv or .tsv
    file names its columns in its first line. Several files (all of one format) make one split.
    ``streaming=True`` returns a ``datasets.IterableDataset`` read as it is used.
    """
    check_language_pair(source_lang, target_lang, choices=None)
    paths = [Path(paths)] if isinstance(paths, (str, os.PathLike)) else [Path(p) for p in paths]
    if not paths:
        raise DataError("No data files were given.")
    formats = set()
    for path in paths:
        if not path.is_file():
            raise DataError(f"Data file not found: {path}. Check the path.")
        formats.add(_file_format(path))
    if len(formats) > 1:
        raise DataError(f"The files of one split must share a format; got {', '.join(map(str, paths))}.")
    suffix = formats.pop()
    builder, settings = DATA_FILE_FORMATS[suffix]
    if builder == "csv":
        columns = None
        for path in paths:
            header = _table_header(path, settings)
            pair_columns(header, path, source_lang, target_lang)
            if columns is not None and header != columns:
                raise DataError(f"{path} has the columns {header}, {paths[0]} has {columns}; the files of one "
                                "split must have the same columns.")
            columns = header
        # Every column as text, so that pandas guesses no numbers.
        settings = dict(settings, features=datasets.Features({name: datasets.Value("string") for name in columns}))
    try:
        loaded = datasets.load_dataset(builder, data_files=[str(p) for p in paths], split="train",
                                       streaming=streaming, cache_dir=None if cache_dir is None else str(cache_dir),
                                       **settings)
        # A stream is first read here, for its columns: its format errors show up now too.
        return as_translation_rows(loaded, ", ".join(map(str, paths)), source_lang, target_lang)
    except DataError:
        raise
    except (datasets.exceptions.DatasetGenerationError, ValueError, OSError) as err:
        reason = _innermost(err)
        if "corresponds to no data" in reason:  # a table of column names alone
            raise DataError(f"{', '.join(map(str, paths))} holds no sentence pairs.") from None
        raise DataError(f"Could not read {', '.join(map(str, paths))} as {suffix.lstrip('.')}: {reason}") from None


def _file_format(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSION:
        suffixes.pop()
    if not suffixes or suffixes[-1] not in DATA_FILE_FORMATS:
        raise DataError(f"{path}: not a data file this package reads; give a {', '.join(DATA_FILE_FORMATS)} "
                        "file (optionally compressed), or plain text with --train_source/--train_target.")
    return suffixes[-1]


def _table_header(path: Path, settings: dict) -> list[str]:
    """The column names in the first line of a csv/tsv file (compressed or not)."""
    opener = _COMPRESSION.get(path.suffix.lower(), open)
    try:
        with opener(path, "rb") as handle:
            first = handle.readline().decode("utf-8-sig")
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise DataError(f"Could not read the first line of {path}: {err}") from None
    quoting = settings.get("quoting", csv.QUOTE_MINIMAL)
    return next(csv.reader(io.StringIO(first), delimiter=settings["delimiter"], quoting=quoting), [])


def _innermost(err: BaseException) -> str:
    while err.__cause__ is not None or err.__context__ is not None:
        err = err.__cause__ or err.__context__
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
