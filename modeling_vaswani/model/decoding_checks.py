"""The one check of the decoding settings, whichever way they come in (Hugging Face glue, not from the paper):
a script flag, generation_config.json, config.json (transformers reads decoding settings from it when
generation_config.json is missing) or an argument to generate(). `check_decoding` refuses, naming the
setting, a value of the wrong type, out of range or not finite, and a search too large to allocate.
"""

import math

from .generation import MAX_OUTPUT_LENGTH_OFFSET

# Token positions a search may hold at once: §6.1's beam 4 × a batch of 64 × (512 + 50) is 0.14M;
# at this bound the key/value cache alone is some tens of GB.
MAX_DECODING_POSITIONS = 2**24


def _integer(value, low):
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _optional(check):
    return lambda value: value is None or check(value)


_token_id = _optional(lambda value: _integer(value, 0))
_count = _optional(lambda value: _integer(value, 1))
DECODING_FIELDS = {
    "num_beams": (lambda v: _integer(v, 1), "a positive integer"),
    "num_beam_groups": (lambda v: _integer(v, 1), "a positive integer"),
    "num_return_sequences": (_count, "a positive integer"),
    "max_new_tokens": (_count, "a positive integer or null"),
    "max_length": (_count, "a positive integer or null"),
    "min_new_tokens": (_optional(lambda v: _integer(v, 0)), "a non-negative integer or null"),
    "min_length": (_optional(lambda v: _integer(v, 0)), "a non-negative integer or null"),
    "max_output_length_offset": (_optional(lambda v: _integer(v, 0)), "a non-negative integer (§6.1: 50) or null"),
    "length_penalty": (_optional(_number), "a finite number (§6.1: 0.6)"),
    "early_stopping": (lambda v: isinstance(v, bool) or v == "never", 'true, false or "never"'),
    "do_sample": (lambda v: isinstance(v, bool), "true or false"),
    "use_cache": (lambda v: isinstance(v, bool), "true or false"),
    "temperature": (_optional(lambda v: _number(v) and v > 0), "a finite positive number or null"),
    "top_k": (_optional(lambda v: _integer(v, 0)), "a non-negative integer or null"),
    "top_p": (_optional(lambda v: _number(v) and 0 < v <= 1), "a number in (0, 1] or null"),
    "repetition_penalty": (_optional(lambda v: _number(v) and v > 0), "a finite positive number or null"),
    "no_repeat_ngram_size": (_optional(lambda v: _integer(v, 0)), "a non-negative integer or null"),
    "pad_token_id": (_token_id, "a token id (a non-negative integer) or null"),
    "bos_token_id": (_token_id, "a token id (a non-negative integer) or null"),
    "decoder_start_token_id": (_token_id, "a token id (a non-negative integer) or null"),
    # -1: no end token (generate() then stops at the length limit only).
    "eos_token_id": (lambda v: _optional(lambda i: _integer(i, -1))(v) or (
        isinstance(v, list) and bool(v) and all(_integer(i, 0) for i in v)), "a token id, a list of token ids, -1 or null"),
}


def decoding_settings(*sources) -> dict:
    """The decoding fields of `sources` (dicts or GenerationConfigs), a later one's set values over an earlier's."""
    values = {}
    for source in sources:
        get = source.get if isinstance(source, dict) else lambda name, default: getattr(source, name, default)
        values.update({name: get(name, None) for name in DECODING_FIELDS if get(name, None) is not None})
    return values


def check_decoding(values: dict, where: str, batch_size: int = 1, input_length: int = 1) -> None:
    """Refuse, naming `where` and the setting, a wrong field of `values`, and a search of `batch_size`
    inputs of `input_length` tokens holding more than MAX_DECODING_POSITIONS."""
    for name, (accepts, wanted) in DECODING_FIELDS.items():
        if name in values and not accepts(values[name]):
            raise ValueError(f"{where}: {name} must be {wanted}, got {values[name]!r}.")
    beams = values.get("num_beams") or 1
    if values.get("max_new_tokens") is not None:
        length = input_length + values["max_new_tokens"]
    elif values.get("max_length") is not None:
        length = values["max_length"]
    else:
        offset = values.get("max_output_length_offset")
        length = input_length + (MAX_OUTPUT_LENGTH_OFFSET if offset is None else offset)
    if beams * batch_size * length > MAX_DECODING_POSITIONS:
        raise ValueError(f"{where}: num_beams {beams} × batch {batch_size} × length {length} token positions is more "
                         f"than the {MAX_DECODING_POSITIONS} a search may hold; lower num_beams, the batch size or "
                         "the length limit.")
