"""§6.1 — beam search as the paper decodes: beam size k, GNMT's length penalty, and "terminate early
when possible".

"We used beam search with a beam size of 4 and length penalty α = 0.6 [38]. ... We set the maximum
output length during inference to input length + 50, but terminate early when possible." (§6.1)

[38] is GNMT (Wu et al., 2016), whose length penalty divides a hypothesis' log-probability by

    lp(Y) = ((5 + |Y|) / 6)^α,          score(Y) = log P(Y | X) / lp(Y),

where |Y| counts the generated tokens, </s> included. The paper's models were decoded by
tensor2tensor's beam search, which this module follows. One step, for every sentence of the batch at
once:

1. every one of the k live ("alive") hypotheses is extended by every vocabulary token; a candidate's
   log P(Y | X) is its parent's plus the new token's log-probability;
2. the 2k most probable candidates are kept, enough that k remain even if k of them end here;
3. candidates that end in </s> are finished hypotheses: scored with lp, they compete for the k
   places of the sentence's finished list;
4. the k most probable candidates that did not end are the live hypotheses of the next step;
5. "terminate early when possible": log P(Y | X) only falls as a hypothesis grows, and lp only grows
   with |Y| (α > 0), so no continuation of the live hypotheses can score more than

       best_alive_log_prob / lp(max_length)

   (max_length: the §6.1 limit, input length + 50 generated tokens). A sentence is done once the
   finished hypothesis it will return scores more than that bound (nothing can displace it any
   more), or at the length limit;
6. the best finished hypothesis is the translation (a live one if none finished by the limit).

tensor2tensor compares the bound with the worst hypothesis of its finished list; comparing it with
the one returned (the best; the n-th best for `num_return_sequences=n`) returns exactly the same
hypotheses, and stops sooner.

Two settings choose the formula and the rule, so that the search can also be Hugging Face's:

- `length_penalty_formula`: "gnmt" (the paper's lp above) or "hf" (transformers': |Y|^α);
- `beam_termination`: "bound" (step 5 above, the paper's) or "early_stopping" (transformers' rule,
  chosen by the generation config's `early_stopping`: True, a sentence is done once k hypotheses
  finished; False, once the best live hypothesis, scored at its current length, cannot beat the
  worst finished one; "never", the bound at max_length). Under this rule only the k best of the
  2k candidates may finish (step 3), and hypotheses cut by the length limit count as finished.

With "hf" and "early_stopping" the search returns exactly the tokens and scores of transformers'
`GenerationMixin._beam_search`; see `tests/model/test_beam_search.py`.

Implementation (not from the paper): `GenerationMixin.generate` runs the encoder once, repeats its
output for the k beams and builds the decoder's key/value cache (`EncoderDecoderCache`); the
decoding method here (`decode`) is handed to it as `custom_generate`. Each step feeds the decoder
one new token per hypothesis and reorders the self-attention cache to follow the chosen parents, as
transformers' beam search does (`reorder_cache`); the encoder–decoder keys and values are the same
for the k beams of a sentence and stay where they are. Sentences that are done leave the batch
(their rows leave the cache), so the rest decode faster.

This file depends on torch and transformers only: `save_pretrained` also saves it as
`custom_generate/generate.py`, the file transformers loads as a model's `generate` when a saved
folder is loaded with `trust_remote_code=True`; `generate` at the bottom is that entry point.
"""

import functools
import inspect

import torch
from transformers import GenerationMixin
from transformers.cache_utils import DynamicCache, DynamicLayer, EncoderDecoderCache
from transformers.generation import GenerateBeamEncoderDecoderOutput
from transformers.generation import logits_process
from transformers.generation.configuration_utils import GenerationMode
from transformers.generation.stopping_criteria import EosTokenCriteria, MaxLengthCriteria, StoppingCriteriaList
from transformers.generation.utils import GENERATION_MODES_MAPPING

