"""Tests for modeling_vaswani.training.data_lines: every door that reads a data file streams it through
one reader, and a cut-short archive, a line too long or a malformed row is a DataError (a ValueError)
naming the file and the line."""

import bz2
import gzip
import io
import json
import lzma
import re

import pytest

from modeling_vaswani.training.data import iter_lines, load_parallel_files, load_translation_dataset, read_lines
from modeling_vaswani.training.data_files import load_data_files
from modeling_vaswani.training.data_files import MAX_LINE_BYTES, data_lines
from modeling_vaswani.training.data_files import DataError, as_translation_rows

COMPRESSORS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}


@pytest.fixture(autouse=True)
def datasets_cache(tmp_path, monkeypatch):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")


def text_lines(n):
    return [f"sentence {i} " + "x" * (i % 50) for i in range(n)]


# door -> (file name, the file's lines from a list of sentences, how the door reads the file at `path`)
DOORS = {
    "read_lines": ("s.en", lambda lines: lines, lambda path: read_lines(path)),
    "load_parallel_files": ("s.en", lambda lines: lines,
                            lambda path: load_parallel_files(path, path, "en", "de")),
    "train_files-streaming": ("s.en", lambda lines: lines, lambda path: list(load_translation_dataset(
        "en", "de", train_files=(path, path), validation_files=(path, path), streaming=True)["train"])),
    "jsonl": ("p.jsonl", lambda lines: [json.dumps({"en": s, "de": s}) for s in lines],
              lambda path: load_data_files(path, "en", "de")),
    "jsonl-streaming": ("p.jsonl", lambda lines: [json.dumps({"translation": {"en": s, "de": s}}) for s in lines],
                        lambda path: list(load_data_files(path, "en", "de", streaming=True))),
    "tsv": ("p.tsv", lambda lines: ["en\tde"] + [f"{s}\t{s}" for s in lines],
            lambda path: load_data_files(path, "en", "de")),
    "csv-streaming": ("p.csv", lambda lines: ["en,de"] + [f"{s},{s}" for s in lines],
                      lambda path: list(load_data_files(path, "en", "de", streaming=True))),
}


def write(path, lines, compress=None):
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    path.write_bytes(COMPRESSORS[compress](data) if compress else data)
    return path


def assert_file_and_line(error, path, line=None):
    message = str(error.value)
    assert "\n" not in message
    assert re.search(re.escape(str(path)) + r", line " + (str(line) if line else r"\d+"), message), message


@pytest.mark.parametrize("door", list(DOORS))
@pytest.mark.parametrize("suffix", list(COMPRESSORS))
def test_a_cut_short_archive_names_file_and_line(tmp_path, door, suffix):
    name, layout, read = DOORS[door]
    path = write(tmp_path / (name + suffix), layout(text_lines(5000)), compress=suffix)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(DataError) as error:
        read(path)
    assert_file_and_line(error, path)


@pytest.mark.parametrize("door", list(DOORS))
def test_a_line_too_long_names_file_and_line(tmp_path, door):
    name, layout, read = DOORS[door]
    lines = layout(["a", "x" * (MAX_LINE_BYTES + 1), "b"])
    path = write(tmp_path / (name + ".gz"), lines, compress=".gz")
    with pytest.raises(DataError) as error:
        read(path)
    assert_file_and_line(error, path, lines.index(next(l for l in lines if len(l) > MAX_LINE_BYTES)) + 1)


def test_a_line_as_long_as_allowed_is_read(tmp_path):
    path = write(tmp_path / "s.en", ["a", "x" * MAX_LINE_BYTES])
    assert read_lines(path) == ["a", "x" * MAX_LINE_BYTES]


def test_translation_input_goes_through_the_same_reader():
    with pytest.raises(DataError) as error:
        list(iter_lines(io.BytesIO(b"a\n" + b"x" * (MAX_LINE_BYTES + 1) + b"\n"), "news.en"))
    assert_file_and_line(error, "news.en", 2)


# Malformed rows at line 3 of a data file: (file name, its lines, the words the message holds besides file and line)
BAD_ROWS = {
    "jsonl-no-language": ("p.jsonl", ['{"en": "a", "de": "b"}', '{"en": "c", "de": "d"}', '{"en": "e"}'], ["'de'"]),
    "jsonl-translation-no-language": ("p.jsonl", ['{"translation": {"en": "a", "de": "b"}}', "",
                                                  '{"translation": {"en": "e"}}'], ["'de'"]),
    "jsonl-null": ("p.jsonl", ['{"en": "a", "de": "b"}', '{"en": "c", "de": "d"}', '{"en": "e", "de": null}'],
                   ["'de'", "None"]),
    "jsonl-broken": ("p.jsonl", ['{"en": "a", "de": "b"}', '{"en": "c", "de": "d"}', '{"en": "e", "de": '], []),
    "json-array": ("p.json", ['{"en": "a", "de": "b"}', '{"en": "c", "de": "d"}', '["e", "f"]'], ["list"]),
    "csv-cells": ("p.csv", ["en,de", "a,b", "c,d,e"], ["3 cells"]),
    "tsv-cells": ("p.tsv.gz", ["en\tde", "a\tb", "c"], ["1 cells"]),
}


@pytest.mark.parametrize("streaming", [False, True], ids=["dataset", "stream"])
@pytest.mark.parametrize("case", list(BAD_ROWS))
def test_a_malformed_row_names_file_and_line(tmp_path, case, streaming):
    name, lines, words = BAD_ROWS[case]
    path = write(tmp_path / name, lines, compress=".gz" if name.endswith(".gz") else None)
    with pytest.raises(ValueError) as error:
        list(load_data_files(path, "en", "de", streaming=streaming))
    assert isinstance(error.value, DataError)
    assert_file_and_line(error, path, 3)
    for word in words:
        assert word in str(error.value)


def test_a_file_changed_in_place_is_read_again(tmp_path):
    path = write(tmp_path / "p.jsonl", ['{"en": "a", "de": "b"}'])
    assert load_data_files(path, "en", "de")[0]["translation"] == {"en": "a", "de": "b"}
    write(path, ['{"en": "c", "de": "d"}', '{"en": "e", "de": "f"}'])
    assert [row["translation"]["en"] for row in load_data_files(path, "en", "de")] == ["c", "e"]


@pytest.mark.parametrize("streaming", [False, True], ids=["dataset", "stream"])
def test_a_hub_row_without_a_language_names_the_dataset_and_row(streaming):
    import datasets

    rows = datasets.Dataset.from_dict({"en": ["a", "b", "c"], "de": ["x", "y", None]})
    with pytest.raises(DataError) as error:
        list(as_translation_rows(rows.to_iterable_dataset() if streaming else rows, "wmt14", "en", "de"))
    assert "wmt14, row 3" in str(error.value) and "'de'" in str(error.value)


@pytest.mark.parametrize("where", ["missing.en.gz", "."], ids=["missing", "folder"])
def test_a_path_that_cannot_be_opened_is_named(tmp_path, where):
    path = tmp_path / where
    with pytest.raises(DataError) as error:
        list(data_lines(path))
    assert str(path) in str(error.value)
