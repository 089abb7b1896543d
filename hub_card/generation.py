"""§6.1 — the paper's decoding settings, in one place that the model, the scripts, the model card
and the benchmarks all read, and the one check of decoding settings, whichever way they come in.

"We used beam search with a beam size of 4 and length penalty α = 0.6 ... We set the maximum
output length during inference to input length + 50, but terminate early when possible." (§6.1)

GenerationConfig has no field for the "+ 50": it is saved as our own entry `max_output_length_offset`.
Two more entries of ours choose the paper's search, beam_search.py: GNMT's length penalty
(`length_penalty_formula="gnmt"`) and tensor2tensor's stopping rule (`beam_termination="bound"`).
A generation config without them (files saved before they existed) decodes with transformers'
own beam search, as it always did; `TRANSFORMERS_BEAM_SEARCH` passed to generate() does so for any model.
"""

import math

from transformers import GenerationConfig, GenerationMixin
from transformers.generation.configuration_utils import GenerationMode
from transformers.generation.utils import GENERATION_MODES_MAPPING

from .beam_search import beam_search

# §6.1: "beam search with a beam size of 4 and length penalty α = 0.6".
NUM_BEAMS = 4
LENGTH_PENALTY = 0.6
# §6.1: "We set the maximum output length during inference to input length + 50".
MAX_OUTPUT_LENGTH_OFFSET = 50

# The max_length (20) that GenerationMixin.generate falls back to when none is set.
GENERATE_FALLBACK_MAX_LENGTH = GenerationConfig._get_default_generation_params()["max_length"]

# §6.1's "length penalty α = 0.6 [38]": GNMT's lp(Y) = ((5 + |Y|) / 6)^α, and "terminate early when
# possible": once no live hypothesis can beat the one to return (tensor2tensor's bound). beam_search.py.
PAPER_SEARCH = dict(length_penalty_formula="gnmt", beam_termination="bound")

PAPER_DECODING = dict(
    num_beams=NUM_BEAMS,
    length_penalty=LENGTH_PENALTY,
    early_stopping=True,  # "terminate early when possible" (transformers' rule; PAPER_SEARCH's bound replaces it)
    use_cache=True,  # the Trainer may switch config.use_cache off; decoding reads this one
    max_output_length_offset=MAX_OUTPUT_LENGTH_OFFSET,
    **PAPER_SEARCH,
)

# generate(..., **TRANSFORMERS_BEAM_SEARCH): transformers' own beam search (|Y|^α, `early_stopping`).
TRANSFORMERS_BEAM_SEARCH = dict(length_penalty_formula=None, beam_termination=None)

# In words, for scripts, results files and the model card.
PAPER_DECODING_TEXT = (
    f"beam search with beam size {NUM_BEAMS} and length penalty α = {LENGTH_PENALTY}, "
    f"at most input length + {MAX_OUTPUT_LENGTH_OFFSET} tokens"
)


def paper_generation_config(config) -> GenerationConfig:
    """§6.1 decoding for a model with `config`'s special token ids (transformers' own beam search would
    divide log P by |Y|^α instead of the paper's ((5 + |Y|) / 6)^α)."""
    return GenerationConfig(
        **PAPER_DECODING,
        pad_token_id=config.pad_token_id,
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        decoder_start_token_id=config.decoder_start_token_id,
    )


def output_length_offset(generation_config: GenerationConfig) -> int:
    """The "+ 50" of §6.1 as saved in `generation_config` (files written before it was saved: 50)."""
    offset = getattr(generation_config, "max_output_length_offset", None)
    return MAX_OUTPUT_LENGTH_OFFSET if offset is None else offset


def length_limit_chosen(generation_config: GenerationConfig) -> bool:
    """Whether `generation_config` sets a length limit, which replaces §6.1's; generate's fallback
    max_length of 20, which Trainer evaluation used to save into checkpoints, is none."""
    return generation_config.max_new_tokens is not None or generation_config.max_length not in (
        None, GENERATE_FALLBACK_MAX_LENGTH)


def max_new_tokens_for(generation_config: GenerationConfig, input_length: int) -> int:
    """§6.1: at most input length + offset new tokens (for a padded batch, the longest input)."""
    return input_length + output_length_offset(generation_config)


def drop_generate_fallbacks(generation_config: GenerationConfig) -> None:
    """Unset, in place, the values equal to generate()'s own fallbacks (which Seq2SeqTrainer's evaluation
    used to write into the config; generate() fills them back), keeping §6.1's, whose offset is saved."""
    for key, fallback in generation_config._get_default_generation_params().items():
        if key not in PAPER_DECODING and fallback is not None and getattr(generation_config, key, None) == fallback:
            setattr(generation_config, key, None)
    if getattr(generation_config, "max_output_length_offset", None) is None:
        # A model loaded from a file written before the entry existed: save the limit generate applies.
        generation_config.max_output_length_offset = MAX_OUTPUT_LENGTH_OFFSET