SETTINGS = ("length_penalty_formula", "beam_termination")
BEAM_TERMINATIONS = ("bound", "early_stopping")
# A score no real hypothesis reaches: marks empty places and excluded candidates (as transformers does).
EXCLUDED = -1.0e9
# transformers 5.24 names the generation cache `cache`, earlier 5.x releases `past_key_values`.
_OUTPUT_CACHE_FIELD = "cache" if "cache" in GenerateBeamEncoderDecoderOutput.__dataclass_fields__ \
    else "past_key_values"


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """GNMT's lp(Y) = ((5 + |Y|) / 6)^α, the paper's (§6.1, [38]); 1 for a one-token output."""
    return ((5 + length) / 6) ** alpha


def hf_length_penalty(length: int, alpha: float) -> float:
    """transformers' length penalty |Y|^α."""
    return length ** alpha


LENGTH_PENALTIES = {"gnmt": gnmt_length_penalty, "hf": hf_length_penalty}


def sequence_score(log_prob: float, length: int, alpha: float, formula: str = "gnmt") -> float:
    """score(Y) = log P(Y | X) / lp(Y), for a hypothesis of `length` generated tokens (</s> included)."""
    return log_prob / LENGTH_PENALTIES[formula](length, alpha)


# Logits processors that treat every row on its own; with any other, no sentence leaves the batch
# early (a processor may keep per-row state, or know which row belongs to which sentence).
_ROW_WISE_PROCESSORS = tuple(getattr(logits_process, name) for name in (
    "MinLengthLogitsProcessor", "MinNewTokensLengthLogitsProcessor", "NoRepeatNGramLogitsProcessor",
    "NoBadWordsLogitsProcessor", "SequenceBiasLogitsProcessor", "RepetitionPenaltyLogitsProcessor",
    "SuppressTokensLogitsProcessor", "SuppressTokensAtBeginLogitsProcessor", "ForcedBOSTokenLogitsProcessor",
    "ForcedEOSTokenLogitsProcessor", "InfNanRemoveLogitsProcessor", "ExponentialDecayLengthPenalty",
    "TemperatureLogitsWarper",
) if hasattr(logits_process, name))


