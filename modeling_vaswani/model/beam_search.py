"""§6.1 — beam search as the paper decodes: beam size k, GNMT's length penalty, "terminate early when possible".

"We used beam search with a beam size of 4 and length penalty α = 0.6 [38]. ... We set the maximum
output length during inference to input length + 50, but terminate early when possible." (§6.1)

[38] is GNMT: score(Y) = log P(Y | X) / lp(Y), lp(Y) = ((5 + |Y|) / 6)^α, |Y| counting the generated
tokens, </s> included. The paper's models were decoded by tensor2tensor's beam search, which this
follows. One step, for every sentence of the batch at once:

1. each of the k live hypotheses is extended by every token (log P adds the token's log-probability);
2. the 2k most probable candidates are kept, so that k remain even if k of them end here;
3. candidates that end in </s> are finished: scored with lp, they compete for k finished places;
4. the k most probable candidates that did not end are the next step's live hypotheses;
5. "terminate early": log P only falls as a hypothesis grows and lp only grows (α > 0), so no live
   hypothesis can score more than best live log P / lp(max_length), max_length the §6.1 limit. A
   sentence is done once the finished hypothesis it returns (the n-th best for num_return_sequences=n)
   scores more than that bound (tensor2tensor compares its worst finished one: same output, later);
6. the best finished hypothesis is the translation (the best live ones if fewer finished by the limit).

Implementation (not from the paper): `GenerationMixin.generate` runs the encoder, repeats it for the k
beams and prepares the key/value cache; each step feeds the decoder the tokens its cache lacks and
reorders the cache after the chosen parents. Done sentences leave the batch (twice as fast on Multi30k)
unless a dict is returned or logits processors run. `beam_trace=[]` records each step (beam_trace.py).
"""

import torch
from transformers.generation import GenerateBeamEncoderDecoderOutput
from transformers.generation.stopping_criteria import MaxLengthCriteria, StoppingCriteriaList
from transformers.modeling_outputs import BaseModelOutput

from .beam_trace import record
from .generation_cache import new_cache
from .masking import attention_dtype, padding_mask

EXCLUDED = -1.0e9  # the score of empty places and excluded candidates (as transformers' beam search)


def gnmt_length_penalty(length, alpha: float):
    """lp(Y) = ((5 + |Y|) / 6)^α (§6.1, [38]); 1 for a one-token output."""
    return ((5 + length) / 6) ** alpha


