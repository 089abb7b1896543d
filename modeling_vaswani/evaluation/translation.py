"""Translating text with a trained model — §6.1 decoding end to end (tokenize → generate → detokenize).

Sentences go in batches sorted by length and come back in input order; a sentence over `max_source_length`
tokens is cut, with one warning per call. `load_translator` refuses bad names, devices and speed options
before anything loads.
"""

import logging
import os
import re
from contextlib import contextmanager, nullcontext
from itertools import islice
from pathlib import Path
from typing import Callable, Iterable, Iterator

import torch
from transformers import AutoModelForSeq2SeqLM, PretrainedConfig

from ..cli import missing_model_folder, one_line
from ..model.loading import check_model_location
from ..model.pipeline_vaswani import source_line
from ..text_lines import strip_line_end
from ..tokenizer_loading import load_tokenizer
from .fast_path import FastPath

logger = logging.getLogger(__name__)

MAX_SOURCE_LENGTH = 512


def resolve_device(device: str | None = None) -> torch.device:
    """The torch.device named by `device`, checked to exist here; None: cuda when available, else cpu."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device {device!r} is not a device name; use cpu, cuda, cuda:1, mps, ...") from None
    if parsed.type == "meta":
        raise ValueError("device 'meta' holds no data and cannot translate; use cpu or an accelerator.")
    try:
        torch.empty(0, device=parsed)
    except Exception as error:  # torch raises RuntimeError, AssertionError, ... for a missing backend or index
        available = "cpu" + (f", cuda (0–{torch.cuda.device_count() - 1})" if torch.cuda.is_available() else "")
        raise ValueError(f"device {device!r} is not available here ({one_line(error)}); available: {available}.") \
            from None
    return parsed


def _check_model_name(name) -> None:
    """A local path with nothing there (else the Hub is asked, and waited for), or a config.json without
    model_type (AutoModel would speak of "custom code"), refused in words."""
    if isinstance(name, (str, os.PathLike)) and (reason := missing_model_folder(os.fspath(name))) is not None:
        shipped = ("; the shipped model, from any directory, is modeling_vaswani.shipped_model_path()"
                   if Path(name).name == "hub_card" else "")
        raise FileNotFoundError(f"{os.fspath(name)!r}: {reason}{shipped}.")
    try:
        config, _ = PretrainedConfig.get_config_dict(name)
    except OSError:
        return  # no or unreadable config.json: from_pretrained reports it, naming the file
    if not isinstance(config.get("model_type"), str) or not config["model_type"]:
        raise ValueError(f"The config.json of {name!r} has no model_type (it has {config.get('model_type')!r}), so it "
                         'cannot tell which model it describes; a model saved by this package says "model_type": '
                         '"vaswani". Add that entry if it is one, or re-save it.')


@contextmanager
def quiet_loading():
    """transformers' progress bars and messages below errors off inside, restored after."""
    from transformers.utils import logging as hf_logging

    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def load_translator(model_name_or_path: str, device: str | None = None, quiet: bool = True,
                    fast_path: FastPath | None = None):
    """(model, tokenizer) from a saved folder or Hub id, model in eval mode on `device`, built from this
    package's classes (trust_remote_code off: a folder's own code is refused, not run)."""
    target = resolve_device(device)
    fast_path = fast_path or FastPath()
    fast_path.check(target)
    check_model_location(model_name_or_path)
    with quiet_loading() if quiet else nullcontext():
        _check_model_name(model_name_or_path)
        try:
            model = AutoModelForSeq2SeqLM.from_pretrained(model_name_or_path, trust_remote_code=False,
                                                          dtype=fast_path.torch_dtype)
        except ValueError as error:
            if not str(error).startswith("VaswaniConfig"):  # AutoConfig builds the config without naming the file
                raise
            raise ValueError(f"{str(model_name_or_path)!r} (config.json): {error}") from None
        except OSError as error:
            name = os.fspath(model_name_or_path) if isinstance(model_name_or_path, (str, os.PathLike)) else None
            if name is None or Path(name).exists():
                raise
            # user/name that is no folder here: the Hub's message alone ("couldn't connect") hides that.
            raise FileNotFoundError(f"{name!r} is no folder here ({os.path.abspath(name)} does not exist), and as "
                                    f"a Hub id it did not load: {one_line(error)}") from None
        tokenizer = load_tokenizer(model_name_or_path)
    return fast_path.apply(model.to(target).eval()), tokenizer


