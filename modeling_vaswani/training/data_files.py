"""Sentence pairs (§5.1) from files a user gives: aligned text files (line i translates line i) or data files
(json lines, csv, tsv; optionally compressed), shaped as rows ``{"translation": {"en": "...", "de": "..."}}``.

Data files are parsed by `datasets.load_dataset`; when that fails, or a row lacks a sentence, `_locate` reads the
files again with `text_lines.data_lines` to name the file and line at fault.
"""

from __future__ import annotations

import csv
import functools
import itertools
import json
import os
from pathlib import Path
from typing import Iterator, Optional, Sequence, Union

import datasets

from ..cli import one_line
from ..text_lines import COMPRESSION, MAX_LINE_BYTES, DataError, PathLike, data_lines, require_file

AnyDataset = Union[datasets.Dataset, datasets.IterableDataset]

# Table suffix -> how its cells are split; in a .tsv a quotation mark is an ordinary character.
_TABLES = {".csv": dict(delimiter=","), ".tsv": dict(delimiter="\t", quoting=csv.QUOTE_NONE)}
DATA_FILE_FORMATS = (".json", ".jsonl", *_TABLES)  # .json: JSON lines, or (as datasets reads it) one array


def load_data_files(
    paths: Union[PathLike, Sequence[PathLike]], source_lang: str, target_lang: str, streaming: bool = False
) -> AnyDataset:
    """Sentence pairs from json(l), csv or tsv files (optionally compressed; several of one format make a split):
    a ``translation`` column of ``{source_lang: ..., target_lang: ...}`` rows or one column per language."""
    check_language_pair(source_lang, target_lang, choices=None)
    paths = [Path(paths)] if isinstance(paths, (str, os.PathLike)) else [Path(p) for p in paths]
    if not paths:
        raise DataError("No data files were given.")
    formats = {_file_format(path) for path in paths}
    if len(formats) > 1:
        raise DataError(f"The files of one split must share a format; got {', '.join(map(str, paths))}.")
    suffix = formats.pop()
    files = [str(path) for path in paths]
    builder, options = "json", {}
    if suffix in _TABLES:  # checked by the first line, before any row is read
        first_lines = [next(data_lines(path), (1, ""))[1].lstrip("\ufeff") for path in files]
        headers = [next(csv.reader([line], **_TABLES[suffix]), []) for line in first_lines]
        for path, header in zip(files, headers):
            pair_columns(header, path, source_lang, target_lang)
            if header != headers[0]:
                raise DataError(f"{path} has the columns {header}, {files[0]} has {headers[0]}; the files of one "
                                "split must have the same columns.")
        text = datasets.Value("string")  # "2014" and "NA" stay text
        builder, options = "csv", dict(_TABLES[suffix], keep_default_na=False,
                                       features=datasets.Features({column: text for column in headers[0]}))
    found = dict(files=files, suffix=suffix, source_lang=source_lang, target_lang=target_lang)
    name = ", ".join(files)
    locate = functools.partial(_locate_once, found, [])
    if streaming:
        rows = datasets.IterableDataset.from_generator(_streamed_rows, features=options.get("features"),
                                                       gen_kwargs=dict(found, builder=builder, options=options))
        return as_translation_rows(rows, name, source_lang, target_lang, locate=locate)
    try:
        rows = datasets.load_dataset(builder, data_files=files, split="train", **options)
        return as_translation_rows(rows, name, source_lang, target_lang, locate=locate)
    except DataError:
        raise
    except Exception as err:  # pyarrow, pandas, codecs, compression: find the line, else datasets' reason
        raise _failure(err, **found) from None


def _streamed_rows(files, suffix, source_lang, target_lang, builder, options):
    try:
        yield from datasets.load_dataset(builder, data_files=files, split="train", streaming=True, **options)
    except Exception as err:
        raise _failure(err, files, suffix, source_lang, target_lang) from None