@torch.no_grad()
def beam_search(model, input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus=False,
                beam_trace=None, **model_kwargs):
    """`input_ids` (B·k, prompt): the decoder's start tokens (or prompt), repeated for the k beams. Returns
    the n = num_return_sequences best hypotheses of every sentence, best first: (B·n, length), or with
    return_dict_in_generate a GenerateBeamEncoderDecoderOutput (sequences_scores = score(Y))."""
    config = generation_config
    k, alpha, n, return_dict = config.num_beams, config.length_penalty, config.num_return_sequences or 1, \
        config.return_dict_in_generate
    if synced_gpus or return_dict and (config.output_attentions or config.output_hidden_states or config.output_logits):
        raise ValueError("The paper's beam search returns sequences and scores, in one process; pass "
                         "**TRANSFORMERS_BEAM_SEARCH (generation.py) for transformers' own.")
    eos = config._eos_token_tensor
    fill = config._pad_token_tensor or eos[0] if eos is not None else -1  # after </s>, as transformers (pad 0: unset)
    encoder_outputs, memory_mask = model_kwargs.pop("encoder_outputs"), model_kwargs.pop("attention_mask", None)
    decoder_mask = model_kwargs.pop("decoder_attention_mask", None)
    cache = model_kwargs.pop("cache", None) if model_kwargs.pop("use_cache", True) else None
    # labels: Seq2SeqTrainer's evaluation hands generate() the whole batch.
    if set(model_kwargs) - {"output_attentions", "output_hidden_states", "labels"}:
        raise ValueError(f"The paper's beam search does not take {sorted(model_kwargs)}; "
                         "pass **TRANSFORMERS_BEAM_SEARCH.")

    device, (rows, prompt), max_length = input_ids.device, input_ids.shape, config.max_length
    batch, limit = rows // k, max_length - prompt  # sentences; generated tokens at most
    ends_at = StoppingCriteriaList([c for c in stopping_criteria if not isinstance(c, MaxLengthCriteria)])
    width = max(2, 1 + (0 if eos is None else eos.shape[0])) * k  # candidates kept per sentence and step
    past = 0 if cache is None else int(cache.get_seq_length())  # decoder tokens already in the cache
    if past and cache.self_attention_cache.layers[0].keys.shape[0] == batch:
        cache.batch_repeat_interleave(k)  # one row per sentence (e.g. greedy search's cache): one per beam
    if decoder_mask is not None:
        decoder_mask = torch.nn.functional.pad(decoder_mask, (0, limit), value=1)  # (B·k, max_length)
    if memory_mask is not None:
        # §3.2.3's padding mask for encoder–decoder attention, (B·k, 1, 1, S), built once for every step.
        memory_mask = padding_mask(memory_mask, attention_dtype(model.model.decoder.embed_tokens.weight))
    compact = not return_dict and not logits_processor and (cache is None or not cache.is_compileable)

    # The active sentences: row i is sentence[i]. Sequences (A, k, max_length), the rest (A, k).
    sentence = torch.arange(batch, device=device)
    seq = torch.full((batch, k, max_length), fill, dtype=torch.long, device=device)
    seq[:, :, :prompt] = input_ids.view(batch, k, prompt)
    logp = torch.zeros(batch, k, device=device)
    logp[:, 1:] = EXCLUDED  # the k beams start identical: only the first grows at step 1
    # The finished hypotheses, best first (length 0: an empty place); `out`: the n returned ones per sentence.
    fin = dict(score=torch.full_like(logp, EXCLUDED), seq=seq.clone(), logp=torch.zeros_like(logp),
               length=torch.zeros_like(logp, dtype=torch.long))
    out = dict(score=fin["score"][:, :n].clone(), seq=seq[:, :n].clone(), length=fin["length"][:, :n].clone())
    done, scores = torch.zeros(batch, dtype=torch.bool, device=device), ()
    for step in range(1, limit + 1):
        active, cur = sentence.shape[0], prompt + step - 1  # cur: tokens so far
        flat = seq.view(active * k, max_length)
        outputs = model(decoder_input_ids=flat[:, past:cur], encoder_outputs=encoder_outputs, attention_mask=memory_mask,
                        decoder_attention_mask=None if decoder_mask is None else decoder_mask[:, :cur],
                        cache=cache, use_cache=cache is not None, return_dict=True)
        past = cur if cache is not None else 0
        log_probs = logits_processor(flat[:, :cur], torch.log_softmax(outputs.logits[:, -1].float(), dim=-1))
        scores += (log_probs.clone(),) if return_dict and config.output_scores else ()
        del outputs

        # Steps 1–2: every live hypothesis extended by every token; the `width` most probable candidates.
        vocab = log_probs.shape[-1]
        total = (log_probs.view(active, k, vocab) + logp[:, :, None]).view(active, k * vocab)
        cand_logp, index = torch.topk(total, width)  # (A, 2k)
        parent = index // vocab
        cand = torch.take_along_dim(seq, parent[..., None], dim=1)  # (A, 2k, max_length)
        cand[:, :, cur] = index % vocab
        ends = ends_at(cand.view(active * width, max_length)[:, :cur + 1], None).view(active, width)

        # Step 4: the k most probable candidates that did not end live on.
        alive = cand_logp + ends * EXCLUDED
        chosen = torch.topk(alive, k).indices
        seq, logp = torch.take_along_dim(cand, chosen[..., None], dim=1), torch.take_along_dim(alive, chosen, dim=1)
        beam_idx = (torch.take_along_dim(parent, chosen, dim=1) + torch.arange(active, device=device)[:, None] * k)

        # Step 3: candidates that end (in sentences not done) are scored and may join the finished.
        finishing = ends & ~done[:, None]
        if bool(finishing.any()):
            score = cand_logp / gnmt_length_penalty(step, alpha) + (~finishing) * EXCLUDED
            new = dict(score=score, seq=cand, logp=cand_logp, length=finishing * step)
            merged = {name: torch.cat((fin[name], new[name]), dim=1) for name in fin}
            best = torch.topk(merged["score"], k).indices
            fin = {name: torch.take_along_dim(t, best if t.dim() == 2 else best[..., None], dim=1)
                   for name, t in merged.items()}

        # Step 5: done once the hypothesis to return beats the bound (or at the limit).
        bound = logp[:, 0] / gnmt_length_penalty(limit if alpha > 0 else step, alpha)
        done = done | ((fin["length"][:, n - 1] > 0) & (fin["score"][:, n - 1] > bound))
        if beam_trace is not None:
            record(beam_trace, step, batch, sentence, seq, logp, fin, bound, done | (step == limit), prompt,
                   lambda length: gnmt_length_penalty(length, alpha))
        if step == limit or bool(done.all()):
            break
        if compact and bool(done.any()):  # done sentences leave the batch, and their rows every tensor
            _store(out, sentence[done], {name: t[done] for name, t in fin.items()}, seq[done], logp[done], step, alpha)
            stay = ~done
            kept = (stay.nonzero()[:, 0, None] * k + torch.arange(k, device=device)).view(-1)  # (A'·k,) rows
            sentence, seq, logp, done = sentence[stay], seq[stay], logp[stay], done[stay]
            fin = {name: t[stay] for name, t in fin.items()}
            encoder_outputs = BaseModelOutput(last_hidden_state=encoder_outputs.last_hidden_state[kept])
            memory_mask, decoder_mask = (None if m is None else m[kept] for m in (memory_mask, decoder_mask))
            if cache is not None:
                cache.reorder_cache(beam_idx[stay].view(-1))  # both caches: the stayers' rows, parents followed
        elif cache is not None:
            getattr(cache, "self_attention_cache", cache).reorder_cache(beam_idx.view(-1))

    _store(out, sentence, fin, seq, logp, step, alpha)  # step 6
    sequences = out["seq"].flatten(0, 1)[:, :prompt + int(out["length"].max())]  # (B·n, prompt + longest)
    if not return_dict:
        return sequences
    if cache is not None:  # for generate() to go on from: the returned sequences but their last token
        first_n = (torch.arange(batch, device=device)[:, None] * k + torch.arange(n, device=device)).view(-1)
        cache = new_cache(model.config)
        model.model(encoder_outputs=BaseModelOutput(last_hidden_state=encoder_outputs.last_hidden_state[first_n]),
                    attention_mask=None if memory_mask is None else memory_mask[first_n],
                    decoder_input_ids=sequences[:, :-1], cache=cache, use_cache=True, decoder_attention_mask=None
                    if decoder_mask is None else decoder_mask[first_n, :sequences.shape[1] - 1])
    return GenerateBeamEncoderDecoderOutput(sequences=sequences, scores=scores or None, cache=cache,
                                            sequences_scores=out["score"].flatten() if config.output_scores else None)


def _store(out, sentences, fin, seq, logp, step, alpha):
    """Step 6 for `sentences`: their n best finished hypotheses, the best live ones where fewer finished."""
    n = out["score"].shape[1]
    real = fin["length"][:, :n] > 0
    live = (torch.arange(n, device=real.device) - real.sum(dim=1, keepdim=True)).clamp(min=0)  # (A, n)
    live_score = torch.take_along_dim(logp, live, dim=1) / gnmt_length_penalty(step, alpha)
    out["score"][sentences] = torch.where(real, fin["score"][:, :n], live_score)
    out["seq"][sentences] = torch.where(real[..., None], fin["seq"][:, :n], torch.take_along_dim(seq, live[..., None], 1))
    out["length"][sentences] = torch.where(real, fin["length"][:, :n], step)