def load_for_script(args, model_name: str, device: str | None = None):
    """(model, tokenizer, threads, why, words) for a script's engine, speed and --threads flags; `words` names
    the engine for its progress bar and summary."""
    if args.engine == "ctranslate2":
        from .ctranslate2_engine import cached_ctranslate2_model, is_ctranslate2_model, load_ctranslate2_translator

        # --ct2_model, else the model if it is a CTranslate2 folder, else its conversion in the cache.
        folder = args.ct2_model or (model_name if is_ctranslate2_model(model_name)
                                    else cached_ctranslate2_model(model_name))
        model, tokenizer = load_ctranslate2_translator(folder, device, args.ct2_compute_type, args.threads)
        threads, why, prefix = model.threads, model.threads_chosen_by, "ctranslate2, "
    else:
        from ..threads import use_threads

        fast_path = FastPath(args.dtype, args.quantize, args.compile)
        model, tokenizer = load_translator(model_name, device, fast_path=fast_path)
        threads, why = use_threads(model, args.threads)
        prefix = "" if fast_path.is_default else f"{fast_path.describe()}, "
    return model, tokenizer, threads, why, f"{prefix}{threads} thread{'s' * (threads != 1)}"


def translate(model, tokenizer, sentences: list[str], batch_size: int = 64, max_source_length: int = MAX_SOURCE_LENGTH,
              progress: Callable[[int], object] | None = None, **generate_kwargs) -> list[str]:
    """Translations of `sentences`; blank or invisible-only lines give "" without decoding. `progress(n)`
    is called as each batch finishes."""
    outputs, cut = _translate(model, tokenizer, sentences, batch_size, max_source_length, generate_kwargs, progress)
    _warn_truncated(cut, len(sentences), max_source_length)
    return outputs


def translate_batches(model, tokenizer, lines: Iterable[str], batch_size: int = 64,
                      max_source_length: int = MAX_SOURCE_LENGTH, progress: Callable[[int], object] | None = None,
                      **generate_kwargs) -> Iterator[list[str]]:
    """Each batch's translations, read lazily; only a line's terminator is removed. Cut sentences are
    reported once, at the end of the stream."""
    lines, cut, total = iter(lines), 0, 0
    try:
        while batch := [strip_line_end(line) for line in islice(lines, batch_size)]:
            outputs, batch_cut = _translate(model, tokenizer, batch, batch_size, max_source_length, generate_kwargs,
                                            progress)
            cut, total = cut + batch_cut, total + len(batch)
            yield outputs
    finally:
        _warn_truncated(cut, total, max_source_length)


def as_one_line(text: str) -> str:
    """`text` with line breaks as spaces: line i of an output file stays the translation of line i."""
    return re.sub(r"\r\n|\r|\n", " ", text)


def _warn_truncated(cut: int, total: int, max_source_length: int) -> None:
    if cut:
        logger.warning("warning: %d of %d sentences are longer than %d tokens (max_source_length) and were cut to "
                       "their first %d tokens; their translations cover only that part. Split long lines to translate "
                       "all of them.", cut, total, max_source_length, max_source_length)


def _translate(model, tokenizer, sentences, batch_size, max_source_length, generate_kwargs, progress=None):
    if isinstance(sentences, str):  # iterating a str would translate it character by character
        raise ValueError("sentences must be a list of strings, not a single string; wrap it in a list.")
    for position, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise ValueError(f"Sentence {position} is a {type(sentence).__name__}, not a string.")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    if isinstance(max_source_length, bool) or not isinstance(max_source_length, int) or max_source_length < 1:
        raise ValueError(f"max_source_length must be a positive integer, got {max_source_length!r}.")
    outputs, cut = [""] * len(sentences), 0
    todo = sorted((i for i, s in enumerate(sentences) if source_line(s)), key=lambda i: len(sentences[i]))
    if progress is not None and len(todo) < len(sentences):
        progress(len(sentences) - len(todo))  # blank lines: done without decoding
    for start in range(0, len(todo), batch_size):
        chunk = todo[start:start + batch_size]
        texts = [sentences[i] for i in chunk]
        what = f"{len(texts)} sentence{'s' * (len(texts) != 1)} (the shortest {texts[0][:40]!r})"
        # Counted on the whole ids (verbose=False: transformers' own line about longer inputs does not apply here).
        lengths = [len(ids) for ids in _tokenizer_call(lambda: tokenizer(texts, verbose=False)["input_ids"], what)]
        cut += sum(length > max_source_length for length in lengths)
        encoded = _tokenizer_call(lambda: tokenizer(texts, return_tensors="pt", padding=True, truncation=True,
                                                    max_length=max_source_length), what).to(model.device)
        with torch.inference_mode():
            generated = model.generate(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"],
                                       **generate_kwargs)
        decoded = _tokenizer_call(lambda: tokenizer.batch_decode(generated, skip_special_tokens=True),
                                  f"the translations of {what}")
        for i, text in zip(chunk, decoded):
            outputs[i] = text.strip()
        if progress is not None:
            progress(len(chunk))
    return outputs, cut


def _tokenizer_call(call, what: str):
    """`call()`; a panic of the tokenizers library (pyo3's PanicException, a BaseException that `except
    Exception` misses) becomes a one-line ValueError."""
    try:
        return call()
    except BaseException as error:
        if type(error).__name__ != "PanicException":
            raise
        raise ValueError(f"The tokenizer failed on {what} ({one_line(error)}); its tokenizer.json is damaged or holds a "
                         "pattern that cannot handle this text. Use the tokenizer the model was trained with, from a "
                         "trusted source.") from None
