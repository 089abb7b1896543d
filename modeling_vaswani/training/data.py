"""Parallel training data (§5.1 "Training Data and Batching").

The paper trains on WMT 2014 English→German, about 4.5 million sentence pairs, and on the much
larger WMT 2014 English→French set. Each example is a pair of sentences, one a translation of the
other. This module turns such pairs into a ``datasets.DatasetDict`` whose rows look like
``{"translation": {"en": "...", "de": "..."}}``, the layout the WMT datasets on the Hugging Face
Hub already use, so the rest of the package never cares where the text came from.

Deviation: by default the data is Multi30k (about 29,000 short image-caption pairs in English,
German and French) shipped inside the repository, not WMT 2014. It is small enough to train on a
laptop and needs no network. WMT 2014 (or any Hub dataset in the same layout) can be loaded with
``load_translation_dataset(dataset_name="wmt14", dataset_config_name="de-en")``, and any pair of
aligned text files with ``train_files=(source_path, target_path)``.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import BinaryIO, Iterator, Optional, Sequence, Tuple, Union

import datasets

PathLike = Union[str, os.PathLike]

DEFAULT_DATA_DIR = Path(
    os.environ.get("VASWANI_DATA_DIR", Path(__file__).resolve().parents[2] / "data" / "multi30k")
)

MULTI30K_LANGUAGES = ("en", "de", "fr")
# Split name used by this package -> file stem in the Multi30k distribution.
MULTI30K_SPLITS = {"train": "train", "validation": "val", "test": "test_2016_flickr"}

# Names that Hub datasets use for their held-out development split.
_VALIDATION_ALIASES = ("val", "valid", "dev")


class DataError(ValueError):
    """A problem with the training data that the user can fix (missing file, bad encoding, ...)."""


def strip_line_end(line: str) -> str:
    """`line` without its terminator, "\\n" or "\\r\\n" (a line without one is returned as it is).

    Lines end at "\\n" only. A lone "\\r", a form feed, "\\u2028" and the other characters that
    `str.splitlines` (and Python's text mode) also treat as line breaks stay inside the line:
    splitting on them would add lines, and every later line would then be paired with the wrong
    translation.
    """
    if line.endswith("\r\n"):
        return line[:-2]
    return line[:-1] if line.endswith("\n") else line


def iter_lines(handle: BinaryIO, name: str) -> Iterator[str]:
    """The lines of a binary file object (a file opened with "rb", ``sys.stdin.buffer``), decoded
    as UTF-8 one at a time, each without its terminator (`strip_line_end`).

    Raises DataError naming ``name`` and the line number at the first line that is not UTF-8.
    """
    for line_number, raw in enumerate(handle, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(
                f"{name}, line {line_number}: not valid UTF-8 ({err.reason} at byte "
                f"{err.start}). Re-encode the file as UTF-8."
            ) from None
        yield strip_line_end(text)


def read_lines(path: PathLike) -> list[str]:
    """Read a UTF-8 text file, plain or gzipped (by the ``.gz`` suffix), one item per line.

    Only the line terminator ("\\n" or "\\r\\n") is removed; leading/trailing spaces inside a
    line are kept, and so is any other character, a lone "\\r" included (`strip_line_end`).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"Data file not found: {path}. Check the path (or set VASWANI_DATA_DIR).")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            return list(iter_lines(handle, str(path)))
    except (OSError, EOFError) as err:  # e.g. a truncated or non-gzip ".gz" file
        raise DataError(f"Could not read {path}: {err}") from None


def load_parallel_files(
    source_file: PathLike, target_file: PathLike, source_lang: str, target_lang: str
) -> datasets.Dataset:
    """Pair line i of ``source_file`` with line i of ``target_file``.

    Returns a ``Dataset`` with a single ``translation`` column of ``{source_lang: s, target_lang: t}``.
    """
    _check_language_pair(source_lang, target_lang, choices=None)
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