def _failure(err: Exception, files, suffix, source_lang, target_lang) -> DataError:
    _locate(files, suffix, source_lang, target_lang)
    if "corresponds to no data" in str(err):  # datasets writes no table for a file without rows
        return DataError(f"{', '.join(files)} holds no sentence pairs.")
    return DataError(f"{', '.join(files)}: cannot be read as a {suffix} data file ({one_line(err.__cause__ or err)}).")


def _locate_once(found: dict, done: list) -> None:
    if not done:
        done.append(True)
        _locate(**found)


def _locate(files, suffix, source_lang, target_lang) -> None:
    for path in files:
        if suffix == ".json" and _is_json_array(path):
            continue  # datasets reads one JSON array as rows: its row number, not a line, names the place
        for number, row in _rows(path, suffix):
            where = f"{path}, line {number}"
            layout = pair_columns(list(row), where, source_lang, target_lang)
            _text_pair(row["translation"] if layout == "translation" else row, where, source_lang, target_lang)


def _is_json_array(path: str) -> bool:
    first = next((line for _, line in data_lines(path) if line.strip()), "")
    return first.lstrip("\ufeff \t").startswith("[")


def _rows(path: str, suffix: str) -> Iterator[tuple[int, dict]]:
    lines = ((number, line.lstrip("\ufeff") if number == 1 else line) for number, line in data_lines(path))
    if suffix not in _TABLES:
        for number, line in lines:
            if line.strip():
                yield number, _json_row(line, f"{path}, line {number}")
        return
    # csv counts the lines it reads (line_num): a quoted cell may hold a line break.
    reader = csv.reader((line + "\n" for _, line in lines), **_TABLES[suffix])
    header = next(reader, [])
    for cells in filter(None, reader):
        if len(cells) != len(header):
            raise DataError(f"{path}, line {reader.line_num}: {len(cells)} cells, the header (line 1) names "
                            f"{len(header)}; in a .tsv a tab inside a sentence splits it.")
        yield reader.line_num, dict(zip(header, cells))


def _json_row(line: str, where: str) -> dict:
    try:
        row = json.loads(line)
    except (ValueError, RecursionError) as err:
        found = f"not a JSON object ({err.msg} at column {err.colno})" if isinstance(err, json.JSONDecodeError) \
            else f"not a JSON object ({type(err).__name__})"
    else:
        if isinstance(row, dict):
            return row
        found = f"a JSON {type(row).__name__}, not an object"
    raise DataError(f"{where}: {found}; a .json or .jsonl data file holds one JSON object per line (JSON lines).")


def _text_pair(pair, where: str, source_lang: str, target_lang: str) -> dict:
    pair = {lang: (pair if isinstance(pair, dict) else {}).get(lang) for lang in (source_lang, target_lang)}
    for lang, text in pair.items():
        if not isinstance(text, str):
            raise DataError(f"{where}: {text!r} for {lang!r}; every row needs both sentences, as text.")
    return pair


def as_translation_rows(dataset: AnyDataset, name: str, source_lang: str, target_lang: str, locate=None) -> AnyDataset:
    """`dataset` as one ``translation`` column, from that column or one per language; anything else is a
    DataError naming `name` and the row (or, by `locate`, the file and line)."""
    first = next(iter(dataset), None)  # a stream whose features are not known yet tells its columns by its first row
    columns = list(dataset.column_names) if dataset.column_names is not None else list(first or {})
    if not columns or first is None:
        raise DataError(f"{name} holds no sentence pairs.")
    layout = pair_columns(columns, name, source_lang, target_lang)
    if layout == "translation":
        missing = [lang for lang in (source_lang, target_lang) if lang not in (first["translation"] or {})]
        if missing:
            raise DataError(f"{name}: the 'translation' rows have no {', '.join(map(repr, missing))} text; their "
                            f"languages are {sorted(first['translation'] or {})}. Pick the languages from those.")
        if locate is None:
            return dataset.select_columns(["translation"])

    def pair_up(batch, indices):
        pairs = batch["translation"] if layout == "translation" else [
            {source_lang: s, target_lang: t} for s, t in zip(batch[source_lang], batch[target_lang])]
        rows = []
        for index, pair in zip(indices, pairs):
            try:
                rows.append(_text_pair(pair, f"{name}, row {index + 1}", source_lang, target_lang))
            except DataError:
                if locate is not None:
                    locate()  # names the file and line instead, where it can
                raise
            if locate is not None and any(not text or len(text) > MAX_LINE_BYTES for text in rows[-1].values()):
                locate()  # a table row short of a cell (pandas fills it with ""), or a line too long
        return {"translation": rows}

    return dataset.map(pair_up, batched=True, with_indices=True, remove_columns=columns)


