"""training.data: the embedded Multi30k corpus, aligned text files, Hub datasets, streams."""

import io

import datasets
import pytest

from checks import assert_names
from modeling_vaswani.text_lines import DataError, iter_lines, read_lines
from modeling_vaswani.training.data import (DEFAULT_DATA_DIR, in_memory, load_multi30k, load_translation_dataset,
                                            select_first)
from modeling_vaswani.training.data_files import load_parallel_files
from tiny_data import write_lines as _write


@pytest.fixture(scope="module")
def en_de():
    return load_multi30k("en", "de")


def test_multi30k_splits_rows_and_languages(en_de):
    assert (DEFAULT_DATA_DIR / "train.en.gz").is_file()
    assert {k: len(v) for k, v in en_de.items()} == {"train": 29000, "validation": 1014, "test": 1000,
                                                     "test_2017_flickr": 1000, "test_2017_mscoco": 461,
                                                     "test_2018_flickr": 1071}
    assert en_de["train"].column_names == ["translation"] and en_de["train"][0]["translation"] == {
        "en": "Two young, White males are outside near many bushes.",
        "de": "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    }
    assert load_multi30k("de", "en")["test"][5]["translation"] == en_de["test"][5]["translation"]
    assert load_multi30k("en", "fr")["train"][0]["translation"]["fr"].startswith("Deux jeunes hommes")
    assert load_translation_dataset()["train"][0]["translation"] == en_de["train"][0]["translation"]


@pytest.mark.parametrize("src,tgt,word", [("en", "xx", "en, de, fr"), ("cs", "de", "'cs'"), ("en", "en", "different")])
def test_invalid_language(src, tgt, word):
    with pytest.raises(DataError) as err:
        load_multi30k(src, tgt)
    assert_names(err, word)


@pytest.mark.parametrize("streaming", [False, True])
def test_plain_and_gz_files_make_the_splits_and_only_training_streams(tmp_path, streaming):
    src = _write(tmp_path / "a.en", ["Hello world.", "  spaced  "])
    tgt = _write(tmp_path / "a.de.gz", ["Hallo Welt.", "Grüße"])
    assert load_parallel_files(src, tgt, "en", "de")[1]["translation"] == {"en": "  spaced  ", "de": "Grüße"}
    ds = load_translation_dataset("en", "de", train_files=(src, tgt), validation_files=(tgt, src), streaming=streaming)
    assert set(ds) == {"train", "validation"} and [row["translation"]["de"] for row in ds["train"]] == read_lines(tgt)
    assert isinstance(ds["train"], datasets.IterableDataset if streaming else datasets.Dataset)
    assert ds["validation"][0]["translation"] == {"en": "Hallo Welt.", "de": "Hello world."}  # in memory either way
    multi30k = load_translation_dataset(streaming=streaming)
    assert isinstance(multi30k["train"], datasets.IterableDataset if streaming else datasets.Dataset)
    assert next(iter(multi30k["train"]))["translation"]["en"].startswith("Two young, White males")
    assert len(multi30k["test"]) == 1000


# Characters that str.splitlines (and text mode, for "\r") take for a line break: lines end at "\n" only,
# or every later line would be paired with the wrong one.
@pytest.mark.parametrize("char", ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"], ids=ascii)
@pytest.mark.parametrize("name", ["data.en", "data.en.gz"])
def test_lines_split_on_newline_only(tmp_path, char, name):
    data = f"one{char}still one\r\ntwo\n{char}three\n"
    expected = [f"one{char}still one", "two", f"{char}three"]
    assert read_lines(_write(tmp_path / name, data.split("\n")[:-1])) == expected
    assert list(iter_lines(io.BytesIO(data.encode("utf-8")), "x")) == expected


BAD_PAIRS = {  # source bytes, target bytes (None: no file), the words the message must hold
    "missing-target": (b"a\n", None, ["not found", "{tgt}"]),
    "different-lengths": (b"a\nb\nc\n", b"a\nb\n", ["{src}", "{tgt}", "line 2"]),
    "empty": (b"", b"", ["Empty corpus", "{src}"]),
    "undecodable-target": (b"a\nb\n", b"ok\n\xc3\x28\n", ["{tgt}, line 2", "UTF-8"]),  # archives: test_data_files
}


@pytest.mark.parametrize("case", list(BAD_PAIRS))
def test_bad_parallel_files_name_the_file(tmp_path, case):
    source, target, names = BAD_PAIRS[case]
    src, tgt = tmp_path / "train.en", tmp_path / "train.de"
    src.write_bytes(source)
    if target is not None:
        tgt.write_bytes(target)
    with pytest.raises(DataError) as error:
        load_translation_dataset("en", "de", train_files=(src, tgt))
    assert_names(error, *[name.format(src=src, tgt=tgt) for name in names])


@pytest.mark.parametrize("kwargs,words", [
    (dict(dataset_name="wmt14", dataset_config_name="de-en", train_files="{pair}"), ["not both"]),
    (dict(validation_files="{pair}"), ["without train_files"]),
    (dict(train_file="{path}", train_files="{pair}"), ["train_files", "train_file", "not both"]),
    (dict(dataset_config_name="de-en"), ["without dataset_name"]),
])
def test_sources_that_do_not_go_together(tmp_path, kwargs, words):
    pair = (_write(tmp_path / "t.en", ["a"]), _write(tmp_path / "t.de", ["x"]))
    kwargs = {key: {"{pair}": pair, "{path}": pair[0]}.get(value, value) for key, value in kwargs.items()}
    with pytest.raises(DataError) as error:
        load_translation_dataset(**kwargs)
    assert_names(error, *words)


def test_select_first_and_in_memory(en_de):
    val = en_de["validation"]
    assert select_first(val, None) is val and select_first(val, 10)[9] == val[9]
    assert len(select_first(val, 10)) == 10 and len(select_first(val, 10**6)) == len(val)
    assert in_memory(val) is val
    assert in_memory(select_first(val, 3).to_iterable_dataset())["translation"] == val[:3]["translation"]


@pytest.mark.parametrize("streaming", [False, True])
def test_hub_dataset_splits_renamed(monkeypatch, streaming):
    rows = [{"translation": {"de": "Hallo", "en": "Hello"}, "id": "0"}] * 3
    parts = {"train": datasets.Dataset.from_list(rows), "valid": datasets.Dataset.from_list(rows)}
    fake = (datasets.IterableDatasetDict({split: part.to_iterable_dataset() for split, part in parts.items()})
            if streaming else datasets.DatasetDict(parts))
    calls = []
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config, **kw: calls.append((name, config)) or fake)
    data = load_translation_dataset("en", "de", dataset_name="wmt14", dataset_config_name="de-en", streaming=streaming)
    assert calls == [("wmt14", "de-en")] and set(data) == {"train", "validation"}
    assert isinstance(data["train"], datasets.IterableDataset if streaming else datasets.Dataset)
    assert data["validation"].column_names == ["translation"] and len(data["validation"]) == 3
