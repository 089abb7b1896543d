"""Checks on the tensors handed to the model and to §5.4's loss (Hugging Face glue, not from the paper): a
malformed batch is refused at the model's entry, naming the argument, not deep inside attention with a shape
error; the loss functions (label_smoothing.py, fast_loss.py) are public, so they check their own arguments."""

import torch

from .positional_encoding import SinusoidalPositionalEncoding


def _holds_ids(tensor: torch.Tensor) -> bool:
    return not (tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool)


def check_batch(tensor, name: str, is_ids: bool = True) -> None:
    """Raise ValueError unless `tensor` is a non-empty (batch, length) id tensor (or embeddings)."""
    if tensor is None:
        raise ValueError("Pass input_ids (B, S) or inputs_embeds (B, S, d_model) for the encoder.")
    if is_ids and tensor.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, length), got {tuple(tensor.shape)} (one sentence: ids[None]).")
    if is_ids and not _holds_ids(tensor):
        raise ValueError(f"{name} must hold integer token ids, got dtype {tensor.dtype}; use torch.long.")
    if tensor.shape[0] == 0:
        raise ValueError(f"{name} holds an empty batch (0 sentences); pass at least one sentence.")
    if tensor.dim() > 1 and tensor.shape[1] == 0:
        raise ValueError(f"{name} has sequences of length 0; every one needs a token (e.g. </s>).")


def check_inputs(prefix: str, ids, embeds, mask, vocab_size: int, past=0) -> None:
    """One stack's inputs, `prefix` "" (encoder) or "decoder_": not both ids and embeddings, ids in the
    vocabulary, a 0/1 mask over the `past` cached tokens and the new ones. The encoder needs ids or
    embeddings; the decoder stack says so itself (it may be called with labels only)."""
    ids_name, embeds_name, mask_name = f"{prefix}input_ids", f"{prefix}inputs_embeds", f"{prefix}attention_mask"
    if ids is not None and embeds is not None:
        raise ValueError(f"Pass {ids_name} or {embeds_name}, not both: the {prefix.rstrip('_') or 'encoder'} would "
                         "read one and silently ignore the other.")
    if ids is not None:
        check_batch(ids, ids_name)
        # Reading two numbers back would split a torch.compile graph; the embedding lookup still refuses there.
        if not torch.compiler.is_compiling():
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= vocab_size:  # §3.4's embedding has vocab_size rows
                raise ValueError(f"Token id {low if low < 0 else high} is outside the vocabulary (vocab_size="
                                 f"{vocab_size}): use the tokenizer saved with this model.")
    elif not prefix:
        check_batch(embeds, embeds_name, is_ids=False)
    inputs_name, inputs = (ids_name, ids) if ids is not None else (embeds_name, embeds)
    if isinstance(past, torch.Tensor) and not torch.compiler.is_compiling():
        past = int(past)  # a static cache counts in a 0-d tensor, which compiled code cannot read back
    if isinstance(mask, torch.Tensor) and mask.dim() == 2 and isinstance(inputs, torch.Tensor) and isinstance(past, int):
        expected = (inputs.shape[0], past + inputs.shape[1])  # one entry per cached or new token
        if tuple(mask.shape) != expected:
            cached = f" after {past} cached tokens, so the mask needs {expected}" if past else ""
            raise ValueError(f"{mask_name} has shape {tuple(mask.shape)} but {inputs_name} has {tuple(inputs.shape[:2])}"
                             f"{cached}.")
    check_attention_mask(mask, mask_name)


def check_attention_mask(mask, name: str) -> None:
    """A (batch, length) padding mask holds 1 (or True) per real token, 0 per padding. An additive one (0 = attend,
    −inf = hide) would be read the other way round: values other than 0 and 1, or only 0s, are refused."""
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2 or mask.dtype == torch.bool or mask.numel() == 0:
        return
    if torch.compiler.is_compiling():
        return  # reading values back would split a compiled graph; eager calls have checked the same code path
    odd = (mask != 0) & (mask != 1)
    what = f"holds values other than 0 and 1 (e.g. {mask[odd][0].item()})" if bool(odd.any()) else (
        "is 0 everywhere" if not bool(mask.any()) else None)  # one fully padded row is allowed (masking.py)
    if what:
        raise ValueError(f"{name} {what}: it looks like an additive mask (0 = attend), which this model would read "
                         f"the other way round; pass 1 per real token and 0 per padding, e.g. {name}=({name} == 0).long().")