def pair_columns(columns: Sequence[str], name, source_lang: str, target_lang: str) -> str:
    if "translation" in columns:
        return "translation"
    if source_lang in columns and target_lang in columns:
        return "languages"
    raise DataError(f"{name}: no columns for {source_lang}-{target_lang} pairs; found {list(columns)}, expected a "
                    f"'translation' column of {{'{source_lang}': ..., '{target_lang}': ...}} rows or the two columns "
                    f"'{source_lang}' and '{target_lang}'.")


def check_language_pair(source_lang: str, target_lang: str, choices: Optional[Sequence[str]]) -> None:
    for name, lang in (("source_lang", source_lang), ("target_lang", target_lang)):
        if choices is not None and lang not in choices:
            raise DataError(f"{name}={lang!r} is not available; choose from {', '.join(choices)}.")
    if not source_lang or not target_lang:
        raise DataError("source_lang and target_lang must be non-empty language codes.")
    if source_lang == target_lang:
        raise DataError(f"source_lang and target_lang are both {source_lang!r}; choose two different languages.")


def _file_format(path: Path) -> str:
    if not path.is_file():
        raise DataError(f"Data file not found: {path}. Check the path.")
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSION:
        suffixes.pop()
    if not suffixes or suffixes[-1] not in DATA_FILE_FORMATS:
        raise DataError(f"{path}: not a data file this package reads; give a {', '.join(DATA_FILE_FORMATS)} "
                        "file (optionally compressed), or plain text with --train_source/--train_target.")
    return suffixes[-1]


def load_parallel_files(source_file: PathLike, target_file: PathLike, source_lang: str, target_lang: str,
                        streaming: bool = False) -> AnyDataset:
    """Line i of `source_file` paired with line i of `target_file`; `streaming`: both read in step as training goes."""
    check_language_pair(source_lang, target_lang, choices=None)
    require_file(source_file)
    require_file(target_file)
    files = dict(source_file=str(source_file), target_file=str(target_file), source_lang=source_lang,
                 target_lang=target_lang)
    if streaming:
        return datasets.IterableDataset.from_generator(_parallel_lines, gen_kwargs=files)
    rows = [row["translation"] for row in _parallel_lines(**files)]
    if not rows:
        raise DataError(f"Empty corpus: {source_file} (and {target_file}) contain no lines.")
    return datasets.Dataset.from_dict({"translation": rows})


def _parallel_lines(source_file: str, target_file: str, source_lang: str, target_lang: str):
    pairs = itertools.zip_longest(data_lines(source_file), data_lines(target_file), fillvalue=(None, None))
    for line_number, ((_, source), (_, target)) in enumerate(pairs, start=1):
        if source is None or target is None:
            shorter, longer = (source_file, target_file) if source is None else (target_file, source_file)
            raise DataError(f"Parallel files have different line counts: {shorter} ends at line {line_number - 1}, "
                            f"{longer} goes on. Line i of one must translate line i of the other.")
        yield {"translation": {source_lang: source, target_lang: target}}
