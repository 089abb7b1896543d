"""§3: "At each step the model is auto-regressive, consuming the previously generated symbols as
additional input when generating the next" — greedy search as a plain loop, without a cache (O(n²)),
the reference `model.generate(num_beams=1)` is checked against; it returns the same ids.
"""

import torch

from ..model.generation import max_new_tokens_for


@torch.no_grad()
def greedy_decode(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                  max_new_tokens: int | None = None, eos_token_id: int | None = None) -> torch.Tensor:
    """Greedy decoding without a cache. Returns (B, 1 + generated) ids starting with the start token.
    `eos_token_id` replaces the config's (-1, no token: run the full length, as a benchmark does)."""
    config = model.config
    eos_token_id = config.eos_token_id if eos_token_id is None else eos_token_id
    if max_new_tokens is None:
        max_new_tokens = max_new_tokens_for(model.generation_config, input_ids.shape[1])  # §6.1
    encoder_output = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    batch = input_ids.shape[0]
    output = torch.full((batch, 1), config.decoder_start_token_id, dtype=torch.long, device=input_ids.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=input_ids.device)
    for _ in range(max_new_tokens):
        logits = model(
            encoder_outputs=(encoder_output,), attention_mask=attention_mask, decoder_input_ids=output, use_cache=False
        ).logits  # the decoder re-reads the whole prefix: (B, t, V)
        next_token = logits[:, -1].argmax(dim=-1)  # most likely next symbol
        next_token = next_token.masked_fill(finished, config.pad_token_id)  # finished rows only pad
        output = torch.cat([output, next_token[:, None]], dim=1)
        finished |= next_token == eos_token_id
        if finished.all():  # §6.1: "terminating early when possible"
            break
    return output