def check_labels(labels, input_ids=None, inputs_embeds=None, encoder_outputs=None, decoder_input_ids=None,
                 decoder_inputs_embeds=None) -> None:
    """labels: (batch, length) integer ids, one row per source sentence (another count would be broadcast into
    a loss over the wrong pairs), shaped like the decoder inputs when those are given too."""
    if labels is None:
        return
    if not isinstance(labels, torch.Tensor) or labels.dim() != 2:
        shape = tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__
        raise ValueError(f"labels must be a (batch, length) tensor of token ids, got {shape}.")
    if not _holds_ids(labels):
        raise ValueError(f"labels must hold integer token ids (-100 to ignore a position), got dtype {labels.dtype}.")
    source = input_ids if input_ids is not None else inputs_embeds
    if source is None and encoder_outputs is not None:
        source = encoder_outputs[0]
    if isinstance(source, torch.Tensor) and source.dim() >= 2 and source.shape[0] != labels.shape[0]:
        raise ValueError(f"labels holds {labels.shape[0]} sentences but the source batch holds {source.shape[0]}.")
    decoder = decoder_input_ids if decoder_input_ids is not None else decoder_inputs_embeds
    if isinstance(decoder, torch.Tensor) and tuple(decoder.shape[:2]) != tuple(labels.shape):
        raise ValueError(f"labels has shape {tuple(labels.shape)} but the decoder inputs have {tuple(decoder.shape[:2])}"
                         "; pass labels alone (the decoder inputs are made from them) or both of the same shape.")


def check_positions(embed_positions, num_positions: int) -> None:
    """Positions 0 … num_positions−1 must exist: §3.5's sinusoids extend their table (they extrapolate);
    a learned table (Table 3 row E) cannot, so a longer input is an error."""
    if isinstance(embed_positions, SinusoidalPositionalEncoding):
        embed_positions.extend(num_positions)
    elif num_positions > embed_positions.num_embeddings:
        raise ValueError(f"Sequence position {num_positions - 1} is beyond max_position_embeddings="
                         f"{embed_positions.num_embeddings} of learned positions (Table 3 row E); use positional_encoding='sinusoidal'.")


_REDUCTIONS = ("mean", "sum", "none")


def check_epsilon(epsilon) -> float:
    """§5.4's ε_ls as a float in [0, 1)."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0.0 <= epsilon < 1.0:  # NaN too
        raise ValueError(f"epsilon must be a number in [0, 1) (the paper uses 0.1), got {epsilon!r}.")
    return float(epsilon)


def check_loss_arguments(logits, labels, epsilon, ignore_index, reduction):
    """The checks both forms of the loss make: (ε as a float, the positions kept, labels with id 0 at the
    ignored positions, so that gather works; `reduce_loss` zeroes their loss)."""
    epsilon = check_epsilon(epsilon)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}.")
    if logits.dim() < 1 or logits.shape[:-1] != labels.shape:
        raise ValueError(
            f"logits must have shape (..., V) and labels the same shape without V; got logits "
            f"{tuple(logits.shape)} and labels {tuple(labels.shape)}."
        )
    if not _holds_ids(labels):
        raise ValueError(f"labels must hold integer token ids, got dtype {labels.dtype}.")
    vocab_size = logits.shape[-1]
    if epsilon > 0 and vocab_size < 2:
        raise ValueError(f"label smoothing needs a vocabulary of at least 2 tokens, got V = {vocab_size}.")

    keep = check_label_ids(labels, vocab_size, ignore_index)
    return epsilon, keep, torch.where(keep, labels, torch.zeros_like(labels)).long()


def check_label_ids(labels: torch.Tensor, vocab_size: int, ignore_index: int = -100) -> torch.Tensor:
    """Every label a token id in [0, vocab_size) or `ignore_index`, for every form of the loss (also
    training/chunked_loss.py); returns the positions kept (labels ≠ ignore_index)."""
    keep = labels != ignore_index
    bad = keep & ((labels < 0) | (labels >= vocab_size))
    # Branching on a tensor's value would split a torch.compile graph; compiled code skips the check.
    if not torch.compiler.is_compiling() and bad.any():
        raise ValueError(f"labels must be token ids in [0, {vocab_size}) or ignore_index={ignore_index}; "
                         f"found {labels[bad][0].item()}.")
    return keep