@torch.no_grad()
def beam_search(model, input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus=False,
                length_penalty_formula=None, beam_termination=None, beam_trace=None, **model_kwargs):
    """Beam search over a batch, with the cache and encoder output `GenerationMixin.generate` prepared.

    `input_ids` (B·k, prompt length) are the decoder's start tokens, repeated for the k beams;
    `model_kwargs` hold `encoder_outputs`, `attention_mask` and `cache` likewise repeated. The
    settings default to transformers' ("hf", "early_stopping"). Returns the `num_return_sequences`
    best hypotheses of every sentence, best first: a tensor (B·n, length), or with
    `return_dict_in_generate` a `GenerateBeamEncoderDecoderOutput` (`sequences_scores` when
    `output_scores`, like transformers).
    """
    formula = length_penalty_formula or "hf"
    termination = beam_termination or "early_stopping"
    check_settings(formula, termination)
    if synced_gpus:
        raise NotImplementedError("This beam search does not run under synced_gpus (one process per device).")
    length_penalty = LENGTH_PENALTIES[formula]
    paper_rule = termination == "bound"
    config = generation_config
    k, alpha, early_stopping = config.num_beams, config.length_penalty, config.early_stopping
    n_return = config.num_return_sequences or 1
    max_length = config.max_length
    eos, pad = config._eos_token_tensor, config._pad_token_tensor
    # What transformers' beam search writes after a hypothesis' end (a pad id of 0 counts as unset there).
    fill = pad or eos[0] if eos is not None else -1
    return_dict = config.return_dict_in_generate
    keep = {name: return_dict and bool(getattr(config, name)) for name in (
        "output_scores", "output_logits", "output_attentions", "output_hidden_states")}

    encoder_outputs = model_kwargs.pop("encoder_outputs")
    attention_mask = model_kwargs.pop("attention_mask", None)
    use_cache = model_kwargs.pop("use_cache", True)
    cache = model_kwargs.pop("cache", None) or model_kwargs.pop("past_key_values", None)
    forward_flags = {name: model_kwargs.pop(name) for name in ("output_attentions", "output_hidden_states")
                     if name in model_kwargs}
    model_kwargs.pop("labels", None)  # Seq2SeqTrainer's evaluation hands generate the whole batch
    if model_kwargs:
        raise ValueError(f"This beam search does not take {sorted(model_kwargs)}; pass beam_termination=None "
                         "for transformers' own beam search.")
    if not use_cache:
        cache = None
    cache_argument = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    # The encoder–decoder attention mask, built once for all steps where the model can (ours can).
    build_mask = getattr(model, "encoder_decoder_attention_mask", None)
    memory_mask = build_mask(attention_mask) if build_mask is not None and attention_mask is not None \
        else attention_mask

    # Stopping criteria: the length limit is the search's own business; the rest (</s>, stop strings)
    # say which candidates end. A list of </s> criteria only is checked on the new tokens directly.
    length_limits = [c.max_length for c in stopping_criteria if isinstance(c, MaxLengthCriteria)]
    max_length = min([max_length, *length_limits])
    end_criteria = StoppingCriteriaList([c for c in stopping_criteria if not isinstance(c, MaxLengthCriteria)])
    end_tokens = (torch.cat([c.eos_token_id.to(input_ids.device).view(-1) for c in end_criteria])
                  if all(isinstance(c, EosTokenCriteria) for c in end_criteria) else None)

    device = input_ids.device
    batch, prompt = input_ids.shape[0] // k, input_ids.shape[1]
    width = max(2, 1 + (0 if eos is None else eos.shape[0])) * k  # candidates kept per sentence and step
    may_finish = torch.arange(width, device=device) < k  # transformers' rule: only the k best candidates
    # Sentences leave the batch when done, unless something needs every row at every step.
    compact = (not any(keep.values()) and all(isinstance(p, _ROW_WISE_PROCESSORS) for p in logits_processor)
               and (cache is None or _is_dynamic(cache)))

    # ---- state of the active sentences: row i of each tensor is sentence `sentence[i]` ----------
    sentence = torch.arange(batch, device=device)
    alive_seq = torch.full((batch, k, max_length), fill, dtype=torch.long, device=device)
    alive_seq[:, :, :prompt] = input_ids.view(batch, k, prompt)
    alive_logp = torch.zeros(batch, k, device=device)
    alive_logp[:, 1:] = EXCLUDED  # the k beams start identical: only the first one grows at step 1
    finished = _Finished(batch, k, max_length, fill, device)
    track_beams = return_dict  # which beam each token came from (transformers' `beam_indices`)
    alive_beams = torch.full((batch, k, max_length - prompt), -1, dtype=torch.int32, device=device)
    open_rule = torch.ones(batch, dtype=torch.bool, device=device)  # transformers: may still improve
    frozen = torch.zeros(batch, dtype=torch.bool, device=device)  # done, but still in the batch
    results = _Results(batch, n_return, max_length, fill, device)
    left_open, left_all_full = False, True  # transformers' flags of sentences that left
    collected = {name: () for name in ("scores", "logits", "decoder_attentions", "cross_attentions",
                                       "decoder_hidden_states")}

    cur_len = prompt
    while True:
        active = sentence.shape[0]
        # a. One decoder step for every live hypothesis (the whole prompt at the first step).
        if cache is None or cur_len == prompt:
            tokens = alive_seq.view(active * k, max_length)[:, :cur_len]
        else:
            tokens = alive_seq.view(active * k, max_length)[:, cur_len - 1:cur_len]
        outputs = model(decoder_input_ids=tokens, encoder_outputs=encoder_outputs, attention_mask=memory_mask,
                        use_cache=cache is not None, return_dict=True, **{cache_argument: cache}, **forward_flags)
        # No copy: log_softmax writes a new tensor, and _collect clones what it keeps.
        logits = outputs.logits[:, -1, :].to(dtype=torch.float32, device=device)
        log_probs = torch.nn.functional.log_softmax(logits, dim=-1)
        log_probs = logits_processor(alive_seq.view(active * k, max_length)[:, :cur_len], log_probs)
        _collect(collected, keep, outputs, logits, log_probs)
        del outputs

        # b. Step 1–2: extend every live hypothesis by every token; keep the `width` most probable.
        vocab = log_probs.shape[-1]
        total = (log_probs.view(active, k, vocab) + alive_logp[:, :, None]).view(active, k * vocab)
        cand_logp, flat = torch.topk(total, width)
        parent, token = flat // vocab, flat % vocab
        cand_seq = torch.take_along_dim(alive_seq, parent[..., None], dim=1)
        cand_seq[:, :, cur_len] = token
        if track_beams:
            cand_beams = torch.take_along_dim(alive_beams, parent[..., None], dim=1)
            cand_beams[:, :, cur_len - prompt] = (parent + sentence[:, None] * k).to(torch.int32)
        if end_tokens is not None:
            ends = torch.isin(token, end_tokens)
        else:
            scores_so_far = collected["scores"] if keep["output_scores"] else None
            ends = end_criteria(cand_seq.view(active * width, max_length)[:, :cur_len + 1], scores_so_far)
            ends = ends.view(active, width)
        at_limit = cur_len + 1 >= max_length

        # c. Step 4: the live hypotheses of the next step, the k most probable that did not end.
        alive_candidates = cand_logp + ends.to(torch.float32) * EXCLUDED
        chosen = torch.topk(alive_candidates, k).indices
        alive_seq = torch.take_along_dim(cand_seq, chosen[..., None], dim=1)
        alive_logp = torch.take_along_dim(alive_candidates, chosen, dim=1)
        beam_idx = torch.take_along_dim(parent, chosen, dim=1) + torch.arange(active, device=device)[:, None] * k
        if track_beams:
            alive_beams = torch.take_along_dim(cand_beams, chosen[..., None], dim=1)

        # d. Step 3: candidates that end are scored with the length penalty and may join the finished.
        finishing = ends & ~frozen[:, None] if paper_rule else (ends | at_limit) & may_finish
        if bool(finishing.any()):
            length = cur_len + 1 - prompt
            scores = cand_logp / length_penalty(length, alpha)
            if not paper_rule:  # transformers' own arithmetic, in its order, so that the numbers are the same
                full = finished.real.all(dim=1, keepdim=True) & (early_stopping is True)
                scores = scores + full.to(torch.float32) * EXCLUDED
                scores = scores + (~open_rule[:, None]).to(torch.float32) * EXCLUDED
            scores = scores + (~finishing) * EXCLUDED
            finished.merge(cand_seq, scores, finishing, length, cand_beams if track_beams else None)

        cur_len += 1
        # e. Step 5: which sentences are done.
        best_length = max_length - prompt if (alpha > 0 and (paper_rule or early_stopping == "never")) \
            else cur_len - prompt
        if paper_rule:
            bound = alive_logp[:, 0] / length_penalty(best_length, alpha)
            returned = n_return - 1  # the finished hypothesis returned last; sorted best first
            frozen = frozen | (finished.real[:, returned] & (finished.score[:, returned] > bound))
            go_on = not bool(frozen.all())  # a done sentence cannot change any more
        else:
            best_possible = alive_logp[:, :1] / length_penalty(best_length, alpha)
            worst = torch.where(finished.real, finished.score.min(dim=1, keepdim=True).values, EXCLUDED)
            open_rule = open_rule & torch.any(best_possible > worst, dim=-1)
            all_full = finished.real.all(dim=1)
            frozen = ~open_rule | (all_full & (early_stopping is True))
            # transformers' loop condition; with rows leaving, also stop once all that stay are done
            # (a done sentence cannot change any more).
            go_on = ((bool(open_rule.any()) or left_open)
                     and not (bool(all_full.all()) and left_all_full and early_stopping is True)
                     and not bool(ends.all())
                     and not (compact and bool(frozen.all())))
        if beam_trace is not None:
            _trace_step(beam_trace, batch, sentence, cur_len - prompt, prompt, alive_seq, alive_logp, finished,
                        frozen | at_limit | (not go_on), max_length - prompt, length_penalty, alpha)
        if at_limit or not go_on:
            results.store(sentence, finished, alive_seq, alive_logp, alive_beams, cur_len - prompt,
                          length_penalty, alpha, fill_from_alive=paper_rule)
            break

        # f. Done sentences leave the batch; the cache follows the chosen parents.
        if compact and bool(frozen.any()):
            done = frozen
            results.store(sentence[done], finished.select(done), alive_seq[done], alive_logp[done],
                          alive_beams[done], cur_len - prompt, length_penalty, alpha, fill_from_alive=paper_rule)
            if not paper_rule:
                left_open = left_open or bool(open_rule[done].any())
                left_all_full = left_all_full and bool(finished.real[done].all())
            stay = ~done
            sentence, alive_seq, alive_logp, alive_beams = sentence[stay], alive_seq[stay], alive_logp[stay], \
                alive_beams[stay]
            finished, open_rule, frozen = finished.select(stay), open_rule[stay], frozen[stay]
            beam_idx = beam_idx[stay]
            rows = beam_idx.view(-1)
            if cache is not None:
                cache.reorder_cache(rows)  # both caches: the rows of the sentences that stay
            rows_kept = (torch.arange(active, device=device)[stay][:, None] * k
                         + torch.arange(k, device=device)).view(-1)
            encoder_outputs = _select_rows(encoder_outputs, rows_kept)
            memory_mask = memory_mask[rows_kept] if memory_mask is not None else None
        elif cache is not None:
            reorder = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
            reorder.reorder_cache(beam_idx.view(-1))

    sequences, sequences_scores, beam_indices = results.output()
    if not return_dict:
        return sequences
    return GenerateBeamEncoderDecoderOutput(
        sequences=sequences,
        sequences_scores=sequences_scores if keep["output_scores"] else None,
        scores=collected["scores"] if keep["output_scores"] else None,
        logits=collected["logits"] if keep["output_logits"] else None,
        beam_indices=beam_indices,
        encoder_attentions=encoder_outputs.get("attentions") if keep["output_attentions"] else None,
        encoder_hidden_states=encoder_outputs.get("hidden_states") if keep["output_hidden_states"] else None,
        decoder_attentions=collected["decoder_attentions"] if keep["output_attentions"] else None,
        cross_attentions=collected["cross_attentions"] if keep["output_attentions"] else None,
        decoder_hidden_states=collected["decoder_hidden_states"] if keep["output_hidden_states"] else None,
        **{_OUTPUT_CACHE_FIELD: cache},
    )


