"""Tests for modeling_vaswani.training.data: the embedded Multi30k corpus and local parallel files."""

import gzip

import pytest

from modeling_vaswani.training.data import (
    DEFAULT_DATA_DIR,
    DataError,
    load_multi30k,
    load_parallel_files,
    load_translation_dataset,
    read_lines,
    select_first,
)


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


def test_crlf_line_endings_are_stripped(tmp_path):
    path = _write(tmp_path / "w.txt", None, raw=b"one\r\ntwo\r\n")
    assert read_lines(path) == ["one", "two"]


def test_mismatched_line_counts_name_both_files(tmp_path):
    src = _write(tmp_path / "x.en", ["a", "b", "c"])
    tgt = _write(tmp_path / "x.de", ["a", "b"])
    with pytest.raises(DataError) as err:
        load_parallel_files(src, tgt, "en", "de")
    message = str(err.value)
    assert str(src) in message and str(tgt) in message and "3" in message and "2" in message


def test_missing_file(tmp_path):
    src = _write(tmp_path / "x.en", ["a"])
    with pytest.raises(DataError, match="not found.*nope.de"):
        load_parallel_files(src, tmp_path / "nope.de", "en", "de")


def test_empty_file(tmp_path):
    src = _write(tmp_path / "e.en", [])
    tgt = _write(tmp_path / "e.de", [])
    with pytest.raises(DataError, match="Empty corpus.*e.en"):
        load_parallel_files(src, tgt, "en", "de")


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
    with pytest.raises(DataError, match="no 'fr'.*\\['de', 'en'\\]"):
        load_translation_dataset("en", "fr", dataset_name="wmt14", dataset_config_name="de-en")
