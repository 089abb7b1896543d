"""Checks on the tensors handed to the model (Hugging Face glue, not from the paper).

A malformed batch is rejected at the model's entry, where the message can name the argument,
instead of failing deep inside attention with a shape error about some intermediate tensor.
"""

import torch

from .positional_encoding import SinusoidalPositionalEncoding


def check_batch(tensor, name: str, is_ids: bool = True) -> None:
    """Raise ValueError unless `tensor` is a non-empty (batch, length) id tensor (or embeddings)."""
    if tensor is None:
        raise ValueError("Pass input_ids (B, S) or inputs_embeds (B, S, d_model) for the encoder.")
    if is_ids and tensor.dim() != 2:
        raise ValueError(
            f"{name} must have shape (batch, length), got {tuple(tensor.shape)}; "
            "for one sentence add a batch dimension, e.g. ids[None]."
        )
    if is_ids and (tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool):
        raise ValueError(f"{name} must hold integer token ids, got dtype {tensor.dtype}; use torch.long.")
    if tensor.shape[0] == 0:
        raise ValueError(f"{name} holds an empty batch (0 sentences); pass at least one sentence.")
    if tensor.dim() > 1 and tensor.shape[1] == 0:
        raise ValueError(f"{name} has sequences of length 0; every sequence needs at least one token (e.g. </s>).")


def check_encoder_inputs(input_ids, inputs_embeds, attention_mask, vocab_size: int) -> None:
    """The encoder's inputs: exactly one of input_ids and inputs_embeds, ids in the vocabulary, and a
    0/1 padding mask of one entry per input token."""
    if input_ids is not None and inputs_embeds is not None:
        raise ValueError(
            "Pass input_ids or inputs_embeds, not both: the encoder would read one and silently ignore the other."
        )
    if input_ids is not None:
        check_batch(input_ids, "input_ids")
        check_token_ids(input_ids, vocab_size)
    else:
        check_batch(inputs_embeds, "inputs_embeds", is_ids=False)
    inputs = ("input_ids", input_ids) if input_ids is not None else ("inputs_embeds", inputs_embeds)
    check_mask_shape(attention_mask, "attention_mask", *inputs)
    check_attention_mask(attention_mask, "attention_mask")


def check_decoder_inputs(decoder_input_ids, decoder_inputs_embeds, decoder_attention_mask, vocab_size: int,
                         past=0) -> None:
    """The decoder's inputs: at most one of decoder_input_ids and decoder_inputs_embeds, ids in the
    vocabulary, a 0/1 mask over the `past` cached tokens and the new ones."""
    if decoder_input_ids is not None and decoder_inputs_embeds is not None:
        raise ValueError(
            "Pass decoder_input_ids or decoder_inputs_embeds, not both: the decoder would read one and silently "
            "ignore the other."
        )
    if decoder_input_ids is not None:
        check_batch(decoder_input_ids, "decoder_input_ids")
        check_token_ids(decoder_input_ids, vocab_size)
    inputs = ("decoder_input_ids", decoder_input_ids) if decoder_input_ids is not None else \
        ("decoder_inputs_embeds", decoder_inputs_embeds)
    check_mask_shape(decoder_attention_mask, "decoder_attention_mask", *inputs, past=past)
    check_attention_mask(decoder_attention_mask, "decoder_attention_mask")


def check_mask_shape(mask, name: str, inputs_name: str, inputs, past=0) -> None:
    """A 2-D padding mask holds one entry per token: (batch, past + length) for inputs (batch, length, ...)
    after `past` cached tokens. A 4-D mask is ready-made (masking.py) and passes as it is."""
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2 or not isinstance(inputs, torch.Tensor):
        return
    if isinstance(past, torch.Tensor):  # a static cache counts in a 0-d tensor, which compiled code cannot read
        if torch.compiler.is_compiling():
            return
        past = int(past)
    expected = (inputs.shape[0], past + inputs.shape[1])
    if tuple(mask.shape) != expected:
        cached = f" after {past} cached tokens, so the mask needs {expected}" if past else ""
        raise ValueError(f"{name} has shape {tuple(mask.shape)} but {inputs_name} has {tuple(inputs.shape[:2])}"
                         f"{cached}; pass one 0/1 entry per token.")


