"""training.data_files: json, jsonl, csv and tsv files as translation rows, and text_lines, the one line reader every
door goes through; a bad file is a one-line DataError naming the file and the line."""

import io
import json
import re

import datasets
import pytest

from checks import assert_names
from modeling_vaswani.text_lines import MAX_LINE_BYTES, DataError, data_lines, iter_lines, read_lines
from modeling_vaswani.training.data import load_translation_dataset
from modeling_vaswani.training.data_files import as_translation_rows, load_data_files
from tiny_data import COMPRESSORS, write_lines as write

PAIRS = [{"en": 'He said "hi", then left.', "de": 'Er sagte "hallo" und ging.'},
         {"en": "2014", "de": "1.50"},  # numbers stay text
         {"en": "NA", "de": "null"}]  # and so do pandas' missing-value words


@pytest.fixture(autouse=True)
def datasets_cache(tmp_path, monkeypatch):  # map-style loads write their Arrow cache under tmp_path
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")


def as_lines(name, rows, layout="languages"):
    if ".json" in name:
        return [json.dumps({"translation": r} if layout == "translation" else r, ensure_ascii=False) for r in rows]
    if ".tsv" in name:
        return ["en\tde"] + [f"{r['en']}\t{r['de']}" for r in rows]
    quote = lambda text: '"' + text.replace('"', '""') + '"'  # noqa: E731
    return ["en,de"] + [f"{quote(r['en'])},{quote(r['de'])}" for r in rows]


@pytest.mark.parametrize("name", ["p.jsonl", "p.json", "p.csv", "p.tsv", "p.tsv.gz", "p.jsonl.bz2"])
@pytest.mark.parametrize("streaming", [False, True])
def test_data_files_load_as_translation_rows(tmp_path, name, streaming):
    loaded = load_data_files(write(tmp_path / name, as_lines(name, PAIRS)), "en", "de", streaming=streaming)
    assert isinstance(loaded, datasets.IterableDataset if streaming else datasets.Dataset)
    assert [row["translation"] for row in loaded] == PAIRS


def test_a_translation_column_and_several_files(tmp_path):  # only training streams: test_data.py
    first = write(tmp_path / "a.jsonl", as_lines("a.jsonl", PAIRS[:2], layout="translation"))
    second = write(tmp_path / "b.jsonl", as_lines("b.jsonl", PAIRS[2:], layout="translation"))
    loaded = load_data_files([first, second], "de", "en")
    assert loaded.column_names == ["translation"] and [row["translation"] for row in loaded] == PAIRS
    with pytest.raises(DataError) as error:
        load_data_files(first, "en", "fr")
    assert_names(error, "'fr'", "['de', 'en']")


@pytest.mark.parametrize("name", ["bad.csv", "bad.jsonl", "bad.tsv"])
@pytest.mark.parametrize("streaming", [False, True])
def test_a_missing_column_names_the_file_the_columns_found_and_expected(tmp_path, name, streaming):
    sep = "\t" if name.endswith(".tsv") else ","
    lines = ['{"source": "a", "de": "b"}'] if name.endswith(".jsonl") else [f"source{sep}de", f"a{sep}b"]
    path = write(tmp_path / name, lines)
    with pytest.raises(DataError) as err:
        load_data_files(path, "en", "de", streaming=streaming)
    assert "\n" not in str(err.value) and str(err.value).startswith(str(path))
    assert_names(err, "found ['source', 'de']", "'translation' column", "'en' and 'de'")


@pytest.mark.parametrize("files,words", [
    (["pairs.txt"], ["pairs.txt", ".json, .jsonl, .csv, .tsv"]),
    (["a.csv", "a.jsonl"], ["share a format"]),
    (["a.csv", "other.csv"], ["same columns"]),
    (["empty.csv"], ["no sentence pairs"]),
    (["nope.jsonl"], ["not found", "nope.jsonl"]),
])
def test_files_that_make_no_split(tmp_path, files, words):
    contents = {"other.csv": ["de,en,id", "x,y,1"], "empty.csv": ["en,de"]}
    paths = [tmp_path / name if name == "nope.jsonl" else
             write(tmp_path / name, contents.get(name) or as_lines(name, PAIRS)) for name in files]
    with pytest.raises(DataError) as error:
        load_data_files(paths, "en", "de")
    assert_names(error, *words)


# door -> (file name, the file's lines from a list of sentences, how the door reads the file at `path`): the line
# reader itself, a stream of text files, a loaded JSON lines file and a streamed table (one door per code path).
DOORS = {
    "read_lines": ("s.en", lambda lines: lines, read_lines),
    "train_files-streaming": ("s.en", lambda lines: lines, lambda path: list(load_translation_dataset(
        "en", "de", train_files=(path, path), validation_files=(path, path), streaming=True)["train"])),
    "jsonl": ("p.jsonl", lambda lines: as_lines("p.jsonl", [{"en": s, "de": s} for s in lines], "translation"),
              lambda path: load_data_files(path, "en", "de")),
    "csv-streaming": ("p.csv", lambda lines: ["en,de"] + [f"{s},{s}" for s in lines],
                      lambda path: list(load_data_files(path, "en", "de", streaming=True))),
}


