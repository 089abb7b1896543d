"""Sentence pairs as rows (§5.1 "Training Data and Batching"): the one layout the package trains on.

Every source of training data (training/data.py: Multi30k, text files, a Hub dataset;
training/data_files.py: json, jsonl, csv and tsv files) ends as rows of
``{"translation": {"en": "...", "de": "..."}}``, the layout of the WMT datasets on the Hugging Face
Hub. `as_translation_rows` brings a dataset into it, from that column or from one column per
language, and refuses anything else in one line (`DataError`) that names the columns it found.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import datasets

AnyDataset = Union[datasets.Dataset, datasets.IterableDataset]


class DataError(ValueError):
    """A problem with the training data that the user can fix (missing file, bad encoding, ...)."""


def as_translation_rows(dataset: AnyDataset, name: str, source_lang: str, target_lang: str) -> AnyDataset:
    """``dataset`` with one ``translation`` column of ``{source_lang: ..., target_lang: ...}`` rows.

    It may have that column already (other columns are dropped) or one text column per language.
    Anything else is a DataError naming ``name``, the columns found and the columns expected.
    """
    columns = dataset_columns(dataset)
    layout = pair_columns(columns, name, source_lang, target_lang)
    if layout == "translation":
        first = first_row(dataset)
        if first is None:
            raise DataError(f"{name} holds no sentence pairs.")
        missing = [lang for lang in (source_lang, target_lang) if lang not in (first["translation"] or {})]
        if missing:
            raise DataError(f"{name}: the 'translation' rows have no {', '.join(map(repr, missing))} text; their "
                            f"languages are {sorted(first['translation'] or {})}. Pick the languages from those.")
        return dataset.select_columns(["translation"])

    def pair_up(batch, indices):
        rows = []
        for index, source, target in zip(indices, batch[source_lang], batch[target_lang]):
            for lang, text in ((source_lang, source), (target_lang, target)):
                if not isinstance(text, str):
                    raise DataError(f"{name}, row {index + 1}: {text!r} for {lang!r}; every row needs both "
                                    "sentences.")
            rows.append({source_lang: source, target_lang: target})
        return {"translation": rows}

    paired = dataset.map(pair_up, batched=True, with_indices=True, remove_columns=columns)
    if first_row(paired) is None:
        raise DataError(f"{name} holds no sentence pairs.")
    return paired


def dataset_columns(dataset: AnyDataset) -> list[str]:
    """The column names; a stream whose features are not known yet is asked for its first row."""
    if dataset.column_names is not None:
        return list(dataset.column_names)
    first = first_row(dataset)
    return list(first) if first is not None else []


def first_row(dataset: AnyDataset) -> Optional[dict]:
    """The first row (None for an empty dataset); a stream reads no further than that."""
    if isinstance(dataset, datasets.Dataset):
        return dataset[0] if len(dataset) else None
    return next(iter(dataset.take(1)), None)


def in_memory(dataset: AnyDataset) -> datasets.Dataset:
    """A stream read whole into a ``datasets.Dataset`` (a validation set, say); a Dataset as it is."""
    if isinstance(dataset, datasets.Dataset):
        return dataset
    return datasets.Dataset.from_list(list(dataset), features=dataset.features)


def pair_columns(columns: Sequence[str], name, source_lang: str, target_lang: str) -> str:
    """'translation' or 'languages': which layout the columns have; neither is a DataError."""
    if "translation" in columns:
        return "translation"
    if source_lang in columns and target_lang in columns:
        return "languages"
    raise DataError(
        f"{name}: no columns for {source_lang}-{target_lang} pairs; found {list(columns)}, expected a "
        f"'translation' column of {{'{source_lang}': ..., '{target_lang}': ...}} rows or the two columns "
        f"'{source_lang}' and '{target_lang}'."
    )


def check_language_pair(source_lang: str, target_lang: str, choices: Optional[Sequence[str]]) -> None:
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