class _Finished:
    """The k best finished hypotheses of every active sentence, best first (empty places: EXCLUDED)."""

    def __init__(self, batch, k, max_length, fill, device, tensors=None):
        if tensors is not None:
            self.seq, self.score, self.real, self.length, self.beams = tensors
            return
        self.seq = torch.full((batch, k, max_length), fill, dtype=torch.long, device=device)
        self.score = torch.full((batch, k), EXCLUDED, device=device)
        self.real = torch.zeros(batch, k, dtype=torch.bool, device=device)
        self.length = torch.zeros(batch, k, dtype=torch.long, device=device)
        self.beams = None

    def merge(self, cand_seq, cand_score, cand_real, length, cand_beams=None):
        """Keep the k best of the finished and the candidates (excluded candidates score ≤ EXCLUDED)."""
        k = self.score.shape[1]
        score = torch.cat((self.score, cand_score), dim=1)
        best = torch.topk(score, k).indices
        self.score = torch.take_along_dim(score, best, dim=1)
        self.seq = torch.take_along_dim(torch.cat((self.seq, cand_seq), dim=1), best[..., None], dim=1)
        self.real = torch.take_along_dim(torch.cat((self.real, cand_real), dim=1), best, dim=1)
        lengths = torch.cat((self.length, torch.full_like(cand_real, length, dtype=torch.long)), dim=1)
        self.length = torch.take_along_dim(lengths, best, dim=1)
        if cand_beams is not None:
            if self.beams is None:
                self.beams = torch.full_like(cand_beams[:, :k], -1)
            self.beams = torch.take_along_dim(torch.cat((self.beams, cand_beams), dim=1), best[..., None], dim=1)

    def select(self, rows):
        beams = self.beams[rows] if self.beams is not None else None
        return _Finished(None, None, None, None, None,
                         (self.seq[rows], self.score[rows], self.real[rows], self.length[rows], beams))