def choose_decoding(model, generation_config, kwargs: dict):
    """The `custom_generate` of a generate() call: `decode` once a PAPER_SEARCH setting is set (the call's
    over the configs'), else None (transformers' own decoding). Takes the two settings out of `kwargs`."""
    chosen = False
    for name, paper in PAPER_SEARCH.items():
        if name in kwargs:
            value = kwargs.pop(name)
        else:
            value = getattr(generation_config if hasattr(generation_config, name) else model.generation_config, name,
                            None)
        if value not in (None, paper):
            raise ValueError(f"{name} must be {paper!r} (§6.1's search) or None (transformers' own), got {value!r}.")
        chosen = chosen or value is not None
    if not chosen or kwargs.get("streamer") is not None or kwargs.get("assistant_model") is not None:
        return None  # streaming and assisted decoding: transformers' path (its beam search refuses both)
    return decode


def decode(model, input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus=False,
           beam_trace=None, **model_kwargs):
    """generate()'s decoding method once the paper's search is chosen: beam_search.py, or transformers' own."""
    mode = generation_config.get_generation_mode()
    if mode == GenerationMode.BEAM_SEARCH:
        return beam_search(model, input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus,
                           beam_trace, **model_kwargs)
    method = GENERATION_MODES_MAPPING.get(mode)
    if beam_trace is not None or not hasattr(GenerationMixin, str(method)):
        raise ValueError(f"{mode.value} is not available with the paper's search chosen (beam_trace needs beam "
                         "search); pass **TRANSFORMERS_BEAM_SEARCH for transformers' own decoding.")
    return getattr(type(model), method)(model, input_ids, logits_processor=logits_processor,
                                        stopping_criteria=stopping_criteria, generation_config=generation_config,
                                        synced_gpus=synced_gpus, **model_kwargs)


# --- The one check of decoding settings: a script flag, generation_config.json, config.json (transformers
# reads decoding settings from it when generation_config.json is missing) or an argument to generate().

# Token positions a search may hold at once: §6.1's beam 4 × a batch of 64 × (512 + 50) is 0.14M;
# at this bound the key/value cache alone is some tens of GB.
MAX_DECODING_POSITIONS = 2**24


def _integer(low, optional=True):
    return lambda v: (optional and v is None) or isinstance(v, int) and not isinstance(v, bool) and v >= low


def _number(low=-math.inf, high=math.inf):  # None, or a finite number in (low, high]
    return lambda v: v is None or isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (
        low < v <= high)


_RULES = [  # (names, accepts, wanted)
    (("num_beams", "num_beam_groups"), _integer(1, optional=False), "a positive integer"),
    (("num_return_sequences",), _integer(1), "a positive integer"),
    (("max_new_tokens", "max_length"), _integer(1), "a positive integer or null"),
    (("min_new_tokens", "min_length", "top_k", "no_repeat_ngram_size"), _integer(0), "a non-negative integer or null"),
    (("max_output_length_offset",), _integer(0), "a non-negative integer (§6.1: 50) or null"),
    (("length_penalty",), _number(), "a finite number (§6.1: 0.6)"),
    (("early_stopping",), lambda v: isinstance(v, bool) or v == "never", 'true, false or "never"'),
    (("do_sample", "use_cache"), lambda v: isinstance(v, bool), "true or false"),
    (("temperature", "repetition_penalty"), _number(0), "a finite positive number or null"),
    (("top_p",), _number(0, 1), "a number in (0, 1] or null"),
    (("pad_token_id", "bos_token_id", "decoder_start_token_id"), _integer(0), "a token id (a non-negative integer) or null"),
    # -1: no end token (generate() then stops at the length limit only).
    (("eos_token_id",), lambda v: _integer(-1)(v) or isinstance(v, list) and bool(v) and all(
        _integer(0, optional=False)(i) for i in v), "a token id, a list of token ids, -1 or null"),
]
DECODING_FIELDS = {name: (accepts, wanted) for names, accepts, wanted in _RULES for name in names}


def decoding_settings(*sources) -> dict:
    """The decoding fields of `sources` (dicts or GenerationConfigs), a later one's set values over an earlier's."""
    values = {}
    for source in sources:
        get = source.get if isinstance(source, dict) else lambda name, default: getattr(source, name, default)
        values.update({name: get(name, None) for name in DECODING_FIELDS if get(name, None) is not None})
    return values


def check_decoding(values: dict, where: str, batch_size: int = 1, input_length: int = 1) -> None:
    """Refuse, naming `where` and the setting, a wrong field of `values` or a search too large to allocate."""
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