def check_token_ids(ids: torch.Tensor, vocab_size: int) -> None:
    """Every id within the vocabulary (§3.4's embedding has vocab_size rows)."""
    # Reading two numbers back would split a torch.compile graph; compiled code skips the check (the
    # embedding lookup itself still rejects an out-of-range id).
    if ids.numel() == 0 or torch.compiler.is_compiling():
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"Token id {low if low < 0 else high} is outside the vocabulary (vocab_size={vocab_size}). "
            "Use the tokenizer saved with this model, or check config.vocab_size."
        )


def check_attention_mask(mask, name: str) -> None:
    """A (batch, length) padding mask holds 1 (or True) for each real token and 0 for padding.

    An additive mask (0 = attend, −inf or a large negative number = hide), as some libraries use,
    would be read the other way round: its 0s taken for padding, the padding attended to. Such a mask
    holds values other than 0 and 1, or (without padding) only 0s; both are refused. Masks of four
    dimensions are the ready-made additive kind (masking.py) and pass as they are.
    """
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2 or mask.dtype == torch.bool or mask.numel() == 0:
        return
    if torch.compiler.is_compiling():
        return  # reading values back would split a compiled graph; eager calls have checked the same code path
    odd = (mask != 0) & (mask != 1)
    if bool(odd.any()):
        value = mask[odd][0].item()
        raise ValueError(
            f"{name} holds values other than 0 and 1 (e.g. {value}): it looks like an additive mask (0 = attend, "
            f"-inf = hide), which this model would read the other way round. Pass 1 for each real token and 0 for "
            f"padding, e.g. {name}=({name} == 0).long() for an additive one."
        )
    if not bool(mask.any()):  # one fully padded row is allowed (masking.py keeps it finite); all of them is not
        raise ValueError(
            f"{name} is 0 everywhere: no sentence of the batch would have a token to attend to. The mask holds 1 for "
            f"each real token and 0 for padding; an additive mask (0 = attend) without padding looks like this, "
            f"convert it with {name}=({name} == 0).long()."
        )


def check_labels(labels, input_ids=None, inputs_embeds=None, encoder_outputs=None, decoder_input_ids=None,
                 decoder_inputs_embeds=None) -> None:
    """labels: (batch, length) integer ids, one row per source sentence, and shaped like the decoder
    inputs when those are given too. A batch of another size would be broadcast against the source
    (a loss over the wrong pairs) or fail deep inside attention."""
    if labels is None:
        return
    if not isinstance(labels, torch.Tensor) or labels.dim() != 2:
        shape = tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__
        raise ValueError(f"labels must be a (batch, length) tensor of token ids, got {shape}.")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"labels must hold integer token ids (-100 to ignore a position), got dtype {labels.dtype}.")
    source = input_ids if input_ids is not None else inputs_embeds
    if source is None and encoder_outputs is not None:
        source = encoder_outputs[0]
    if isinstance(source, torch.Tensor) and source.dim() >= 2 and source.shape[0] != labels.shape[0]:
        raise ValueError(
            f"labels holds {labels.shape[0]} sentences but the source batch holds {source.shape[0]}; give one row of "
            "labels per source sentence, in the same order."
        )
    decoder = decoder_input_ids if decoder_input_ids is not None else decoder_inputs_embeds
    if isinstance(decoder, torch.Tensor) and tuple(decoder.shape[:2]) != tuple(labels.shape):
        raise ValueError(
            f"labels has shape {tuple(labels.shape)} but the decoder inputs have {tuple(decoder.shape[:2])}; each "
            "position's label is the token that follows its decoder input. Pass labels alone (the decoder inputs "
            "are made from them) or both of the same shape."
        )


def check_positions(embed_positions, num_positions: int) -> None:
    """Positions 0 … num_positions−1 must exist: the §3.5 sinusoids extend their table (they extrapolate);
    a learned table (Table 3 row E) cannot, so a longer input is an error."""
    if isinstance(embed_positions, SinusoidalPositionalEncoding):
        embed_positions.extend(num_positions)
    elif num_positions > embed_positions.num_embeddings:
        raise ValueError(
            f"Sequence position {num_positions - 1} is beyond max_position_embeddings={embed_positions.num_embeddings} "
            "of the learned positional embeddings (Table 3 row E cannot extrapolate). Shorten the input or use "
            "positional_encoding='sinusoidal'."
        )
