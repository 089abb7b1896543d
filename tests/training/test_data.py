"""Tests for modeling_vaswani.training.data (the embedded Multi30k corpus, local parallel files, streams),
data_files (json, jsonl, csv, tsv) and pair_rows (the translation layout)."""

import gzip
import io
import json

import pytest

from modeling_vaswani.training.data import (
    DEFAULT_DATA_DIR,
    iter_lines,
    load_multi30k,
    load_parallel_files,
    load_translation_dataset,
    read_lines,
    select_first,
)
from checks import assert_names
from modeling_vaswani.training.data_files import load_data_files
from modeling_vaswani.training.data_files import DataError, in_memory


@pytest.fixture(scope="module")
def en_de():
    return load_multi30k("en", "de")


def test_default_data_dir_holds_multi30k():
    assert (DEFAULT_DATA_DIR / "train.en.gz").is_file()


def test_multi30k_en_de_counts_and_rows(en_de):
    assert {k: len(v) for k, v in en_de.items()} == {"train": 29000, "validation": 1014, "test": 1000}
    first = en_de["train"][0]["translation"]
    assert first == {
        "en": "Two young, White males are outside near many bushes.",
        "de": "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    }
    assert en_de["train"].column_names == ["translation"]


def test_multi30k_reverse_and_french(en_de):
    de_en = load_multi30k("de", "en")
    assert len(de_en["validation"]) == 1014
    assert de_en["test"][5]["translation"]["de"] == en_de["test"][5]["translation"]["de"]
    assert de_en["test"][5]["translation"]["en"] == en_de["test"][5]["translation"]["en"]
    en_fr = load_multi30k("en", "fr")
    row = en_fr["train"][0]["translation"]
    assert set(row) == {"en", "fr"} and row["fr"].startswith("Deux jeunes hommes")
    assert len(en_fr["test"]) == 1000


def test_load_translation_dataset_defaults_to_multi30k():
    ds = load_translation_dataset()
    assert len(ds["train"]) == 29000 and set(ds["train"][0]["translation"]) == {"en", "de"}


@pytest.mark.parametrize("src,tgt", [("en", "xx"), ("cs", "de"), ("en", "en")])
def test_invalid_language(src, tgt):
    with pytest.raises(DataError) as err:
        load_multi30k(src, tgt)
    message = str(err.value)
    if src == tgt:
        assert "different" in message
    else:
        assert "en, de, fr" in message


def _write(path, lines, gz=False, raw=None):
    data = raw if raw is not None else "".join(line + "\n" for line in lines).encode("utf-8")
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


def test_plain_and_gz_files(tmp_path):
    src = _write(tmp_path / "a.en", ["Hello world.", "  spaced  "])
    tgt = _write(tmp_path / "a.de.gz", ["Hallo Welt.", "Grüße"], gz=True)
    ds = load_parallel_files(src, tgt, "en", "de")
    assert ds[1]["translation"] == {"en": "  spaced  ", "de": "Grüße"}
    assert read_lines(tgt) == ["Hallo Welt.", "Grüße"]


# Characters that Python's str.splitlines (and text-mode reading, for "\r") take for a line break;
# lines end at "\n" (or "\r\n") only, or every later line would be paired with the wrong one.
LINE_BREAK_LOOKALIKES = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("char", LINE_BREAK_LOOKALIKES, ids=ascii)
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_lines_split_on_newline_only(tmp_path, char, gz):
    data = f"one{char}still one\r\ntwo\n{char}three\n".encode("utf-8")
    path = _write(tmp_path / ("data.en.gz" if gz else "data.en"), None, gz=gz, raw=data)
    expected = [f"one{char}still one", "two", f"{char}three"]
    assert read_lines(path) == expected
    assert list(iter_lines(io.BytesIO(data), "x")) == expected


BAD_PAIRS = {  # source bytes, target bytes (None: no file), the words the message must hold
    "missing-target": ("a\n", None, ["not found", "{tgt}"]),
    "different-lengths": ("a\nb\nc\n", "a\nb\n", ["{src}", "3 lines", "{tgt}", "2"]),
    "empty": ("", "", ["Empty corpus", "{src}"]),
    "undecodable-source": (b"good\nfine\n\xff\xfe bad\n", "a\nb\nc\n", ["{src}, line 3", "UTF-8"]),
    "undecodable-target": ("a\nb\n", b"ok\n\xc3\x28\n", ["{tgt}, line 2", "UTF-8"]),
    "gz-that-is-not-gzip": ("plain text, not gzip\n", "a\n", ["{src}, line 1"]),
}


@pytest.mark.parametrize("door", ["load_parallel_files", "load_translation_dataset"])
@pytest.mark.parametrize("case", list(BAD_PAIRS))
def test_bad_parallel_files_name_the_file(tmp_path, case, door):
    source, target, names = BAD_PAIRS[case]
    src = tmp_path / ("train.en.gz" if case == "gz-that-is-not-gzip" else "train.en")
    tgt = tmp_path / "train.de"
    for path, data in ((src, source), (tgt, target)):
        if data is not None:
            path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    with pytest.raises(DataError) as error:
        if door == "load_parallel_files":
            load_parallel_files(src, tgt, "en", "de")
        else:
            load_translation_dataset("en", "de", train_files=(src, tgt))
    assert_names(error, *[name.format(src=src, tgt=tgt) for name in names])


@pytest.mark.parametrize("gz", [False, True])
def test_undecodable_bytes_name_file_and_line(tmp_path, gz):
    path = _write(tmp_path / ("bad.en.gz" if gz else "bad.en"), None, gz=gz, raw=b"fine\nalso fine\nbad \xff\xfe byte\n")
    with pytest.raises(DataError) as err:
        read_lines(path)
    assert str(path) in str(err.value) and "line 3" in str(err.value)


def test_local_files_splits(tmp_path):
    tr = (_write(tmp_path / "t.en", ["a", "b"]), _write(tmp_path / "t.de", ["x", "y"]))
    va = (_write(tmp_path / "v.en", ["c"]), _write(tmp_path / "v.de", ["z"]))
    ds = load_translation_dataset("en", "de", train_files=tr, validation_files=va)
    assert set(ds) == {"train", "validation"}
    assert ds["validation"][0]["translation"] == {"en": "c", "de": "z"}


def test_mixing_hub_name_and_files_is_an_error(tmp_path):
    tr = (_write(tmp_path / "t.en", ["a"]), _write(tmp_path / "t.de", ["x"]))
    with pytest.raises(DataError, match="not both"):
        load_translation_dataset(dataset_name="wmt14", dataset_config_name="de-en", train_files=tr)
    with pytest.raises(DataError, match="without train_files"):
        load_translation_dataset(validation_files=tr)


def test_select_first(en_de):
    val = en_de["validation"]
    assert select_first(val, None) is val
    assert len(select_first(val, 10)) == 10
    assert select_first(val, 10)[9] == val[9]
    assert len(select_first(val, 10**6)) == len(val)


def test_hub_dataset_splits_renamed_and_languages_checked(monkeypatch):
    import datasets

    rows = {"translation": [{"de": "Hallo", "en": "Hello"}]}
    fake = datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows), "valid": datasets.Dataset.from_dict(rows)})
    calls = []
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config: calls.append((name, config)) or fake)
    ds = load_translation_dataset("en", "de", dataset_name="wmt14", dataset_config_name="de-en")
    assert calls == [("wmt14", "de-en")] and set(ds) == {"train", "validation"}
    with pytest.raises(DataError) as error:
        load_translation_dataset("en", "fr", dataset_name="wmt14", dataset_config_name="de-en")
    assert_names(error, "'fr'", "['de', 'en']")