def load_multi30k(
    source_lang: str = "en", target_lang: str = "de", data_dir: Optional[PathLike] = None
) -> datasets.DatasetDict:
    """The embedded Multi30k corpus with splits ``train`` (29,000), ``validation`` (1,014), ``test`` (1,000)."""
    _check_language_pair(source_lang, target_lang, choices=MULTI30K_LANGUAGES)
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
) -> datasets.DatasetDict:
    """Load sentence pairs from one of three places, always returning ``translation`` rows.

    * nothing given: the embedded Multi30k (``data_dir`` overrides its location);
    * ``dataset_name`` (+ ``dataset_config_name``): a Hub dataset in the WMT layout, e.g.
      ``("wmt14", "de-en")`` — the corpus of §5.1;
    * ``train_files=(source_path, target_path)``: aligned local text files, optionally with
      ``validation_files`` and ``test_files`` in the same form.
    """
    local = {"train": train_files, "validation": validation_files, "test": test_files}
    uses_files = any(v is not None for v in local.values())
    if dataset_name is not None and uses_files:
        raise DataError(
            "Give either dataset_name (a Hub dataset) or train/validation/test files, not both."
        )
    if dataset_name is not None:
        return _load_hub_dataset(dataset_name, dataset_config_name, source_lang, target_lang)
    if dataset_config_name is not None:
        raise DataError("dataset_config_name was given without dataset_name; pass both.")
    if uses_files:
        if train_files is None:
            raise DataError("validation_files/test_files were given without train_files; pass train_files too.")
        splits = {}
        for split, pair in local.items():
            if pair is None:
                continue
            if isinstance(pair, (str, os.PathLike)) or len(pair) != 2:
                raise DataError(
                    f"{split}_files must be a pair (source_path, target_path); got {pair!r}."
                )
            splits[split] = load_parallel_files(pair[0], pair[1], source_lang, target_lang)
        return datasets.DatasetDict(splits)
    return load_multi30k(source_lang, target_lang, data_dir=data_dir)


def select_first(dataset: datasets.Dataset, n: Optional[int]) -> datasets.Dataset:
    """The first ``n`` rows (all rows if ``n`` is None or exceeds the size), e.g. for ``max_train_samples``."""
    if n is None:
        return dataset
    if n < 0:
        raise DataError(f"Number of samples must be non-negative, got {n}.")
    return dataset.select(range(min(n, len(dataset))))


def _check_language_pair(source_lang: str, target_lang: str, choices: Optional[Sequence[str]]) -> None:
    if choices is not None:
        for name, lang in (("source_lang", source_lang), ("target_lang", target_lang)):
            if lang not in choices:
                raise DataError(f"{name}={lang!r} is not available; choose from {', '.join(choices)}.")
    if not source_lang or not target_lang:
        raise DataError("source_lang and target_lang must be non-empty language codes.")
    if source_lang == target_lang:
        raise DataError(
            f"source_lang and target_lang are both {source_lang!r}; choose two different languages."
        )


def _load_hub_dataset(
    name: str, config: Optional[str], source_lang: str, target_lang: str
) -> datasets.DatasetDict:
    _check_language_pair(source_lang, target_lang, choices=None)
    loaded = datasets.load_dataset(name, config)
    if not isinstance(loaded, datasets.DatasetDict):
        loaded = datasets.DatasetDict({"train": loaded})
    renamed = {}
    for split, ds in loaded.items():
        key = "validation" if split in _VALIDATION_ALIASES else split
        if key in renamed:
            raise DataError(f"Dataset {name!r} has more than one validation split ({list(loaded)}).")
        renamed[key] = ds
    loaded = datasets.DatasetDict(renamed)
    if "train" not in loaded:
        raise DataError(f"Dataset {name!r} has no 'train' split (splits: {list(loaded)}).")
    train = loaded["train"]
    if "translation" not in train.column_names:
        raise DataError(
            f"Dataset {name!r} has no 'translation' column (columns: {train.column_names}); "
            "expected rows like {'translation': {'en': ..., 'de': ...}} as in wmt14."
        )
    if len(train) == 0:
        raise DataError(f"Dataset {name!r} has an empty 'train' split.")
    first = train[0]["translation"]
    missing = [lang for lang in (source_lang, target_lang) if lang not in first]
    if missing:
        raise DataError(
            f"Dataset {name!r} (config {config!r}) has no {', '.join(map(repr, missing))} text; "
            f"its languages are {sorted(first)}. Pick source_lang/target_lang from those."
        )
    return loaded


SPLIT_NAMES = {"train": "train", "validation": "val", "test": "test_2016_flickr"}


def multi30k_pairs(split: str, source_lang: str = "en", target_lang: str = "de", max_samples: int | None = None):
    """(sources, references) of a Multi30k split: "train", "validation" or "test" (test_2016_flickr)."""
    if split not in SPLIT_NAMES:
        raise ValueError(f"Unknown split {split!r}; choose one of {sorted(SPLIT_NAMES)}.")
    rows = load_multi30k(source_lang, target_lang)[split]["translation"]
    sources = [row[source_lang] for row in rows][:max_samples]
    references = [row[target_lang] for row in rows][:max_samples]
    return sources, references
