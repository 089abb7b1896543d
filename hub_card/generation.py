"""§6.1 — the paper's decoding settings, in one place that the model, the scripts, the model card
and the benchmarks all read.

"We used beam search with a beam size of 4 and length penalty α = 0.6 ... We set the maximum
output length during inference to input length + 50, but terminate early when possible." (§6.1)

`paper_generation_config` turns these numbers into the `GenerationConfig` every new model carries
(and saves as generation_config.json); `max_new_tokens_for` applies the "+ 50" rule, which
`GenerationConfig` has no field for, so it is saved as our own entry `max_output_length_offset`.
Two more entries of our own choose the paper's search, beam_search.py: GNMT's length penalty
(`length_penalty_formula="gnmt"`) and tensor2tensor's stopping rule (`beam_termination="bound"`).
A generation config without them (files saved before they existed) decodes with transformers'
own beam search (`GenerationMixin`), as it always did; `TRANSFORMERS_BEAM_SEARCH` passed to
generate() does so for any model. `choose_decoding` reads the two entries.
"""

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
    """§6.1 decoding for a model with `config`'s special token ids: beam 4, GNMT's length penalty
    with α = 0.6 and tensor2tensor's stopping rule (beam_search.py), at most input length + 50 tokens.

    (transformers' own beam search divides a hypothesis' log-probability by |Y|^α instead of the
    paper's ((5 + |Y|) / 6)^α; it decodes the generation configs saved without
    `length_penalty_formula`, and any model given TRANSFORMERS_BEAM_SEARCH.)
    """
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
    """Whether `generation_config` itself sets a length limit, which then replaces §6.1's.

    Checkpoints saved by earlier versions during Trainer evaluation carry generate's fallback
    max_length of 20: that means "no limit chosen".
    """
    return generation_config.max_new_tokens is not None or generation_config.max_length not in (
        None, GENERATE_FALLBACK_MAX_LENGTH)


def max_new_tokens_for(generation_config: GenerationConfig, input_length: int) -> int:
    """§6.1: at most input length + offset new tokens (for a padded batch, the longest input)."""
    return input_length + output_length_offset(generation_config)


def drop_generate_fallbacks(generation_config: GenerationConfig) -> None:
    """Unset the values that equal generate()'s own fallbacks, keeping §6.1's (Hugging Face glue).

    Seq2SeqTrainer's evaluation used to write every fallback (max_length 20, top_k 50, ...) into
    the model's generation config, and checkpoints saved them as if chosen. generate() fills an
    unset value with that same fallback, so decoding is unchanged; the saved file lists only what
    was set. Changes `generation_config` in place, and makes sure the §6.1 offset is saved.
    """
    for key, fallback in generation_config._get_default_generation_params().items():
        if key not in PAPER_DECODING and fallback is not None and getattr(generation_config, key, None) == fallback:
            setattr(generation_config, key, None)
    if getattr(generation_config, "max_output_length_offset", None) is None:
        # A model loaded from a file written before the entry existed: save the limit generate applies.
        generation_config.max_output_length_offset = MAX_OUTPUT_LENGTH_OFFSET


def choose_decoding(model, generation_config, kwargs: dict):
    """The `custom_generate` of a generate() call: `decode` (the paper's search) when the call, else the
    generation config passed, else the model's sets `length_penalty_formula` or `beam_termination`;
    None (transformers' own decoding) when both are None. Takes the two settings out of `kwargs`."""
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
    """generate()'s decoding method when the paper's search is chosen: beam_search.py for beam search,
    transformers' own method for greedy search and sampling."""
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