# Data files (json, jsonl, csv, tsv) and streams ----------------------------------------------------

@pytest.fixture
def datasets_cache(tmp_path, monkeypatch):
    """Map-style loads of data files write their Arrow cache under tmp_path, not the user's cache."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    return tmp_path / "cache"


PAIRS = [{"en": 'He said "hi", then left.', "de": 'Er sagte "hallo" und ging.'},
         {"en": "2014", "de": "1.50"},  # numbers stay text
         {"en": "NA", "de": "null"}]  # and so do pandas' missing-value words


def _data_file(path, layout="languages", rows=PAIRS):
    suffix = "".join(path.suffixes)
    if ".json" in suffix:
        lines = [json.dumps({"translation": r} if layout == "translation" else r, ensure_ascii=False) for r in rows]
        text = "\n".join(lines) + "\n"
    else:
        sep = "\t" if ".tsv" in suffix else ","
        quote = (lambda t: t) if sep == "\t" else (lambda t: '"' + t.replace('"', '""') + '"')
        text = f"en{sep}de\n" + "".join(f"{quote(r['en'])}{sep}{quote(r['de'])}\n" for r in rows)
    return _write(path, None, gz=path.suffix == ".gz", raw=text.encode("utf-8"))


@pytest.mark.parametrize("name", ["pairs.jsonl", "pairs.json", "pairs.csv", "pairs.tsv", "pairs.tsv.gz", "pairs.jsonl.gz"])
@pytest.mark.parametrize("streaming", [False, True])
def test_data_files_load_as_translation_rows(tmp_path, datasets_cache, name, streaming):
    import datasets

    loaded = load_data_files(_data_file(tmp_path / name), "en", "de", streaming=streaming)
    assert isinstance(loaded, datasets.IterableDataset if streaming else datasets.Dataset)
    assert [row["translation"] for row in loaded] == PAIRS


def test_a_translation_column_and_several_files(tmp_path, datasets_cache):
    first = _data_file(tmp_path / "a.jsonl", layout="translation", rows=PAIRS[:2])
    second = _data_file(tmp_path / "b.jsonl", layout="translation", rows=PAIRS[2:])
    loaded = load_data_files([first, second], "de", "en")
    assert loaded.column_names == ["translation"] and [row["translation"] for row in loaded] == PAIRS


@pytest.mark.parametrize("name", ["bad.csv", "bad.jsonl", "bad.tsv"])
@pytest.mark.parametrize("streaming", [False, True])
def test_a_missing_column_names_the_file_the_columns_found_and_expected(tmp_path, datasets_cache, name, streaming):
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text('{"source": "a", "de": "b"}\n', encoding="utf-8")
    else:
        sep = "\t" if name.endswith(".tsv") else ","
        path.write_text(f"source{sep}de\na{sep}b\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_data_files(path, "en", "de", streaming=streaming)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path))
    assert "found ['source', 'de']" in message
    assert "'translation' column of {'en': ..., 'de': ...} rows or the two columns 'en' and 'de'" in message


def test_other_data_file_mistakes(tmp_path, datasets_cache):
    with pytest.raises(DataError) as error:
        load_data_files(_data_file(tmp_path / "t.jsonl", layout="translation"), "en", "fr")
    assert_names(error, "['de', 'en']")
    holes = tmp_path / "holes.jsonl"
    holes.write_text('{"en": "a", "de": "b"}\n{"en": "c", "de": null}\n', encoding="utf-8")
    with pytest.raises(DataError) as error:
        load_data_files(holes, "en", "de")
    assert_names(error, "holes.jsonl", "'de'", "None")
    with pytest.raises(DataError) as error:
        load_data_files(_write(tmp_path / "pairs.txt", ["a"]), "en", "de")
    assert_names(error, "pairs.txt", ".json, .jsonl, .csv, .tsv")
    with pytest.raises(DataError, match="not found.*nope.jsonl"):
        load_data_files(tmp_path / "nope.jsonl", "en", "de")
    with pytest.raises(DataError, match="share a format"):
        load_data_files([_data_file(tmp_path / "a.csv"), _data_file(tmp_path / "a.jsonl")], "en", "de")
    other = tmp_path / "other.csv"
    other.write_text("de,en,id\nx,y,1\n", encoding="utf-8")
    with pytest.raises(DataError, match="same columns"):
        load_data_files([_data_file(tmp_path / "b.csv"), other], "en", "de")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"en": "a", "de": \n', encoding="utf-8")
    for streaming in (False, True):
        with pytest.raises(DataError) as error:
            load_data_files(broken, "en", "de", streaming=streaming)
        assert_names(error, "broken.jsonl", "jsonl")
    empty = tmp_path / "empty.csv"
    empty.write_text("en,de\n", encoding="utf-8")
    with pytest.raises(DataError, match="no sentence pairs"):
        load_data_files(empty, "en", "de")


def test_streaming_reads_only_the_training_split_as_a_stream(tmp_path, datasets_cache):
    import datasets

    train = _data_file(tmp_path / "train.jsonl")
    validation = _data_file(tmp_path / "validation.tsv")
    data = load_translation_dataset("en", "de", train_file=train, validation_file=validation, streaming=True)
    assert isinstance(data["train"], datasets.IterableDataset) and isinstance(data["validation"], datasets.Dataset)
    assert [row["translation"] for row in select_first(data["train"], 2)] == PAIRS[:2]
    multi30k = load_translation_dataset(streaming=True)
    assert isinstance(multi30k["train"], datasets.IterableDataset) and len(multi30k["test"]) == 1000
    assert next(iter(multi30k["train"]))["translation"]["en"].startswith("Two young, White males")
    with pytest.raises(DataError, match="not both"):
        load_translation_dataset(train_file=train, train_files=(train, train))


def test_parallel_text_files_stream_in_step(tmp_path):
    src = _write(tmp_path / "s.en", ["one", "two", "three"])
    tgt = _write(tmp_path / "s.de.gz", ["eins", "zwei", "drei"], gz=True)
    data = load_translation_dataset("en", "de", train_files=(src, tgt), validation_files=(src, tgt), streaming=True)
    assert [row["translation"] for row in data["train"]] == [
        {"en": "one", "de": "eins"}, {"en": "two", "de": "zwei"}, {"en": "three", "de": "drei"}]
    assert len(data["validation"]) == 3
    short = _write(tmp_path / "short.de", ["eins"])
    with pytest.raises(DataError) as error:
        list(load_parallel_files(src, short, "en", "de", streaming=True))
    assert_names(error, "short.de", "line 1")


def test_a_hub_dataset_streams_its_training_split(monkeypatch):
    import datasets

    rows = [{"translation": {"de": "Hallo", "en": "Hello"}, "id": "0"}] * 3
    fake = datasets.IterableDatasetDict({"train": datasets.Dataset.from_list(rows).to_iterable_dataset(),
                                         "dev": datasets.Dataset.from_list(rows).to_iterable_dataset()})
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config, streaming: fake)
    data = load_translation_dataset("en", "de", dataset_name="wmt14", dataset_config_name="de-en", streaming=True)
    assert isinstance(data["train"], datasets.IterableDataset) and isinstance(data["validation"], datasets.Dataset)
    assert data["validation"].column_names == ["translation"] and len(data["validation"]) == 3
    with pytest.raises(DataError) as error:
        load_translation_dataset("en", "fr", dataset_name="wmt14", dataset_config_name="de-en", streaming=True)
    assert_names(error, "'fr'", "['de', 'en']")


def test_in_memory():
    import datasets

    rows = datasets.Dataset.from_list([{"translation": {"en": "a", "de": "b"}}] * 2)
    assert in_memory(rows) is rows
    assert in_memory(rows.to_iterable_dataset())["translation"] == rows["translation"]