class _Results:
    """The returned hypotheses of every sentence of the batch, written when the sentence is done."""

    def __init__(self, batch, n, max_length, fill, device):
        self.n = n
        self.seq = torch.full((batch, n, max_length), fill, dtype=torch.long, device=device)
        self.score = torch.zeros(batch, n, device=device)
        self.length = torch.zeros(batch, n, dtype=torch.long, device=device)
        self.beams = None
        self.prompt = None

    def store(self, sentence, finished, alive_seq, alive_logp, alive_beams, alive_length, length_penalty, alpha,
              fill_from_alive):
        n = self.n
        seq, score, length = finished.seq[:, :n], finished.score[:, :n], finished.length[:, :n]
        beams = finished.beams[:, :n] if finished.beams is not None else torch.full_like(alive_beams[:, :n], -1)
        if fill_from_alive and not bool(finished.real[:, :n].all()):
            # Step 6: fewer than n finished by the length limit; the best live hypotheses fill the rest.
            real = finished.real[:, :n]
            from_alive = (torch.arange(n, device=real.device) - real.sum(dim=1, keepdim=True)).clamp(min=0)
            alive_score = alive_logp / length_penalty(alive_length, alpha)
            seq = torch.where(real[..., None], seq, torch.take_along_dim(alive_seq, from_alive[..., None], dim=1))
            score = torch.where(real, score, torch.take_along_dim(alive_score, from_alive, dim=1))
            length = torch.where(real, length, torch.full_like(length, alive_length))
            beams = torch.where(real[..., None], beams, torch.take_along_dim(alive_beams, from_alive[..., None], 1))
        self.seq[sentence], self.score[sentence], self.length[sentence] = seq, score, length
        if self.beams is None:
            self.beams = torch.full((self.seq.shape[0], n, beams.shape[-1]), -1, dtype=torch.int32,
                                    device=beams.device)
            self.prompt = self.seq.shape[-1] - beams.shape[-1]
        self.beams[sentence] = beams.to(torch.int32)

    def output(self):
        """(sequences (B·n, prompt + longest), scores (B·n,), beam indices (B·n, longest))."""
        longest = int(self.length.max())
        sequences = self.seq.flatten(0, 1)[:, :self.prompt + longest]
        return sequences, self.score.flatten(), self.beams.flatten(0, 1)[:, :longest]


