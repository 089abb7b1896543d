"""Training data from data files (§5.1's sentence pairs as JSON lines, csv or tsv).

json(l), csv or tsv files (optionally .gz, .bz2 or .xz), whose rows are either a ``translation``
column of ``{source_lang: ..., target_lang: ...}`` or one column per language code. A csv/tsv file
is checked by its first line before any row is read, so a file without the right columns is
refused at once, in one line that names what it found.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Optional, Sequence, Union

import datasets

from .data_lines import COMPRESSION, data_lines
from .pair_rows import AnyDataset, DataError, as_translation_rows, check_language_pair, pair_columns

PathLike = Union[str, os.PathLike]

# Data file suffix -> how its lines are read. A .json file is read as JSON lines, one object per line
# (a file read line by line keeps memory bounded); in a .tsv a quotation mark is an ordinary character:
# sentences are full of them. Every cell is text (a sentence "2014" stays a string, an empty one "").
_TABLES = {".csv": dict(delimiter=","), ".tsv": dict(delimiter="\t", quoting=csv.QUOTE_NONE)}
DATA_FILE_FORMATS = (".json", ".jsonl", *_TABLES)


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
    ``streaming=True`` returns a ``datasets.IterableDataset`` read as it is used. Every file is read
    through data_lines.py, and every row checked as it is read: a bad one is a DataError naming the
    file and the line.
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
    if suffix in _TABLES:
        columns = None
        for path in paths:
            header = next(_rows(path, suffix, header_only=True), (1, []))[1]
            pair_columns(header, path, source_lang, target_lang)
            if columns is not None and header != columns:
                raise DataError(f"{path} has the columns {header}, {paths[0]} has {columns}; the files of one "
                                "split must have the same columns.")
            columns = header
    text = datasets.Value("string")
    features = datasets.Features({"translation": {source_lang: text, target_lang: text}})
    kwargs = dict(paths=[str(p) for p in paths], suffix=suffix, source_lang=source_lang, target_lang=target_lang)
    if streaming:
        loaded = datasets.IterableDataset.from_generator(_pairs, features=features, gen_kwargs=kwargs)
    else:
        # Each file's size and time join the cache key: a file changed in place is read again.
        stamps = [(os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in paths]
        try:
            loaded = datasets.Dataset.from_generator(_pairs, features=features, gen_kwargs=dict(kwargs, stamps=stamps),
                                                     cache_dir=None if cache_dir is None else str(cache_dir))
        except datasets.exceptions.DatasetGenerationError as err:
            if isinstance(err.__cause__, DataError):
                raise err.__cause__ from None
            raise
        except ValueError as err:
            if "corresponds to no data" not in str(err):  # no row at all: datasets writes no table
                raise
            raise DataError(f"{', '.join(map(str, paths))} holds no sentence pairs.") from None
    # A stream is first read here, for its first row: a file broken at its start is refused now.
    return as_translation_rows(loaded, ", ".join(map(str, paths)), source_lang, target_lang)


def _pairs(paths, suffix, source_lang, target_lang, stamps=None):
    """{"translation": {source_lang: ..., target_lang: ...}} for each row of the files, checked as it is read."""
    for path in paths:
        for line_number, row in _rows(path, suffix):
            yield {"translation": _pair(row, f"{path}, line {line_number}", source_lang, target_lang)}


def _rows(path, suffix, header_only=False):
    """(line number, row) for each row of a data file: a dict of column -> value. Blank lines hold no row."""
    lines = ((number, line.lstrip("\ufeff") if number == 1 else line) for number, line in data_lines(path))
    if suffix not in _TABLES:
        for number, line in lines:
            if line.strip():
                yield number, _json_row(line, f"{path}, line {number}")
        return
    # csv counts the lines it reads (line_num): a quoted cell may hold a line break (not in a .tsv).
    reader = csv.reader((line + "\n" for _, line in lines), **_TABLES[suffix])
    header = next(reader, [])
    if header_only:
        yield 1, header
        return
    for cells in reader:
        if not cells:
            continue
        if len(cells) != len(header):
            raise DataError(f"{path}, line {reader.line_num}: {len(cells)} cells, the header (line 1) names "
                            f"{len(header)}; in a .tsv a tab inside a sentence splits it.")
        yield reader.line_num, dict(zip(header, cells))


def _json_row(line: str, where: str) -> dict:
    try:
        row = json.loads(line)
    except (ValueError, RecursionError) as err:
        reason = f"{err.msg} at column {err.colno}" if isinstance(err, json.JSONDecodeError) else type(err).__name__
        raise DataError(f"{where}: not a JSON object ({reason}); a .json or .jsonl data file holds one JSON object "
                        "per line (JSON lines).") from None
    if not isinstance(row, dict):
        raise DataError(f"{where}: a JSON {type(row).__name__}, not an object; a .json or .jsonl data file holds "
                        "one JSON object per line (JSON lines).")
    return row


def _pair(row: dict, where: str, source_lang: str, target_lang: str) -> dict:
    """The row's two sentences; a row without both, as text, is a DataError naming `where`."""
    pair = row
    if pair_columns(list(row), where, source_lang, target_lang) == "translation":
        pair = row["translation"] if isinstance(row["translation"], dict) else {}
        missing = [lang for lang in (source_lang, target_lang) if lang not in pair]
        if missing:
            raise DataError(f"{where}: the 'translation' row has no {', '.join(map(repr, missing))} text; its "
                            f"languages are {sorted(pair)}. Pick the languages from those.")
    for lang in (source_lang, target_lang):
        if not isinstance(pair[lang], str):
            raise DataError(f"{where}: {pair[lang]!r} for {lang!r}; every row needs both sentences, as text.")
    return {source_lang: pair[source_lang], target_lang: pair[target_lang]}


def _file_format(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSION:
        suffixes.pop()
    if not suffixes or suffixes[-1] not in DATA_FILE_FORMATS:
        raise DataError(f"{path}: not a data file this package reads; give a {', '.join(DATA_FILE_FORMATS)} "
                        "file (optionally compressed), or plain text with --train_source/--train_target.")
    return suffixes[-1]
