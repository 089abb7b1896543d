"""Parallel training data (§5.1 "Training Data and Batching").

The paper trains on WMT 2014 English→German, about 4.5 million sentence pairs, and on the much
larger WMT 2014 English→French set. Each example is a pair of sentences, one a translation of the
other. This module turns such pairs into a ``datasets.DatasetDict`` whose rows look like
``{"translation": {"en": "...", "de": "..."}}``, the layout the WMT datasets on the Hugging Face
Hub already use, so the rest of the package never cares where the text came from.

Deviation: by default the data is Multi30k (about 29,000 short image-caption pairs in English,
German and French) shipped inside the repository, not WMT 2014. It is small enough to train on a
laptop and needs no network. WMT 2014 (or any Hub dataset in the same layout) can be loaded with
``load_translation_dataset(dataset_name="wmt14", dataset_config_name="de-en")``, any pair of
aligned text files with ``train_files=(source_path, target_path)``, and data files (JSON lines, csv,
tsv; optionally compressed) with ``train_file=path``, their
rows either a ``translation`` column as above or one column per language (``en``, ``de``).

``streaming=True`` reads the training split as training goes (a ``datasets.IterableDataset``, for
corpora larger than memory); the other splits, small, are still read whole.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import BinaryIO, Iterator, Optional, Sequence, Tuple, Union

import datasets

from .data_files import load_data_files
from .data_lines import data_lines, numbered_lines
from .pair_rows import (  # noqa: F401  (DataError and in_memory: imported from here too)
    AnyDataset,
    DataError,
    as_translation_rows,
    check_language_pair,
    in_memory,
)

PathLike = Union[str, os.PathLike]

DEFAULT_DATA_DIR = Path(
    os.environ.get("VASWANI_DATA_DIR", Path(__file__).resolve().parents[2] / "data" / "multi30k")
)

MULTI30K_LANGUAGES = ("en", "de", "fr")
# Split name used by this package -> file stem in the Multi30k distribution.
MULTI30K_SPLITS = {"train": "train", "validation": "val", "test": "test_2016_flickr"}

# Names that Hub datasets use for their held-out development split.
_VALIDATION_ALIASES = ("val", "valid", "dev")


def iter_lines(handle: BinaryIO, name: str) -> Iterator[str]:
    """The lines of a binary file object (a file opened with "rb", ``sys.stdin.buffer``), each without
    its terminator; a line that cannot be read is a DataError naming ``name`` and the line (data_lines.py)."""
    return (line for _, line in numbered_lines(handle, name))


def read_lines(path: PathLike) -> list[str]:
    """Read a UTF-8 text file, plain or compressed (by its .gz, .bz2 or .xz suffix), one item per line.

    Only the line terminator ("\\n" or "\\r\\n") is removed; leading/trailing spaces inside a
    line are kept, and so is any other character, a lone "\\r" included (`strip_line_end`).
    """
    if not Path(path).is_file():
        raise DataError(f"Data file not found: {path}. Check the path (or set VASWANI_DATA_DIR).")
    return [line for _, line in data_lines(path)]


def load_parallel_files(
    source_file: PathLike, target_file: PathLike, source_lang: str, target_lang: str
) -> datasets.Dataset:
    """Pair line i of ``source_file`` with line i of ``target_file``.

    Returns a ``Dataset`` with a single ``translation`` column of ``{source_lang: s, target_lang: t}``.
    """
    check_language_pair(source_lang, target_lang, choices=None)
    sources = read_lines(source_file)
    targets = read_lines(target_file)
    if len(sources) != len(targets):
        raise DataError(
            f"Parallel files have different line counts: {source_file} has {len(sources)} lines, "
            f"{target_file} has {len(targets)}. Line i of one must translate line i of the other."
        )
    if not sources:
        raise DataError(f"Empty corpus: {source_file} (and {target_file}) contain no lines.")
    rows = [{source_lang: s, target_lang: t} for s, t in zip(sources, targets)]
    return datasets.Dataset.from_dict({"translation": rows})


def stream_parallel_files(
    source_file: PathLike, target_file: PathLike, source_lang: str, target_lang: str
) -> datasets.IterableDataset:
    """``load_parallel_files`` as a stream: the two files are read line by line, in step, as training goes."""
    check_language_pair(source_lang, target_lang, choices=None)
    for path in (source_file, target_file):
        if not Path(path).is_file():
            raise DataError(f"Data file not found: {path}. Check the path.")
    return datasets.IterableDataset.from_generator(
        _parallel_lines, gen_kwargs=dict(source_file=str(source_file), target_file=str(target_file),
                                         source_lang=source_lang, target_lang=target_lang))


def _parallel_lines(source_file: str, target_file: str, source_lang: str, target_lang: str):
    missing = (None, None)
    pairs = itertools.zip_longest(data_lines(source_file), data_lines(target_file), fillvalue=missing)
    for line_number, ((_, source), (_, target)) in enumerate(pairs, start=1):
        if source is None or target is None:
            shorter = source_file if source is None else target_file
            raise DataError(f"Parallel files have different line counts: {shorter} ends at line "
                            f"{line_number - 1}, the other goes on. Line i of one must translate line i of the other.")
        yield {"translation": {source_lang: source, target_lang: target}}


def load_multi30k(
    source_lang: str = "en", target_lang: str = "de", data_dir: Optional[PathLike] = None
) -> datasets.DatasetDict:
    """The embedded Multi30k corpus with splits ``train`` (29,000), ``validation`` (1,014), ``test`` (1,000)."""
    check_language_pair(source_lang, target_lang, choices=MULTI30K_LANGUAGES)
    root = Path(data_dir) if data_dir is not None else DEFAULT_DATA_DIR
    splits = {}
    for split, stem in MULTI30K_SPLITS.items():
        splits[split] = load_parallel_files(
            root / f"{stem}.{source_lang}.gz", root / f"{stem}.{target_lang}.gz", source_lang, target_lang
        )
    return datasets.DatasetDict(splits)


def load_translation_dataset(
    source_lang: str = "en",
    target_lang: str = "de",
    dataset_name: Optional[str] = None,
    dataset_config_name: Optional[str] = None,
    train_files: Optional[Tuple[PathLike, PathLike]] = None,
    validation_files: Optional[Tuple[PathLike, PathLike]] = None,
    test_files: Optional[Tuple[PathLike, PathLike]] = None,
    data_dir: Optional[PathLike] = None,
    train_file: Union[PathLike, Sequence[PathLike], None] = None,
    validation_file: Union[PathLike, Sequence[PathLike], None] = None,
    streaming: bool = False,
) -> Union[datasets.DatasetDict, dict]:
    """Load sentence pairs from one of four places, always returning ``translation`` rows.

    * nothing given: the embedded Multi30k (``data_dir`` overrides its location);
    * ``dataset_name`` (+ ``dataset_config_name``): a Hub dataset in the WMT layout, e.g.
      ``("wmt14", "de-en")`` — the corpus of §5.1;
    * ``train_files=(source_path, target_path)``: aligned local text files, optionally with
      ``validation_files`` and ``test_files`` in the same form;
    * ``train_file``: json, jsonl, csv or tsv data files (`load_data_files`), optionally with a
      ``validation_file``; a split may come from either kind of file, not from both.

    With ``streaming=True`` the result is a plain dict whose ``train`` split is a
    ``datasets.IterableDataset`` read as it is used, and whose other splits are read whole.
    """
    for split, pair, files in (("train", train_files, train_file), ("validation", validation_files, validation_file)):
        if pair is not None and files is not None:
            raise DataError(f"Give the {split} split as {split}_files (a text file per language) or as "
                            f"{split}_file (data files), not both.")
    # split -> (whether they are data files rather than a pair of text files, the files)
    local = {"train": (train_file is not None, train_files if train_file is None else train_file),
             "validation": (validation_file is not None, validation_files if validation_file is None else validation_file),
             "test": (False, test_files)}
    uses_files = any(files is not None for _, files in local.values())
    if dataset_name is not None and uses_files:
        raise DataError(
            "Give either dataset_name (a Hub dataset) or train/validation/test files, not both."
        )
    if dataset_name is not None:
        return _load_hub_dataset(dataset_name, dataset_config_name, source_lang, target_lang, streaming)
    if dataset_config_name is not None:
        raise DataError("dataset_config_name was given without dataset_name; pass both.")
    if not uses_files:
        loaded = load_multi30k(source_lang, target_lang, data_dir=data_dir)
        if not streaming:
            return loaded
        return {split: part.to_iterable_dataset() if split == "train" else part for split, part in loaded.items()}
    if local["train"][1] is None:
        raise DataError("validation_files/test_files were given without train_files; give training files too.")
    splits = {}
    for split, (data_files, files) in local.items():
        if files is None:
            continue
        stream = streaming and split == "train"
        if data_files:
            splits[split] = load_data_files(files, source_lang, target_lang, streaming=stream)
            continue
        if isinstance(files, (str, os.PathLike)) or len(files) != 2:
            raise DataError(f"{split}_files must be a pair (source_path, target_path); got {files!r}.")
        load = stream_parallel_files if stream else load_parallel_files
        splits[split] = load(files[0], files[1], source_lang, target_lang)
    return splits if streaming else datasets.DatasetDict(splits)


def select_first(dataset: AnyDataset, n: Optional[int]) -> AnyDataset:
    """The first ``n`` rows (all rows if ``n`` is None or exceeds the size), e.g. for ``max_train_samples``."""
    if n is None:
        return dataset
    if n < 0:
        raise DataError(f"Number of samples must be non-negative, got {n}.")
    if isinstance(dataset, datasets.IterableDataset):
        return dataset.take(n)
    return dataset.select(range(min(n, len(dataset))))


def _load_hub_dataset(
    name: str, config: Optional[str], source_lang: str, target_lang: str, streaming: bool = False
) -> Union[datasets.DatasetDict, dict]:
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


SPLIT_NAMES = {"train": "train", "validation": "val", "test": "test_2016_flickr"}


def multi30k_pairs(split: str, source_lang: str = "en", target_lang: str = "de", max_samples: int | None = None):
    """(sources, references) of a Multi30k split: "train", "validation" or "test" (test_2016_flickr)."""
    if split not in SPLIT_NAMES:
        raise ValueError(f"Unknown split {split!r}; choose one of {sorted(SPLIT_NAMES)}.")
    rows = load_multi30k(source_lang, target_lang)[split]["translation"]
    sources = [row[source_lang] for row in rows][:max_samples]
    references = [row[target_lang] for row in rows][:max_samples]
    return sources, references
