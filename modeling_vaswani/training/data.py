"""Parallel training data (§5.1): every source ends as rows ``{"translation": {"en": "...", "de": "..."}}``,
the layout of the WMT datasets on the Hub.

Deviation: the paper trains on WMT 2014 (about 4.5 million pairs); the default here is Multi30k (about 29,000
short image captions in English, German and French) shipped in the repository, small enough for a laptop and
no network. WMT 2014: ``load_translation_dataset(dataset_name="wmt14", dataset_config_name="de-en")``. Files a
user gives are read by `data_files`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Sequence, Tuple, Union

import datasets

from ..cli import MULTI30K_SPLITS as SPLIT_NAMES
from ..text_lines import DataError, PathLike
from .data_files import AnyDataset, as_translation_rows, check_language_pair, load_data_files, load_parallel_files

DEFAULT_DATA_DIR = Path(os.environ.get("VASWANI_DATA_DIR", Path(__file__).resolve().parents[2] / "data" / "multi30k"))
MULTI30K_LANGUAGES = ("en", "de", "fr")
# Split name used by this package (cli.py's list) -> file stem in the Multi30k distribution. "test" is the one
# the paper-era literature reports; the 2017 and 2018 test sets are further held-out sentences (mscoco: not Flickr
# photographs).
MULTI30K_SPLITS = {name: {"validation": "val", "test": "test_2016_flickr"}.get(name, name) for name in SPLIT_NAMES}
FilePair = Tuple[PathLike, PathLike]  # (source_path, target_path)
_VALIDATION_ALIASES = ("val", "valid", "dev")  # what Hub datasets call their development split


def in_memory(dataset: AnyDataset) -> datasets.Dataset:
    return dataset if isinstance(dataset, datasets.Dataset) else datasets.Dataset.from_list(list(dataset),
                                                                                            features=dataset.features)


def load_multi30k(source_lang: str = "en", target_lang: str = "de") -> datasets.DatasetDict:
    """The embedded Multi30k corpus with splits ``train`` (29,000), ``validation`` (1,014), ``test`` (1,000),
    ``test_2017_flickr`` (1,000), ``test_2017_mscoco`` (461) and ``test_2018_flickr`` (1,071)."""
    check_language_pair(source_lang, target_lang, choices=MULTI30K_LANGUAGES)
    return datasets.DatasetDict({split: load_parallel_files(DEFAULT_DATA_DIR / f"{stem}.{source_lang}.gz",
                                                            DEFAULT_DATA_DIR / f"{stem}.{target_lang}.gz",
                                                            source_lang, target_lang)
                                 for split, stem in MULTI30K_SPLITS.items()})


def load_translation_dataset(
    source_lang: str = "en", target_lang: str = "de", dataset_name: Optional[str] = None,
    dataset_config_name: Optional[str] = None, train_files: Optional[FilePair] = None,
    validation_files: Optional[FilePair] = None, train_file: Union[PathLike, Sequence[PathLike], None] = None,
    validation_file: Union[PathLike, Sequence[PathLike], None] = None, streaming: bool = False,
) -> Union[datasets.DatasetDict, dict]:
    """Sentence pairs from the embedded Multi30k (nothing given), a Hub dataset in the WMT layout (`dataset_name`
    and `dataset_config_name`), aligned text files (`train_files=(source_path, target_path)`, `validation_files`)
    or data files (`train_file`, `validation_file`: `load_data_files`). `streaming`: a dict whose ``train`` split
    is a ``datasets.IterableDataset`` read as it is used; the other splits are read whole."""
    local = {"train": (train_files, train_file), "validation": (validation_files, validation_file)}
    for split, (pair, files) in local.items():
        if pair is not None and files is not None:
            raise DataError(f"Give the {split} split as {split}_files (a text file per language) or as "
                            f"{split}_file (data files), not both.")
    uses_files = any(given is not None for both in local.values() for given in both)
    if dataset_name is not None and uses_files:
        raise DataError("Give either dataset_name (a Hub dataset) or train/validation files, not both.")
    if dataset_name is not None:
        return _load_hub_dataset(dataset_name, dataset_config_name, source_lang, target_lang, streaming)
    if dataset_config_name is not None:
        raise DataError("dataset_config_name was given without dataset_name; pass both.")
    if not uses_files:
        loaded = load_multi30k(source_lang, target_lang)
        return {split: part.to_iterable_dataset() if split == "train" else part
                for split, part in loaded.items()} if streaming else loaded
    if local["train"] == (None, None):
        raise DataError("validation_files were given without train_files; give training files too.")
    splits = {}
    for split, (pair, files) in local.items():
        stream = streaming and split == "train"
        if files is not None:
            splits[split] = load_data_files(files, source_lang, target_lang, streaming=stream)
        elif pair is not None:
            splits[split] = load_parallel_files(*pair, source_lang, target_lang, streaming=stream)
    return splits if streaming else datasets.DatasetDict(splits)


def select_first(dataset: AnyDataset, n: Optional[int]) -> AnyDataset:
    """The first `n` rows (all of them if `n` is None or exceeds the size), e.g. for --max_train_samples."""
    if n is None:
        return dataset
    if isinstance(dataset, datasets.IterableDataset):
        return dataset.take(n)
    return dataset.select(range(min(n, len(dataset))))


def _load_hub_dataset(name: str, config: Optional[str], source_lang: str, target_lang: str,
                      streaming: bool = False) -> Union[datasets.DatasetDict, dict]:
    check_language_pair(source_lang, target_lang, choices=None)
    loaded = datasets.load_dataset(name, config, streaming=True) if streaming else datasets.load_dataset(name, config)
    if not isinstance(loaded, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        loaded = {"train": loaded}
    renamed = {}
    for split, ds in loaded.items():
        key = "validation" if split in _VALIDATION_ALIASES else split
        if key in renamed:
            raise DataError(f"Dataset {name!r} has more than one validation split ({list(loaded)}).")
        renamed[key] = ds
    if "train" not in renamed:
        raise DataError(f"Dataset {name!r} has no 'train' split (splits: {list(renamed)}).")
    described = f"Dataset {name!r}" + (f" (config {config!r})" if config is not None else "")
    splits = {}
    for split, ds in renamed.items():
        ds = as_translation_rows(ds, f"{described}, {split} split", source_lang, target_lang)
        splits[split] = ds if split == "train" else in_memory(ds)  # only the training split streams
    return splits if streaming else datasets.DatasetDict(splits)


def multi30k_pairs(split: str, source_lang: str = "en", target_lang: str = "de", max_samples: int | None = None):
    """(sources, references) of a Multi30k split: a name in MULTI30K_SPLITS ("test" is test_2016_flickr)."""
    if split not in MULTI30K_SPLITS:
        raise ValueError(f"Unknown split {split!r}; choose one of {sorted(MULTI30K_SPLITS)}.")
    rows = load_multi30k(source_lang, target_lang)[split]["translation"]
    return [row[source_lang] for row in rows][:max_samples], [row[target_lang] for row in rows][:max_samples]