def _trace_step(trace, batch, sentence, length, prompt, alive_seq, alive_logp, finished, done, max_new, lp, alpha):
    """One step of the beam trace: per sentence (input order), live and finished hypotheses, bound, done."""
    previous = trace[-1] if trace else None
    step = {name: list(previous[name]) if previous else [None] * batch for name in ("alive", "finished", "bound", "done")}
    step["step"] = length
    for row, index in enumerate(sentence.tolist()):
        step["alive"][index] = [(alive_seq[row, j, prompt:prompt + length].tolist(), float(alive_logp[row, j]),
                                 float(alive_logp[row, j]) / lp(length, alpha)) for j in range(alive_seq.shape[1])
                                if float(alive_logp[row, j]) > EXCLUDED / 2]
        step["finished"][index] = [
            (finished.seq[row, j, prompt:prompt + int(finished.length[row, j])].tolist(),
             float(finished.score[row, j]) * lp(int(finished.length[row, j]), alpha), float(finished.score[row, j]))
            for j in range(finished.score.shape[1]) if bool(finished.real[row, j])]
        step["bound"][index] = float(alive_logp[row, 0]) / lp(max_new, alpha)
        step["done"][index] = bool(done[row]) if isinstance(done, torch.Tensor) else bool(done)
    trace.append(step)


def _collect(collected, keep, outputs, logits, log_probs):
    """What `return_dict_in_generate` asked for, step by step, as transformers collects it."""
    if keep["output_logits"]:
        collected["logits"] += (logits.clone(),)
    if keep["output_scores"]:
        collected["scores"] += (log_probs.clone(),)
    if keep["output_attentions"]:
        collected["decoder_attentions"] += (outputs.decoder_attentions,)
        collected["cross_attentions"] += (outputs.cross_attentions,)
    if keep["output_hidden_states"]:
        collected["decoder_hidden_states"] += (outputs.decoder_hidden_states,)


