"""§6.1 — the paper's decoding settings, in one place that the model, the scripts, the model card
and the benchmarks all read.

"We used beam search with a beam size of 4 and length penalty α = 0.6 ... We set the maximum
output length during inference to input length + 50, but terminate early when possible." (§6.1)

`paper_generation_config` turns these numbers into the `GenerationConfig` every new model carries
(and saves as generation_config.json); `max_new_tokens_for` applies the "+ 50" rule, which
`GenerationConfig` has no field for, so it is saved as our own entry `max_output_length_offset`.
Two more entries of our own choose the search of beam_search.py: GNMT's length penalty
(`length_penalty_formula="gnmt"`) and tensor2tensor's stopping rule (`beam_termination="bound"`).
A generation config without them (files saved before they existed) decodes with transformers'
beam search, as it always did; `TRANSFORMERS_BEAM_SEARCH` passed to generate() does so for any model.
"""

from transformers import GenerationConfig

# §6.1: "beam search with a beam size of 4 and length penalty α = 0.6".
NUM_BEAMS = 4
LENGTH_PENALTY = 0.6
# §6.1: "We set the maximum output length during inference to input length + 50".
MAX_OUTPUT_LENGTH_OFFSET = 50

# The max_length (20) that GenerationMixin.generate falls back to when none is set.
GENERATE_FALLBACK_MAX_LENGTH = GenerationConfig._get_default_generation_params()["max_length"]

PAPER_DECODING = dict(
    num_beams=NUM_BEAMS,
    length_penalty=LENGTH_PENALTY,
    early_stopping=True,  # "terminate early when possible" (transformers' rule; "bound" below replaces it)
    use_cache=True,  # the Trainer may switch config.use_cache off; decoding reads this one
    max_output_length_offset=MAX_OUTPUT_LENGTH_OFFSET,
    # §6.1's "length penalty α = 0.6 [38]": GNMT's lp(Y) = ((5 + |Y|) / 6)^α (beam_search.py).
    length_penalty_formula="gnmt",
    # "terminate early when possible": once no live hypothesis can beat the finished one (beam_search.py).
    beam_termination="bound",
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