def assert_file_and_line(error, path, line=None):
    assert "\n" not in str(error.value)
    assert re.search(re.escape(str(path)) + r", line " + (str(line) if line else r"\d+"), str(error.value)), error.value


FAULTS = [(door, fault) for i, door in enumerate(DOORS) for fault in (list(COMPRESSORS)[i % 3], "too-long")]


@pytest.mark.parametrize("door,fault", FAULTS)
def test_a_cut_short_archive_or_a_line_too_long_names_file_and_line(tmp_path, door, fault):
    name, layout, read = DOORS[door]
    if fault == "too-long":
        lines = layout(["a", "x" * (MAX_LINE_BYTES + 1), "b"])
        path, line = write(tmp_path / (name + ".gz"), lines), [len(x) > MAX_LINE_BYTES for x in lines].index(True) + 1
    else:
        lines, line = layout([f"sentence {i} " + "x" * (i % 50) for i in range(5000)]), None
        path = write(tmp_path / (name + fault), lines)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(DataError) as error:
        read(path)
    assert_file_and_line(error, path, line)


def test_a_line_as_long_as_allowed_is_read_and_text_to_translate_goes_through_the_same_reader(tmp_path):
    assert read_lines(write(tmp_path / "s.en", ["a", "x" * MAX_LINE_BYTES])) == ["a", "x" * MAX_LINE_BYTES]
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
    "jsonl-broken": ("p.jsonl", ['{"en": "a", "de": "b"}', '{"en": "c", "de": "d"}', '{"en": "e", "de": '], ["JSON"]),
    "json-array": ("p.json", ['{"en": "a", "de": "b"}', '{"en": "c", "de": "d"}', '["e", "f"]'], ["list"]),
    "jsonl-not-utf8": ("p.jsonl", ['{"en": "a", "de": "b"}', '{"en": "c", "de": "d"}', '{"en": "\udcff", "de": "f"}'],
                       ["UTF-8"]),
    "csv-cells": ("p.csv", ["en,de", "a,b", "c,d,e"], ["3 cells"]),
    "tsv-cells": ("p.tsv.gz", ["en\tde", "a\tb", "c"], ["1 cells"]),
}


@pytest.mark.parametrize("streaming", [False, True], ids=["dataset", "stream"])
@pytest.mark.parametrize("case", list(BAD_ROWS))
def test_a_malformed_row_names_file_and_line(tmp_path, case, streaming):
    name, lines, words = BAD_ROWS[case]
    path = write(tmp_path / name, lines)
    with pytest.raises(DataError) as error:
        list(load_data_files(path, "en", "de", streaming=streaming))
    assert_file_and_line(error, path, 3)
    assert_names(error, *words)


@pytest.mark.parametrize("streaming", [False, True], ids=["dataset", "stream"])
def test_a_bad_row_of_a_json_array_is_named_by_its_row(tmp_path, streaming):
    path = write(tmp_path / "p.json", ['[{"en": "a", "de": "b"},', ' {"en": "c"}]'])  # one array, as datasets reads it
    with pytest.raises(DataError) as error:
        list(load_data_files(path, "en", "de", streaming=streaming))
    assert_names(error, path, "row 2", "'de'")


def test_a_file_changed_in_place_is_read_again(tmp_path):
    path = write(tmp_path / "p.jsonl", ['{"en": "a", "de": "b"}'])
    assert load_data_files(path, "en", "de")[0]["translation"] == {"en": "a", "de": "b"}
    write(path, ['{"en": "c", "de": "d"}', '{"en": "e", "de": "f"}'])
    assert [row["translation"]["en"] for row in load_data_files(path, "en", "de")] == ["c", "e"]


@pytest.mark.parametrize("streaming", [False, True], ids=["dataset", "stream"])
def test_a_hub_row_without_a_language_names_the_dataset_and_row(streaming):
    rows = datasets.Dataset.from_dict({"en": ["a", "b", "c"], "de": ["x", "y", None]})
    with pytest.raises(DataError) as error:
        list(as_translation_rows(rows.to_iterable_dataset() if streaming else rows, "wmt14", "en", "de"))
    assert_names(error, "wmt14, row 3", "'de'")


@pytest.mark.parametrize("where", ["missing.en.gz", "."], ids=["missing", "folder"])
def test_a_path_that_cannot_be_opened_is_named(tmp_path, where):
    with pytest.raises(DataError) as error:
        list(data_lines(tmp_path / where))
    assert_names(error, tmp_path / where)