def _is_dynamic(cache) -> bool:
    """Rows can leave only a cache that grows and shrinks (not a static one)."""
    caches = (cache.self_attention_cache, cache.cross_attention_cache) if isinstance(cache, EncoderDecoderCache) \
        else (cache,)
    return all(isinstance(c, DynamicCache) and all(type(layer) is DynamicLayer for layer in c.layers) for c in caches)


def _select_rows(encoder_outputs, rows):
    """The encoder output (and whatever it carries per row) of the rows that stay."""
    selected = type(encoder_outputs)(**{name: value for name, value in encoder_outputs.items()})
    selected["last_hidden_state"] = encoder_outputs.last_hidden_state[rows]
    return selected


# ---- choosing the search: the generation config's two entries ------------------------------------

def check_settings(length_penalty_formula, beam_termination) -> None:
    if length_penalty_formula not in (None, *LENGTH_PENALTIES):
        raise ValueError(f"length_penalty_formula must be one of {sorted(LENGTH_PENALTIES)} (or None), "
                         f"got {length_penalty_formula!r}.")
    if beam_termination not in (None, *BEAM_TERMINATIONS):
        raise ValueError(f"beam_termination must be one of {list(BEAM_TERMINATIONS)} (or None), "
                         f"got {beam_termination!r}.")


def decode(model, input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus=False,
           length_penalty_formula=None, beam_termination=None, beam_trace=None, **model_kwargs):
    """A decoding method for `generate(custom_generate=...)`: this beam search for beam search,
    transformers' own method for every other mode (greedy search, sampling)."""
    mode = generation_config.get_generation_mode()
    if mode == GenerationMode.BEAM_SEARCH:
        return beam_search(model, input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus,
                           length_penalty_formula, beam_termination, beam_trace, **model_kwargs)
    method = GENERATION_MODES_MAPPING.get(mode)
    if method is None or not hasattr(GenerationMixin, method) or mode == GenerationMode.ASSISTED_GENERATION:
        raise ValueError(f"{mode.value} is not available together with length_penalty_formula / beam_termination; "
                         "pass length_penalty_formula=None, beam_termination=None for transformers' own decoding.")
    return getattr(type(model), method)(model, input_ids, logits_processor=logits_processor,
                                        stopping_criteria=stopping_criteria, generation_config=generation_config,
                                        synced_gpus=synced_gpus, **model_kwargs)


def choose_decoding(model, generation_config, kwargs: dict, default=None):
    """The `custom_generate` for a generate() call, or None for transformers' own decoding.

    Removes the two settings from `kwargs` (generate's keyword arguments) when given there; otherwise
    reads them from `generation_config`, then from `model.generation_config`. With neither set, `default`
    (a dict of both) applies; if that is None too, transformers decodes as it always does.
    """
    settings = {}
    for name in SETTINGS:
        if name in kwargs:
            settings[name] = kwargs.pop(name)
        elif generation_config is not None and hasattr(generation_config, name):
            settings[name] = getattr(generation_config, name)
        else:
            settings[name] = getattr(getattr(model, "generation_config", None), name, None)
    if all(value is None for value in settings.values()):
        if default is None:
            return None
        settings = dict(default)
    check_settings(**settings)
    if kwargs.get("streamer") is not None or kwargs.get("assistant_model") is not None:
        return None  # streaming and assisted decoding: transformers' own path (its beam search refuses both)
    if not getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        return None  # the search decodes encoder–decoder models
    return functools.partial(decode, **settings)


# ---- custom_generate/generate.py ------------------------------------------------------------------

PAPER_SEARCH = {"length_penalty_formula": "gnmt", "beam_termination": "bound"}


def generate(*args, model, **kwargs):
    """`model.generate` of a model loaded from a folder with this file as custom_generate/generate.py.

    Our models' own `generate` applies §6.1's length limit and chooses the search from the generation
    config; it runs as it is. Any other model decodes with the paper's search unless its generation
    config (or the call) chooses otherwise.
    """
    if getattr(type(model), "chooses_beam_search", False):
        return type(model).generate(model, *args, **kwargs)
    if kwargs.get("custom_generate") is None:
        kwargs["custom_generate"] = choose_decoding(model, kwargs.get("generation_config"), kwargs,
                                                    default=PAPER_SEARCH)
    return GenerationMixin.generate(model, *args, **kwargs)
